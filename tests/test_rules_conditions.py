"""Conditions (spec/rules.md "Conditions"): every method, its aliases, and its edge cases."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from rules_helpers import parse

from orchestrator.errors import CacheCorrupt, MissingInput
from stages.rules.conditions import (
    ConditionError,
    check,
    compile_condition,
    interpret_return,
    lines_of,
)
from stages.rules.expressions import expression_globals
from stages.rules.functions import RuleModules

RES_IN_REPO = {"g1": ("r1",), "g2": ("r2a", "r2b")}


class Env:
    """A stand-in for the engine's per-source environment."""

    filepath = "/p/file.xml"
    timeout = 5.0

    def container(self, name):
        return {
            "res_store.res_in_repo": RES_IN_REPO,
            "res_filter.ALL_RES": RES_IN_REPO,
            "res_store.ilevels": frozenset({"/p/a.ilevel"}),
        }[name]

    def expression_globals(self):
        res_store = SimpleNamespace(res_in_repo=RES_IN_REPO)
        res_filter = SimpleNamespace(ALL_RES={k: list(v) for k, v in RES_IN_REPO.items()})
        return expression_globals(RuleModules(res_store, res_filter))


def run(condition: list, values: list, lines: list | None = None):
    compiled = compile_condition(condition, custom_names=frozenset(), index_available=True)
    return check(compiled, values, lines or [None] * len(values), Env())


@pytest.mark.parametrize("method", ["存在", "exists"])
def test_exists(method):
    """存在/exists fails the false values; an element is always true."""
    element = parse("<a/>")  # no children: len() == 0, yet extracted elements are true
    verdict = run([method], ["x", "", 0, None, element], [1, 2, 3, 4, 5])
    assert verdict.errors == ["", 0, None] and verdict.lines == [2, 3, 4]


@pytest.mark.parametrize("method", ["不存在", "not_exists"])
def test_not_exists(method):
    """不存在/not_exists fails the true values."""
    assert run([method], ["", "D:/a.psd", ""]).errors == ["D:/a.psd"]


@pytest.mark.parametrize("method", ["存在于", "in"])
def test_in_predefined_set_uses_dict_keys(method):
    """存在于/in with artfunc_<dict set> checks the keys."""
    assert run([method, "artfunc_res_store.res_in_repo"], ["g1", "g3", "g2"]).errors == ["g3"]
    assert run([method, "artfunc_res_filter.ALL_RES"], ["g3"]).errors == ["g3"]


@pytest.mark.parametrize("method", ["不存在于", "not_in"])
def test_not_in_literal_list(method):
    """不存在于/not_in with a Python list literal fails the listed values."""
    assert run([method, "['Sound', 'Video']"], ["Mesh", "Sound"]).errors == ["Sound"]


def test_in_literal_forms():
    """S may be a list/tuple/set literal string or a YAML list."""
    assert run(["in", "['Material', 'Mesh']"], ["Mesh", "Sound"]).errors == ["Sound"]
    assert run(["in", "('Material',)"], ["Sound"]).errors == ["Sound"]
    assert run(["in", "{'Material'}"], ["Material"]).failed is False
    assert run(["in", ["Material", "Mesh"]], ["Mesh", "Sound"]).errors == ["Sound"]


def test_in_with_unhashable_values_compares_by_equality():
    """A dict value is looked up in a literal list by equality, not by hashing."""
    assert run(["in", [{"a": 1}]], [{"a": 1}, {"a": 2}]).errors == [{"a": 2}]


def test_in_predefined_set_with_unhashable_value_fails_with_message():
    """An exception while checking a value makes it fail, and the message carries it."""
    verdict = run(["in", "artfunc_res_store.res_in_repo"], [["g1"]])
    assert verdict.errors == [["g1"]] and "unhashable" in verdict.message


@pytest.mark.parametrize("negate", [False, True])
@pytest.mark.parametrize(
    "members", ["artfunc_res_store.res_in_repo", ["g1", "g2", 7], "['g1', 'g2', 7]"]
)
def test_membership_of_many_values_matches_the_per_value_definition(members, negate):
    """存在于/不存在于 over mixed values (a pass over all of them) fails exactly the values the
    per-value test fails, with their lines, in order; an unhashable value among them is still
    checked as one value is (a failure with its reason, or compared by equality)."""
    method = "not_in" if negate else "in"
    values = ["g1", "g3", 7, 7.0, True, "", None, ("g1",), "g2", "g3"]
    lines = list(range(10, 20))
    verdict = run([method, members], values, lines)
    predefined = isinstance(members, str) and members.startswith("artfunc_")
    known = set(RES_IN_REPO) if predefined else {"g1", "g2", 7}
    expected = [i for i, value in enumerate(values) if (value in known) is negate]
    assert verdict.errors == [values[i] for i in expected]
    assert verdict.lines == [lines[i] for i in expected]
    assert verdict.message is None
    mixed = run([method, members], [*values, ["g1"]], [*lines, 20])
    if predefined:  # an unhashable value cannot be looked up: it fails, with the reason
        assert mixed.errors == [*verdict.errors, ["g1"]] and "unhashable" in mixed.message
    else:  # a literal compares it by equality: ["g1"] is no member
        assert mixed.errors == verdict.errors + ([] if negate else [["g1"]])
        assert mixed.message is None


