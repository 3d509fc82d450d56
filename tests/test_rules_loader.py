"""Loading and compiling rules: rule files, rule errors, skipped rules, warnings."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest
from rules_helpers import make_index

from orchestrator.errors import RuleFileError
from stages.rules.loader import SkippedRule, load_rules

GOOD = {"rpath": "resource.repository$", "xpath": "*/Items/Item,GUID", "condition": ["exists"]}


def load(tmp_path: Path, text: str, **options):
    path = tmp_path / "rules.yaml"
    path.write_text(text, encoding="utf-8")
    options.setdefault("index", make_index(tmp_path))
    return load_rules([path], root=tmp_path.as_posix(), **options)


def rule_yaml(**fields) -> str:
    import yaml

    return yaml.safe_dump([{**GOOD, **fields}], allow_unicode=True)


def error_of(tmp_path, **fields) -> str:
    """The rule error's message after the rule file and line that every one starts with."""
    ruleset = load(tmp_path, rule_yaml(**fields))
    assert not ruleset.rules, "expected a rule error"
    assert len(ruleset.rule_errors) == 1
    message = ruleset.rule_errors[0].message
    where = re.match(r"[^:/]+\.yaml:\d+: ", message)
    assert where is not None, f"the rule file and line are not named: {message!r}"
    return message[where.end() :]


def test_invalid_yaml_raises_rule_file_error_with_line(tmp_path):
    """A rule file that is not YAML raises RuleFileError naming the file and line."""
    with pytest.raises(RuleFileError) as caught:
        load(tmp_path, "- id: a\n  rpath: [unclosed\n  xpath: x\n")
    assert caught.value.file.endswith("rules.yaml") and caught.value.line == 3


def test_scalar_rule_file_raises(tmp_path):
    """A rule file holding a scalar is neither a list nor a mapping."""
    with pytest.raises(RuleFileError, match="list of rules"):
        load(tmp_path, "just text\n")


def test_mapping_form_uses_keys_as_ids(tmp_path):
    """In the mapping form the key is the id, as a string."""
    ruleset = load(
        tmp_path,
        "12:\n  rpath: x\n  xpath: 'R/I'\n  condition: [exists]\n"
        "named:\n  name: shown\n  rpath: x\n  xpath: 'R/I'\n"
        "  condition: [exists]\n",
    )
    assert [r.label for r in ruleset.rules] == ["12", "named"]


def test_label_is_id_else_name(tmp_path):
    """A rule is labelled by its id, else its name."""
    ruleset = load(
        tmp_path,
        "- {id: the-id, name: n, rpath: x, xpath: R, condition: [exists]}\n"
        "- {name: only-name, rpath: x, xpath: R, condition: [exists]}\n",
    )
    assert [r.label for r in ruleset.rules] == ["the-id", "only-name"]


def test_rule_without_id_or_name_is_labelled_by_position(tmp_path):
    """A rule with neither id nor name is a rule error labelled #N (1-based)."""
    ruleset = load(tmp_path, rule_yaml(id="a") + "- {rpath: x, xpath: R, condition: [exists]}\n")
    assert ruleset.rule_errors[0].rule == "#2" and ruleset.total == 2


def test_unknown_field_suggests_the_close_one(tmp_path):
    """An unknown field is a rule error, with "did you mean"."""
    assert "did you mean 'condition'" in error_of(tmp_path, id="a", conditon=["exists"])


def test_misspelt_required_field_is_named_with_its_suggestion(tmp_path):
    """`xpaht:` leaves xpath missing: the message names the misspelling with the suggestion,
    in the build file's format, instead of only a missing field; other gaps are still named."""
    import yaml

    rule = {"id": "a", "rpath": "x", "xpaht": "*,Name"}
    ruleset = load(tmp_path, yaml.safe_dump([rule]))
    message = ruleset.rule_errors[0].message
    assert "unknown field 'xpaht' (did you mean 'xpath'?)" in message
    assert "'xpath' is missing" not in message
    assert "required field 'condition' is missing" in message


def test_unknown_field_close_to_nothing_lists_the_fields(tmp_path):
    """A field close to no known one is listed with the fields a rule may have."""
    message = error_of(tmp_path, id="a", zzz=1)
    assert "unknown field 'zzz' (expected one of: name, description, id, severity," in message


