"""满足表达式 / expr expressions: the allow-list refuses every way out, and the corpora still work."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from rules_helpers import parse

from stages.rules.expressions import (
    ExpressionError,
    ExpressionRefused,
    compile_expression,
    expression_globals,
)
from stages.rules.functions import RuleModules

REPO = Path(__file__).resolve().parents[1]

# Each is refused when the rules are loaded (a rule error naming the construct).
REFUSED_AT_LOAD = [
    ("__import__('os').system('touch {sentinel}')", "'__import__'"),
    ("re.__builtins__['__import__']('os')", "'__builtins__'"),
    ("().__class__.__base__.__subclasses__()", "'__subclasses__'"),
    ("[c for c in ().__class__.__mro__]", "'__mro__'"),
    ("open('{sentinel}', 'w')", "'open'"),
    ("eval('1')", "'eval'"),
    ("exec('x = 1')", "'exec'"),
    ("getattr(d, 'upper')", "'getattr'"),
    ("globals()", "'globals'"),
    ("vars(re)", "'vars'"),
    ("type(d)", "'type'"),
    ("compile('1', 'x', 'eval')", "'compile'"),
    ("breakpoint()", "'breakpoint'"),
    ("__builtins__", "'__builtins__'"),
    ("re.sre_compile", "re.sre_compile"),
    ("re._compile('x', 0)", "'_compile'"),
    ("re.enum", "re.enum"),
    ("re.functools", "re.functools"),
    ("re.copyreg", "re.copyreg"),
    ("'{0.__class__}'.format(d)", "'format'"),
    ("'{x}'.format_map({'x': d})", "'format_map'"),
    ("(x for x in d).gi_frame.f_back.f_globals", "'f_globals'"),
    ("(lambda: 0).__code__", "'__code__'"),
    ("d.__init__.__globals__", "'__globals__'"),
    ("res_filter.__dict__", "'__dict__'"),
    ("res_store.os", "res_store.os is not a predefined set"),
    ("(len := print)", "NamedExpr"),
    ("[x for x in d if (y := x)]", "NamedExpr"),
    ("f'{d.__class__}'", "'__class__'"),
    ("str.mro()", "'mro'"),
    ("d._private", "'_private'"),
    ("[__x for __x in d]", "'__x'"),
    ("(lambda __a: __a)(1)", "'__a'"),
    ("await d", "Await"),
    ("d +", "does not compile"),
    ("import os", "does not compile"),
    ("d; import os", "does not compile"),
    ("(yield d)", "Yield"),
]

# Each passes the allow-list and is refused while it runs: the value fails, nothing happens.
REFUSED_AT_RUN = [
    ("d.getroottree().write('{sentinel}')", "'getroottree'"),
    ("d.xpath('/*')", "'xpath'"),
    ("(x for x in 'ab').send(None)", "'send'"),
    ("len.x", "'x' of a builtin_function_or_method"),
    ("sorted(d).pop.x", "'x' of a builtin_function_or_method"),
    ("10 ** 10 ** 8 > 0", "too large"),
    ("len('a' * 10 ** 9) > 0", "too large"),
    ("len([0] * 10 ** 9) > 0", "too large"),
    ("(1 << 10 ** 9) > 0", "too large"),
    ("[re for re in [len]][0].x", "'x' of a builtin_function_or_method"),
]

# spec/rules.md "Decision (what expressions offer)", construct by construct: each is a rule error
# naming the construct (the second item is what the message must hold).
DECISION_REFUSED_AT_LOAD = [
    pytest.param("isinstance(d, str)", "'isinstance'", id="name-not-listed"),
    pytest.param("open('{sentinel}', 'w')", "'open'", id="name-not-listed-open"),
    pytest.param("x", "'x'", id="name-not-bound"),
    pytest.param("[y for x in d]", "'y'", id="name-not-bound-in-comprehension"),
    pytest.param("__import__('os')", "'__import__'", id="dunder-name"),
    pytest.param("[__x for __x in d]", "'__x'", id="dunder-name-bound"),
    pytest.param("(lambda __a: __a)(d)", "'__a'", id="dunder-lambda-parameter"),
    pytest.param("d._tail", "'_tail'", id="underscore-attribute"),
    pytest.param("d.__class__", "'__class__'", id="dunder-attribute"),
    pytest.param("'{0.__class__}'.format(d)", "'format'", id="format"),
    pytest.param("'{x}'.format_map({'x': d})", "'format_map'", id="format_map"),
    pytest.param("str.mro()", "'mro'", id="mro"),
    pytest.param("(x for x in d).gi_frame", "'gi_frame'", id="gi_frame"),
    pytest.param("(x for x in d).gi_code", "'gi_code'", id="gi_code"),
    pytest.param("(x for x in d).gi_suspended", "'gi_suspended'", id="gi_suspended"),
    pytest.param("(x for x in d).gi_yieldfrom", "'gi_yieldfrom'", id="gi_yieldfrom"),
    pytest.param("d.cr_frame", "'cr_frame'", id="cr_frame"),
    pytest.param("d.cr_origin", "'cr_origin'", id="cr_origin"),
    pytest.param("d.ag_frame", "'ag_frame'", id="ag_frame"),
    pytest.param("d.ag_running", "'ag_running'", id="ag_running"),
    pytest.param("d.f_back", "'f_back'", id="f_back"),
    pytest.param("d.f_globals", "'f_globals'", id="f_globals"),
    pytest.param("d.f_lineno", "'f_lineno'", id="f_lineno"),
    pytest.param("d.f_trace", "'f_trace'", id="f_trace"),
    pytest.param("d.tb_frame", "'tb_frame'", id="tb_frame"),
    pytest.param("d.tb_lineno", "'tb_lineno'", id="tb_lineno"),
    pytest.param("d.co_code", "'co_code'", id="co_code"),
    pytest.param("re.purge()", "re.purge", id="re-function-not-listed"),
    pytest.param("re.template('a')", "re.template", id="re-template"),
    pytest.param("re.Pattern", "re.Pattern", id="re-class"),
    pytest.param("re.error", "re.error", id="re-exception"),
    pytest.param("re.sre_compile", "re.sre_compile", id="re-module"),
    pytest.param("re.DEBUG", "re.DEBUG", id="re-debug-flag-prints"),
    pytest.param("res_store.os", "res_store.os", id="res_store-not-a-set"),
    pytest.param("res_store.ALL_RES", "res_store.ALL_RES", id="res_store-1x-name"),
    pytest.param("res_filter.sys", "res_filter.sys", id="res_filter-not-a-set"),
    pytest.param("res_filter.res_in_disk", "res_filter.res_in_disk", id="res_filter-2.0-name"),
    pytest.param("(y := d)", "NamedExpr", id="assignment-expression"),
    pytest.param("[x for x in d if (y := x)]", "NamedExpr", id="assignment-in-comprehension"),
    pytest.param("await d", "Await", id="await"),
    pytest.param("(yield d)", "Yield", id="yield"),
    pytest.param("(yield from d)", "YieldFrom", id="yield-from"),
    pytest.param("[(yield) for x in d]", "Yield", id="yield-in-comprehension"),
]

# What the same paragraph allows: listed names, names the expression binds, re's functions and
# flags, the predefined sets and functions.
DECISION_ALLOWED = [
    "len(d) + int('1') + float(1) + abs(-1) + sum([1]) > 0",
    "str(d) and bool(d) and list(d) and tuple(d) and dict(a=d) and set(d)",
    "any(d) or all(d) or min(d) or max(d) or sorted(d)",
    "[x for x in d] and (lambda y: y)(d) and {k: v for k, v in [(d, d)]}",
    "re.compile('a', re.IGNORECASE | re.I | re.MULTILINE | re.M | re.DOTALL | re.S)",
    "re.search('a', d, re.VERBOSE | re.X | re.ASCII | re.A | re.UNICODE | re.U | re.NOFLAG)",
    "[re.match, re.fullmatch, re.findall, re.finditer, re.sub, re.subn, re.split, re.escape]",
    "[re.LOCALE, re.L]",
    "[res_store.res_in_repo, res_store.res_in_disk, res_store.res_virt_info, res_store.ilevels]",
    "[res_filter.ALL_RES, res_filter.ALL_RES_GUID, res_filter.ALL_USED_FILTER]",
    "[res_filter.ALL_USED_ILEVEL, res_filter.guidToRealPath, res_filter.guidToResourcePath]",
    "[res_filter.getResourcesInILevel, res_filter.validGUID]",
    "d.strip().lower().f.x if False else d",  # f and x are not frame attributes
]


@pytest.mark.parametrize("source,construct", DECISION_REFUSED_AT_LOAD)
def test_each_construct_the_decision_lists_is_a_rule_error_naming_it(tmp_path, source, construct):
    """Loading a rule whose expression reaches outside what expressions offer gives a rule error
    (not a failure of every value) whose message names the construct; nothing runs."""
    from stages.rules.loader import load_rules

    sentinel = tmp_path / "escaped"
    rule = {
        "id": "r",
        "rpath": "x",
        "xpath": "R,I",
        "condition": ["满足表达式", source.replace("{sentinel}", str(sentinel))],
    }
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump([rule], allow_unicode=True), encoding="utf-8")
    ruleset = load_rules([path], root=tmp_path.as_posix(), allow_custom_code=False)
    assert ruleset.rules == []
    [error] = ruleset.rule_errors
    assert error.rule == "r" and construct in error.message, error.message
    assert not sentinel.exists()


@pytest.mark.parametrize("source", DECISION_ALLOWED)
def test_what_the_decision_offers_compiles(source):
    compile_expression(source)


def test_at_run_time_what_the_decision_refuses_fails_that_value_only():
    """Run-time part of the Decision: an attribute read that is not of plain data, and
    arithmetic too large to compute, fail the value (with the reason), not the other values."""
    from stages.rules.conditions import check, compile_condition

    class Env:
        timeout = 5.0

        def expression_globals(self):
            return expression_globals(NAMESPACES)

    root = parse("<Root><Item/></Root>")
    for source, value, reason in [
        ("d == 'ok' or d.getroottree() is None", root[0], "'getroottree' of a _Element"),
        ("d == 'ok' or len.x", 1, "'x' of a builtin_function_or_method"),
        ("d == 'ok' or 10 ** 10 ** d > 0", 8, "too large"),
        ("d == 'ok' or (1 << 10 ** d) > 0", 9, "too large"),
        ("d == 'ok' or len('a' * 10 ** d) > 0", 9, "too large"),
    ]:
        condition = compile_condition(
            ["expr", source], custom_names=frozenset(), index_available=True
        )
        verdict = check(condition, ["ok", value, "ok"], [1, 2, 3], Env())
        assert verdict.errors == [value] and verdict.lines == [2], source
        assert reason in verdict.message and source in verdict.message, verdict.message


NAMESPACES = RuleModules(
    SimpleNamespace(res_in_repo={"g1": ("r1",)}, res_in_disk={}, res_virt_info={}, ilevels=set()),
    SimpleNamespace(ALL_RES={"g1": [("Dev/a", 1)]}, ALL_RES_GUID={}, ALL_USED_FILTER=set()),
)


def evaluate(source: str, d):
    scope = expression_globals(NAMESPACES)
    scope["d"] = d
    return eval(compile_expression(source).code, scope)  # noqa: S307 - the code under test


@pytest.mark.parametrize("source,construct", REFUSED_AT_LOAD)
def test_expression_attacks_are_refused_at_load(tmp_path, source, construct):
    """Each way out of the expression language is a rule error that names the construct."""
    sentinel = tmp_path / "escaped"
    with pytest.raises(ExpressionError) as raised:
        compile_expression(source.replace("{sentinel}", str(sentinel)))
    assert construct in str(raised.value)
    assert not sentinel.exists()


@pytest.mark.parametrize("source,reason", REFUSED_AT_RUN)
def test_expression_attacks_are_refused_while_running(tmp_path, source, reason):
    """What names alone cannot refuse is refused at run time, before it happens."""
    sentinel = tmp_path / "escaped"
    element = parse("<Root><Item>x</Item></Root>")
    with pytest.raises(ExpressionRefused) as raised:
        evaluate(source.replace("{sentinel}", str(sentinel)), element)
    assert reason in str(raised.value)
    assert not sentinel.exists()


def test_a_refused_value_fails_with_the_reason_and_the_other_values_pass():
    """At run time a refusal fails that value only, naming the attribute (per spec: a value that
    raises fails)."""
    from stages.rules.conditions import check, compile_condition

    class Env:
        timeout = 5.0

        def expression_globals(self):
            return expression_globals(NAMESPACES)

    condition = compile_condition(
        ["expr", "d == 'ok' or d.getroottree() is None"],
        custom_names=frozenset(),
        index_available=True,
    )
    root = parse("<Root><Item/></Root>")
    verdict = check(condition, ["ok", root[0], "ok"], [1, 2, 3], Env())
    assert verdict.errors == [root[0]] and verdict.lines == [2]
    assert "'getroottree' of a _Element is not available" in verdict.message


@pytest.mark.parametrize(
    "source,value,expected",
    [
        ("re.fullmatch('[0-9a-f]{32}', d) is not None", "0" * 32, True),
        ("bool(re.search('(?i)mat$', d))", "Wood_MAT", True),
        ("re.compile('a+').sub('b', d)", "caat", "cbt"),
        ("re.IGNORECASE == re.I", "", True),
        ("[m.group(0) for m in re.finditer('[0-9]', d)]", "a1b2", ["1", "2"]),
        ("d.endswith('_mat')", "x_mat", True),
        ("sorted(d.split(','), key=lambda s: -len(s))[0]", "a,bbb,cc", "bbb"),
        ("{k: v for k, v in d.items() if v}", {"a": 1, "b": 0}, {"a": 1}),
        ("f'{d!r:>6}'", "x", "   'x'"),
        ("str.join('-', d)", ["a", "b"], "a-b"),
        ("dict.fromkeys(d, 0)", ["a"], {"a": 0}),
        ("max(int(v) for v in d).bit_length()", ["5", "2048"], 12),
        ("2 ** 10 + (3 << 2) + len('ab' * 3)", None, 1024 + 12 + 6),
        ("d in res_filter.ALL_RES and len(res_filter.ALL_RES[d]) == 1", "g1", True),
        ("not any(r[0].startswith('Dev/') for r in res_filter.ALL_RES.get(d, []))", "g1", False),
        ("all(c in d for c in 'ab')", "abc", True),
        ("[_ for _ in d][0]", "q", "q"),
        ("d.keys() - {'a'}", {"a": 1, "b": 2}, {"b"}),
    ],
)
def test_what_rules_need_still_works(source, value, expected):
    """Methods of values, re's functions and flags, comprehensions, lambdas, f-strings, the index."""
    assert evaluate(source, value) == expected


