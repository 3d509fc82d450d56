"""The validation document, its gating, and the JSON / JUnit / text renderings."""

from __future__ import annotations

import json

import pytest
from lxml import etree
from rules_helpers import REPOSITORY, make_index, write_files

from stages.rules.engine import validate_project
from stages.rules.report import public, render, summarize

RULES = """
- {id: warn-names, severity: 一般, rpath: 'resource\\.repository$', xpath: '*/Items/Item,Package',
   condition: [unique]}
- {id: guids-known, rpath: 'resource\\.repository$', xpath: '*/Items/Item,Deps',
   condition: [in, artfunc_res_store.res_in_repo]}
- {id: broken, rpath: '[', xpath: R, condition: [exists]}
- {id: switched-off, enabled: false, rpath: x, xpath: R, condition: [exists]}
- {id: mixed, rpath: 'resource\\.repository$', xpath: '*/Items/Item.Type==A|Type==B&Name==C,GUID',
   condition: [exists]}
"""


@pytest.fixture
def document(tmp_path):
    root = write_files(tmp_path / "p", {"Repository/resource.repository": REPOSITORY})
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    return validate_project(str(root), [rules], make_index(root))


def test_document_shape(document):
    """The document has the spec's keys, counts and entries."""
    doc = public(document)
    assert list(doc) == [
        "schema_version",
        "rules",
        "sources_checked",
        "failures",
        "rule_errors",
        "skipped",
        "warnings",
        "rule_names",
    ]
    assert doc["rule_names"] == {}  # these rules have ids and no names
    assert doc["schema_version"] == 1 and doc["rules"] == 5 and doc["sources_checked"] == 3
    assert [(f["rule"], f["severity"]) for f in doc["failures"]] == [
        ("warn-names", "warning"),
        ("guids-known", "error"),
    ]
    assert doc["failures"][0]["errors"] == ["Test/Test_Demo"]
    assert doc["rule_errors"][0]["rule"] == "broken"
    assert doc["rule_errors"][0]["message"].startswith("rules.yaml:6: rpath:")
    assert doc["skipped"] == [{"rule": "switched-off", "reason": "disabled (enabled: false)"}]
    assert doc["warnings"][0]["rule"] == "mixed"
    assert all(len(f["lines"]) == len(f["errors"]) for f in doc["failures"])


def test_rule_names_tell_what_a_rule_known_by_its_id_is_about(tmp_path):
    """`rule_names` maps a rule's id to its name, for rules that have both."""
    root = write_files(tmp_path / "p", {"Repository/resource.repository": REPOSITORY})
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "- {id: named, name: packages are unique, rpath: 'resource\\.repository$',\n"
        "   xpath: '*/Items/Item,Package', condition: [unique]}\n"
        "- {name: only a name, rpath: 'resource\\.repository$', xpath: '*/Items/Item,GUID',\n"
        "   condition: [exists]}\n",
        encoding="utf-8",
    )
    doc = public(validate_project(str(root), [rules], make_index(root)))
    assert doc["rule_names"] == {"named": "packages are unique"}


@pytest.mark.parametrize(
    "fail_on,fails", [("error", True), ("warning", True), ("info", True), ("never", False)]
)
def test_gate(document, fail_on, fails):
    """fail_on gates on the highest failing severity; rule errors count as errors."""
    summary = summarize(document)
    assert summary.highest_severity() == "error"
    assert summary.gate_fails(fail_on) is fails


def test_gate_on_warnings_only():
    """Only warnings: fail_on error passes, fail_on warning fails."""
    summary = summarize({"failures": [{"rule": "r", "severity": "warning"}], "rule_errors": []})
    assert not summary.gate_fails("error") and summary.gate_fails("warning")
    assert summarize({"failures": [], "rule_errors": []}).highest_severity() is None


def test_json_rendering_round_trips(document):
    """The JSON rendering is the public document, UTF-8, non-ASCII kept."""
    assert json.loads(render(document, "json")) == public(document)


def test_junit_has_a_testcase_per_checked_pair(document):
    """JUnit: a testcase per (rule, source) checked, failures carrying values, rule errors."""
    root = etree.fromstring(render(document, "junit"))
    assert root.get("tests") == str(document["sources_checked"] + 2)  # + broken + skipped
    assert root.get("failures") == "2" and root.get("errors") == "1" and root.get("skipped") == "1"
    failure = root.find("testsuite[@name='guids-known']/testcase/failure")
    assert "12345678-9876-1234-abcd-1234567890ab" in failure.text
    assert failure.get("type") == "error"


def test_text_groups_failures_by_rule_with_file_and_line(document):
    """Text: one block per failing rule, value lines with file:line."""
    text = render(document, "text").decode("utf-8")
    assert "guids-known [error]: 1 failing source(s)" in text
    assert "Repository/resource.repository:9: 12345678-9876-1234-abcd-1234567890ab" in text
    assert "rule errors:" in text and "broken: rules.yaml:6: rpath:" in text


def test_unknown_format_is_refused(document):
    """An unknown format raises ValueError."""
    with pytest.raises(ValueError):
        render(document, "yaml")


def test_junit_holds_characters_xml_cannot():
    """A rule id, file name or message with control characters still gives a JUnit file."""
    from lxml import etree

    from stages.rules.report import render

    document = {
        "rules": 2,
        "sources_checked": 1,
        "failures": [
            {
                "rule": "bell\x07",
                "severity": "error",
                "source": "odd\x1fname.xml",
                "via": None,
                "errors": ["nul\x00"],
                "lines": [None],
                "message": "bad \x0b message",
            }
        ],
        "rule_errors": [{"rule": "0\x1f", "message": "rules.yaml:1: broken \x01"}],
        "skipped": [],
        "warnings": [],
    }
    root = etree.fromstring(render(document, "junit"))
    names = [suite.get("name") for suite in root]
    assert names == ["bell\\u0007", "0\\u001f"]
    assert root[0][0].get("name") == "odd\\u001fname.xml"
