"""The `validate` stage module on its own (orchestrator.testing): units, keys, scope, reports."""

from __future__ import annotations

import json
import shutil

import pytest
from rules_helpers import REPOSITORY, make_index, write_files

from orchestrator.files.reads import entry_path
from orchestrator.testing import run_stage
from stages import validate
from stages.sources.base import Asset, CookList, index_entries

G = "914fa3a0-62cd-4b5a-83df-92fdf494534a"
RULES = """
- {id: plain, rpath: 'resource\\.xml$', xpath: 'Resource,A', condition: ['==', 1]}
- {id: indexed, rpath: 'resource\\.repository$', xpath: '*/Items/Item,GUID',
   condition: [in, artfunc_res_store.res_in_disk]}
- {id: custom, rpath: 'Other/.*\\.xml$', xpath: 'R', condition: [func_f],
   func_str: "def f(**kw):\\n    return ['c']\\n"}
"""


@pytest.fixture
def setup(tmp_path):
    root = write_files(
        tmp_path / "p",
        {
            "Repository/resource.repository": REPOSITORY,
            f"Repository/Test/{G}/resource.xml": "<Resource><A>2</A></Resource>",
            "Repository/Loose/resource.xml": "<Resource><A>3</A></Resource>",
            "Other/x.xml": "<R/>",
        },
    )
    rule_file = tmp_path / "rules.yaml"
    rule_file.write_text(RULES, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(rule_file, work / "rules.yaml")
    index = make_index(root, {G: {"file": f"Repository/Test/{G}/resource.xml"}})
    asset = Asset(
        G,
        "resource",
        "Material",
        ("Test/Hole_mat",),
        (f"Repository/Test/{G}",),
        (f"Repository/Test/{G}/resource.xml",),
        (),
    )
    cooklist = CookList([G], {}, {}, {}, {}, [], {})
    return root, work, {"assets": {G: asset}, "index": index_entries(index), "cooklist": cooklist}


def validate_once(setup, **rules):
    root, work, inputs = setup
    return run_stage(
        validate,
        project=root,
        inputs=inputs,
        workdir=work,
        settings={"rules": {"files": ["rules.yaml"], **rules}},
    )


def test_small_files_are_checked_in_shards_with_keys_naming_what_they_use(setup, monkeypatch):
    """Small files share shard units (each file and its rules in the key); a file of its own
    unit keys on its own rules; the root enters keys only where rules need it, and the index
    never: what a unit looked up in it is in its trace (issue 29)."""
    run = validate_once(setup)
    plan = run.plan
    (shard,) = plan.units
    assert shard.id == "<shard 0/1>"
    assert shard.files == (
        "Other/x.xml",
        "Repository/Loose/resource.xml",
        f"Repository/Test/{G}/resource.xml",
        "Repository/resource.repository",
    )
    assert [path for path, _ in shard.key["files"]] == list(shard.files)
    assert "index" not in shard.key and "root" in shard.key
    assert run.reads[shard.id][entry_path("index", f"disk/{G}")] is not None
    monkeypatch.setattr(validate, "SHARD_MAX_BYTES", 0)  # every file a unit of its own
    alone = validate_once(setup)
    keys = {u.id: u.key for u in alone.plan.units}
    assert sorted(keys) == sorted(shard.files)
    assert not any("index" in key for key in keys.values())
    looked_up = {
        unit: {p for p in reads if p.startswith("\x1e")} for unit, reads in alone.reads.items()
    }
    repository = looked_up["Repository/resource.repository"]  # `in res_in_disk`, per GUID
    assert entry_path("index", f"disk/{G}") in repository
    assert all(path.startswith(entry_path("index", "disk/")) for path in repository)
    assert looked_up["Repository/Loose/resource.xml"] == set()
    assert "root" in keys["Other/x.xml"] and "root" not in keys["Repository/resource.repository"]


def test_finish_and_publish(setup):
    """finish returns the document; publish writes the three reports."""
    run = validate_once(setup)
    document = run.outputs["validation"]
    assert {(f["rule"], f["source"]) for f in document["failures"]} == {
        ("plain", f"Repository/Test/{G}/resource.xml"),
        ("plain", "Repository/Loose/resource.xml"),
        ("indexed", "Repository/resource.repository"),
        ("custom", "Other/x.xml"),
    }
    assert set(run.published) == {
        "reports/validate.json",
        "reports/junit.xml",
        "reports/validate.txt",
    }
    assert json.loads(run.published["reports/validate.json"])["rules"] == 3


def test_units_read_the_files_they_check(setup):
    """Each unit's trace names every file it checked, so an edit to one invalidates the unit."""
    run = validate_once(setup)
    units = {unit.id: unit for unit in run.plan.units}
    assert all(set(units[unit_id].files) <= set(reads) for unit_id, reads in run.reads.items())


def test_scope_cooked_checks_only_files_of_cooked_assets(setup):
    """rules.scope: cooked limits the units to files of cooked assets."""
    plan = validate_once(setup, scope="cooked").plan
    assert [u.files for u in plan.units] == [(f"Repository/Test/{G}/resource.xml",)]


def test_the_rule_files_are_tracked_inputs_of_the_stage(setup):
    """The stage records the rule files it loaded, so a whole-stage skip sees their edits."""
    run = validate_once(setup)
    assert any(path.endswith("rules.yaml") for path in run.context.stage_external)