def test_element_values_offer_read_only_navigation():
    """An extracted element ({dom}) can be read and navigated, not written through."""
    root = parse('<Root><Item kind="a">x<Sub>y</Sub></Item></Root>')
    item = root[0]
    assert evaluate("d.get('kind') == 'a' and d.findtext('Sub') == 'y'", item) is True
    assert evaluate("d.getparent().tag + str(d.sourceline)", item) == "Root1"
    assert evaluate("sorted(d.attrib.keys())", item) == ["kind"]


def _expressions_of(path: Path) -> list[str]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    rules = data.values() if isinstance(data, dict) else data
    return [
        rule["condition"][1]
        for rule in rules
        if isinstance(rule, dict)
        and isinstance(rule.get("condition"), list)
        and rule["condition"][:1] in (["满足表达式"], ["expr"])
    ]


def _rule_files(shared: Path | None) -> list[Path]:
    files = sorted((REPO / "configs" / "rules").glob("*.yaml"))
    if shared is not None:
        files.append(shared / "examples" / "demo" / "rules.yaml")
    return files


def test_every_expression_of_the_shipped_libraries_compiles():
    """configs/rules/*.yaml: every expression passes the allow-list."""
    expressions = [e for path in _rule_files(None) for e in _expressions_of(path)]
    assert len(expressions) >= 9
    for source in expressions:
        compile_expression(source)


def test_every_expression_of_the_demo_compiles(shared_dir):
    """The conformance demo's expressions pass the allow-list (the demo tests check results)."""
    expressions = _expressions_of(shared_dir / "examples" / "demo" / "rules.yaml")
    assert expressions
    for source in expressions:
        compile_expression(source)
