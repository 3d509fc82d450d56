"""`orchestrate validate`: an unparseable project file is a finding, never exit 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from buildkit import run_inprocess  # noqa: E402
from messiah_projects import Item, guid, write, write_level, write_repository  # noqa: E402

GOOD, LOST = guid(1), guid(2)
BROKEN_REPOSITORY = (
    '<?xml version="1.0" encoding="utf-8"?>\n'
    "<Repository>\n"
    "  <Items>\n"
    f"    <Item><Type>Model</Type><GUID>{LOST}</GUID><Package>P</Package><Name>lost</Name>\n"
    "  </Items>\n"
    "</Repository>\n"
)
RULES = """\
- id: guids-unique
  rpath: 'resource\\.repository$'
  xpath: '*/Items/Item/GUID'
  condition: ['唯一']
- id: placed-resources-known
  rpath: '\\.ilevel$'
  xpath: '*/Entities/Entity,Resource'
  condition: ['存在于', 'artfunc_res_store.res_in_repo']
- id: attributes-named
  rpath: 'resource\\.xml$'
  xpath: 'Resource,Name'
  condition: ['not_empty']
"""


@pytest.fixture
def project(tmp_path) -> Path:
    """A project whose `Broken/` repository does not parse (line 5), and a build file."""
    root = tmp_path / "project"
    write_repository(root, "Good", [Item(GOOD, "good", "P", attribute_body="<Name>good</Name>")])
    write(root, "Broken/resource.repository", BROKEN_REPOSITORY)
    write(root, f"Broken/P/{LOST}/resource.xml", "<Resource><Name>lost</Name></Resource>")
    write_level(root, "Levels/L.ilevel", [GOOD, LOST])
    (tmp_path / "rules.yaml").write_text(RULES, encoding="utf-8")
    build = tmp_path / "build.yaml"
    build.write_text(
        "project: project\nrules:\n  files: [rules.yaml]\n  fail_on: never\n"
        "executor:\n  kind: local\n",
        encoding="utf-8",
    )
    return build


def validate_json(build: Path, *extra: str) -> tuple[int, dict]:
    report = build.parent / "validate.json"
    code = run_inprocess(
        "validate", str(build), "--format", "json", "--output", str(report), *extra
    )
    return code, json.loads(report.read_text(encoding="utf-8"))


def test_validate_reports_a_broken_repository_as_a_finding_not_exit_2(project):
    """Under `validate` a malformed resource.repository fails every rule that selects it, with
    the file and line; its Items are absent from the index; every other file is checked."""
    code, document = validate_json(project)
    assert code == 0  # rules.fail_on: never
    broken = [f for f in document["failures"] if f["source"] == "Broken/resource.repository"]
    assert [(f["rule"], f["errors"], f["lines"]) for f in broken] == [("guids-unique", [], [])]
    assert broken[0]["message"].startswith("Broken/resource.repository:5: not well-formed XML")
    # the broken repository's item is not in the index: the level's reference to it fails
    (placed,) = [f for f in document["failures"] if f["rule"] == "placed-resources-known"]
    assert placed["source"] == "Levels/L.ilevel" and placed["errors"] == [LOST]
    # every other file was checked: the good repository, the level, both attribute files
    assert document["sources_checked"] == 5


def test_validate_gates_a_broken_repository_like_any_failure(project):
    """The parse failure has the rule's severity: with fail_on error, validate exits 1."""
    project.write_text(
        project.read_text(encoding="utf-8").replace("fail_on: never", "fail_on: error"),
        encoding="utf-8",
    )
    code, document = validate_json(project)
    assert code == 1 and document["failures"]


def test_run_still_exits_2_on_a_broken_repository_unless_skip_broken(project, capsys):
    """`run` stops on the broken repository (exit 2, file and line); skip_broken goes on."""
    assert run_inprocess("run", str(project)) == 2
    assert "Broken/resource.repository:5" in capsys.readouterr().err
    project.write_text(
        project.read_text(encoding="utf-8") + "collect:\n  skip_broken: true\n", encoding="utf-8"
    )
    assert run_inprocess("run", str(project)) == 0


def test_validate_of_a_clean_project_reuses_what_run_collected(tmp_path):
    """A clean project is validated with the build file as written: after `run`, collect and
    the rule units come from the cache (the broken-file fallback does not fork the cache)."""
    from stages.commands.rules import run_validation

    root = tmp_path / "project"
    write_repository(root, "Good", [Item(GOOD, "good", "P", attribute_body="<Name>good</Name>")])
    write_level(root, "Levels/L.ilevel", [GOOD])
    (tmp_path / "rules.yaml").write_text(RULES, encoding="utf-8")
    build = tmp_path / "build.yaml"
    build.write_text(
        "project: project\nrules:\n  files: [rules.yaml]\nexecutor:\n  kind: local\n",
        encoding="utf-8",
    )
    assert run_inprocess("run", str(build)) == 0
    _, result = run_validation(str(build), None)
    reports = {report.name: report for report in result.reports}
    assert reports["collect"].units and reports["collect"].units == reports["collect"].cached
    assert reports["validate"].units == reports["validate"].cached
    assert result.outputs["validation"]["failures"] == []