def test_unique_over_strings_and_other_values():
    """唯一 reports each repeated value once, at its first repeat, strings and others alike."""
    verdict = run(["unique"], ["a", 1, "a", "1", 1, "a", ("x",), ("x",)], list(range(8)))
    assert verdict.errors == ["a", 1, ("x",)] and verdict.lines == [2, 4, 7]


@pytest.mark.parametrize("method", ["空集合", "empty"])
def test_empty(method):
    """空集合/empty fails a non-empty source, listing its values."""
    assert run([method], []).failed is False
    verdict = run([method], ["a", "b"], [3, 4])
    assert verdict.errors == ["a", "b"] and verdict.lines == [3, 4]


@pytest.mark.parametrize("method", ["非空集合", "not_empty"])
def test_not_empty(method):
    """非空集合/not_empty fails an empty source with no values."""
    verdict = run([method], [])
    assert verdict.failed and verdict.errors == []
    assert run([method], ["x"]).failed is False


@pytest.mark.parametrize("method", ["唯一", "unique"])
def test_unique_reports_each_repeat_once_in_order(method):
    """唯一/unique reports each repeated value once, in order of first repetition."""
    verdict = run([method], ["a", "b", "b", "a", "b", "c"], [1, 2, 3, 4, 5, 6])
    assert verdict.errors == ["b", "a"] and verdict.lines == [3, 4]


def test_unique_compares_unhashable_values():
    """Lists compare as tuples, dicts as sorted items, sets as frozensets, elements by tag+line."""
    values = [["x"], ("x",), {"k": ["v"]}, {"k": ["v"]}, {1, 2}, {2, 1}]
    assert run(["unique"], values).errors == [("x",), {"k": ["v"]}, {1, 2}]
    root = parse("<r><a/><a/></r>")
    assert run(["unique"], [root[0], root[0], root[1]]).errors == [root[0]]


def test_empty_source_passes_per_value_conditions():
    """A source without values passes every per-value condition."""
    for condition in (["exists"], ["<=", 5], ["in", "['a']"], ["expr", "False"]):
        assert run(condition, []).failed is False


@pytest.mark.parametrize(
    "op,passing,failing",
    [
        ("<=", ["5000", "4999.5", " 12 "], ["5001"]),
        ("<", ["2999"], ["3000"]),
        (">", ["2"], ["1"]),
        (">=", ["1"], ["0.5"]),
        ("==", ["1", "1.0"], ["0"]),
        ("!=", ["0"], ["1"]),
    ],
)
def test_numeric_comparisons(op, passing, failing):
    """When the operand converts to float, values are compared as floats."""
    verdict = run([op, 5000 if op == "<=" else 3000 if op == "<" else 1], passing + failing)
    assert verdict.errors == failing


def test_numeric_comparison_fails_values_that_do_not_convert_even_for_not_equal():
    """A value that is not a number fails a numeric comparison, even !=, with a message."""
    verdict = run(["!=", 1], ["abc", "2"])
    assert verdict.errors == ["abc"] and "could not convert" in verdict.message


def test_string_comparison_when_operand_is_not_a_number():
    """When the operand is not a number, both sides are compared as strings."""
    assert run(["==", "ASTC_6x6"], ["ASTC_6x6", "ETC2"]).errors == ["ETC2"]
    assert run([">", "b"], ["a", "c"]).errors == ["a"]


@pytest.mark.parametrize("method", ["满足表达式", "expr"])
def test_expression_with_predefined_modules(method):
    """满足表达式/expr sees d, res_filter/res_store and the allowed builtins."""
    verdict = run(
        [method, "d in res_filter.ALL_RES and len(res_filter.ALL_RES[d]) == 1"], ["g1", "g2", "g3"]
    )
    assert verdict.errors == ["g2", "g3"]
    assert run([method, 'd.endswith("_mat")'], ["a_mat", "b"]).errors == ["b"]