@pytest.mark.parametrize("field", ["rpath", "xpath", "condition"])
def test_missing_or_null_required_field(tmp_path, field):
    """A missing or null required field is a rule error."""
    rule = {**GOOD, "id": "a"}
    del rule[field]
    import yaml

    ruleset = load(tmp_path, yaml.safe_dump([rule]))
    assert f"'{field}' is missing" in ruleset.rule_errors[0].message
    assert f"'{field}' is null" in error_of(tmp_path, id="a", **{field: None})


@pytest.mark.parametrize(
    "given,expected",
    [
        ("error", "error"),
        ("WARNING", "warning"),
        ("Info", "info"),
        ("严重", "error"),
        ("一般", "warning"),
        ("提示", "info"),
        (None, "error"),
    ],
)
def test_severity_names(tmp_path, given, expected):
    """Severities are read in any case and in Chinese; the default is error."""
    fields = {"id": "a"} if given is None else {"id": "a", "severity": given}
    assert load(tmp_path, rule_yaml(**fields)).rules[0].severity == expected


def test_unknown_severity_is_a_rule_error(tmp_path):
    """An unknown severity is a rule error."""
    assert "unknown severity" in error_of(tmp_path, id="a", severity="fatal")


@pytest.mark.parametrize("given", ["", "  ", 0, False])
def test_empty_or_non_text_severity_is_a_rule_error(tmp_path, given):
    """The empty string (or blanks, or a value that names no severity) is an unknown severity,
    not the default."""
    assert f"unknown severity {given!r}" in error_of(tmp_path, id="a", severity=given)


def test_null_severity_is_the_default(tmp_path):
    """`severity:` with no value (null) is as if it were not given: error."""
    ruleset = load(tmp_path, "- {id: a, severity: , rpath: x, xpath: R, condition: [exists]}\n")
    assert ruleset.rules[0].severity == "error"


@pytest.mark.parametrize("field", ["rpath", "not_rpath", "filter", "not_filter"])
def test_bad_regexes(tmp_path, field):
    """A regex that does not compile is a rule error naming the field."""
    assert error_of(tmp_path, id="a", **{field: "[abc"}).startswith(f"{field}:")


def test_bad_path_expressions(tmp_path):
    """An xpath or subxpath that does not parse is a rule error."""
    assert error_of(tmp_path, id="a", xpath="*/Items/Item.Type").startswith("xpath:")
    assert error_of(tmp_path, id="a", subxpath="a/**").startswith("subxpath:")


@pytest.mark.parametrize(
    "xpath,name",
    [
        ("Root/1Item,Name", "'1Item'"),
        ("Root/Item#,Name", "'Item#'"),
        ("Root/Item,1Name", "'1Name'"),
        ("Root/Item.Ty pe==a,Name", "'Ty'"),
        ("Root/Item[@1kind==a],Name", "'1kind'"),
        ("Root/Item:da#ta", "'da#ta'"),
        ("Root/-Item*,Name", "'-Item*'"),
    ],
)
def test_a_name_that_is_not_an_xml_name_is_a_rule_error(tmp_path, xpath, name):
    """spec/rules.md "The path language": a tag (and a child or attribute name) is an XML name;
    anything else is an expression that does not parse, so the rule is a rule error naming it,
    found before any project file is read (no plug-in path language takes these either)."""
    for field in ("xpath", "subxpath"):
        message = error_of(tmp_path, id="a", **{field: xpath})
        assert message.startswith(f"{field}:") and name in message, message


def test_unresolved_artfunc_names(tmp_path):
    """artfunc_ names that do not resolve are rule errors."""
    assert "does not resolve" in error_of(tmp_path, id="a", filter="artfunc_nothing")
    assert "is a set, not a function" in error_of(
        tmp_path, id="a", filter="artfunc_res_filter.ALL_RES"
    )
    assert "unknown predefined set" in error_of(tmp_path, id="a", rpath="artfunc_res_store.x")


def test_rpath_set_must_hold_file_paths(tmp_path):
    """rpath: artfunc_ naming a set that is not of file paths is a rule error."""
    assert "not a set of file paths" in error_of(
        tmp_path, id="a", rpath="artfunc_res_store.res_in_disk"
    )
    ruleset = load(tmp_path, rule_yaml(id="a", rpath="artfunc_res_filter.ALL_USED_ILEVEL"))
    assert ruleset.rules[0].rpath_set == "res_filter.ALL_USED_ILEVEL"


def test_subfilter_without_subxpath(tmp_path):
    """subfilter without subxpath is a rule error."""
    assert "subfilter without subxpath" in error_of(tmp_path, id="a", subfilter="x")


def test_expression_that_does_not_compile(tmp_path):
    """A 满足表达式 expression that does not compile is a rule error."""
    assert "does not compile" in error_of(tmp_path, id="a", condition=["满足表达式", "d ==="])


def test_func_str_that_does_not_compile_or_raises(tmp_path):
    """func_str that does not compile, or raises when run at load, is a rule error."""
    assert "does not compile" in error_of(tmp_path, id="a", func_str="def f(:\n  pass\n")
    assert "ZeroDivisionError" in error_of(tmp_path, id="a", func_str="x = 1 / 0\n")


def test_func_str_runs_once_at_load_with_predefined_modules(tmp_path):
    """func_str runs at load, where `import res_store` already works."""
    marker = tmp_path / "ran.txt"
    code = (
        f"import res_store\nopen({str(marker)!r}, 'a').write('x')\n"
        "def check(**kw):\n    return []\n"
    )
    ruleset = load(tmp_path, rule_yaml(id="a", condition=["func_check"], func_str=code))
    assert ruleset.rules and marker.read_text() == "x"


def test_disabled_rules_are_skipped_and_their_code_never_runs(tmp_path):
    """enabled: false lists the rule in skipped; its func_str is not run."""
    ruleset = load(tmp_path, rule_yaml(id="a", enabled=False, func_str="raise SystemExit(3)\n"))
    assert ruleset.skipped == [SkippedRule("a", "disabled (enabled: false)")]
    assert not ruleset.rules and not ruleset.rule_errors and ruleset.total == 1


def test_custom_code_forbidden_skips_rules_with_func_str(tmp_path):
    """allow_custom_code false lists rules with func_str in skipped, without running them."""
    ruleset = load(
        tmp_path, rule_yaml(id="a", func_str="raise SystemExit(3)\n"), allow_custom_code=False
    )
    assert ruleset.skipped == [SkippedRule("a", "rules.allow_custom_code is false")]


def test_mixed_and_or_gives_a_warning(tmp_path):
    """A path mixing & and | loads, with a warning."""
    ruleset = load(tmp_path, rule_yaml(id="a", xpath="*/I.A==1|B==2&C==3,G"))
    assert ruleset.rules and ruleset.warnings[0].rule == "a"
    assert "mixed" in ruleset.warnings[0].message


def test_other_rules_still_load_beside_broken_ones(tmp_path):
    """A rule error does not stop the other rules."""
    ruleset = load(tmp_path, rule_yaml(id="bad", rpath="[") + rule_yaml(id="good"))
    assert [r.label for r in ruleset.rules] == ["good"]
    assert [e.rule for e in ruleset.rule_errors] == ["bad"]


def test_compiled_rules_pickle(tmp_path):
    """Compiled rules pickle (custom code travels as source)."""
    code = "def keep(**kw):\n    return kw['data']\n"
    ruleset = load(
        tmp_path, rule_yaml(id="a", filter="artfunc_keep", func_str=code, condition=["in", "['x']"])
    )
    again = pickle.loads(pickle.dumps(ruleset.rules))
    assert again[0].digest == ruleset.rules[0].digest and again[0].func_str == code


def test_digest_ignores_display_fields(tmp_path):
    """Renaming a rule or changing its severity keeps its digest; changing a check does not."""
    a = load(tmp_path, rule_yaml(id="a", name="one")).rules[0].digest
    b = load(tmp_path, rule_yaml(id="b", name="two", severity="warning")).rules[0].digest
    c = load(tmp_path, rule_yaml(id="a", condition=["not_exists"])).rules[0].digest
    assert a == b != c


def test_predefined_sets_without_an_index_are_rule_errors(tmp_path):
    """On a project whose source has no Messiah index, rules using predefined sets are errors."""
    ruleset = load(
        tmp_path,
        rule_yaml(id="a", rpath="artfunc_res_store.ilevels")
        + rule_yaml(id="b", filter="artfunc_res_filter.guidToResourcePath")
        + rule_yaml(id="c", func_str="import res_filter\n")
        + rule_yaml(id="d", filter="artfunc_res_filter.validGUID"),
        index=None,
    )
    assert [e.rule for e in ruleset.rule_errors] == ["a", "b", "c"]
    assert [r.label for r in ruleset.rules] == ["d"]