def test_expression_sees_d_in_comprehensions_and_only_allowed_names():
    """d is a global (visible in comprehensions); another name is a rule error at load."""
    assert run(["expr", "all(c in d for c in 'ab')"], ["abc", "b"]).errors == ["b"]
    with pytest.raises(ConditionError, match="'open' is not available"):
        run(["expr", "open('/etc/passwd')"], ["x"])


def test_expression_raising_fails_that_value_with_message():
    """A KeyError inside the expression fails that value and names the error."""
    verdict = run(["expr", "res_filter.ALL_RES[d] is not None"], ["g1", "missing"])
    assert verdict.errors == ["missing"] and "KeyError" in verdict.message


@pytest.mark.parametrize(
    "condition,reason",
    [
        ("exists", "non-empty list"),
        ([], "non-empty list"),
        (["bogus"], "unknown method"),
        (["存在于"], "needs"),
        (["<="], "needs"),
        (["满足表达式"], "needs"),
        (["in", "artfunc_res_store.nothing"], "unknown predefined set"),
        (["in", "[Material, Mesh]"], "neither"),
        (["in", "'abc'"], "not a list"),
        (["in", {"a": 1}], "not a set"),
        (["expr", "d +"], "does not compile"),
        (["func_nothing"], "no function"),
        (["messiah_condfunc.nothing"], "unknown check"),
        ([5], "must be a string"),
    ],
)
def test_broken_conditions_are_rule_errors(condition, reason):
    """Each malformed condition raises ConditionError naming the reason."""
    with pytest.raises(ConditionError, match=reason):
        compile_condition(condition, custom_names=frozenset(), index_available=True)


def test_extra_arguments_are_ignored():
    """Arguments beyond what the method needs are ignored."""
    assert run(["exists", "extra", 1], ["x"]).failed is False
    assert run(["<=", 5, "extra"], ["6"]).errors == ["6"]


def test_predefined_sets_need_an_index():
    """Without a Messiah index, conditions naming predefined sets are rule errors."""
    with pytest.raises(ConditionError, match="index"):
        compile_condition(
            ["in", "artfunc_res_store.res_in_disk"], custom_names=frozenset(), index_available=False
        )
    with pytest.raises(ConditionError, match="index"):
        compile_condition(
            ["expr", "d in res_store.res_in_repo"], custom_names=frozenset(), index_available=False
        )


def test_builtin_check_aliases_resolve():
    """messiah_condfunc., condfunc. and g83_runner. name the same registered check."""
    refs = {
        compile_condition(
            [prefix + "srcTexConflict"], custom_names=frozenset(), index_available=True
        ).check.target
        for prefix in ("messiah_condfunc.", "condfunc.", "g83_runner.")
    }
    assert refs == {"stages.rules.builtins:src_tex_conflict"}


@pytest.mark.parametrize(
    "returned,failed,errors",
    [
        (["a"], True, ["a"]),
        (("a", "b"), True, ["a", "b"]),
        ([], False, []),
        (None, False, []),
        (True, False, []),
        (False, True, []),
        ("a", True, ["a"]),
        ((False, ["b"]), True, ["b"]),
        ((True, ["b"]), True, ["b"]),
        ((False, []), False, []),
        ((True, None), False, []),
    ],
)
def test_custom_condition_return_forms(returned, failed, errors):
    """2.0 lists, 1.x (ok, list) pairs (ok ignored), None/True, False and a string are read."""
    verdict = interpret_return(returned, ["a", "b"], [1, 2], "func_x")
    assert (verdict.failed, verdict.errors) == (failed, errors)


def test_custom_condition_returning_something_else_fails_with_message():
    """A return value that is not a list fails the source with errors [] and a message."""
    verdict = interpret_return(42, ["a"], [1], "func_x")
    assert verdict.failed and verdict.errors == [] and "int" in verdict.message


def test_lines_of_matches_failing_values_to_their_lines():
    """Returned failing values get the lines of equal input values, each used once."""
    assert lines_of(["b", "a", "b", "z"], ["a", "b", "b"], [1, 2, 3]) == [2, 1, 3, None]


@pytest.mark.parametrize(
    "raised", [CacheCorrupt("a stored value cannot be decoded"), MissingInput("x")]
)
def test_the_products_own_failure_in_a_value_test_is_no_verdict(raised):
    """An expression that reads the index decodes it lazily: a build state that fails to decode
    (CacheCorrupt: the run starts again) or a file the worker lacks (MissingInput: the unit
    is resent) is the product's to handle, never a failing value of the rule."""
    from stages.rules.conditions import _per_value

    def test(value):
        raise raised

    with pytest.raises(type(raised)):
        _per_value(test, ["a"], [1])
