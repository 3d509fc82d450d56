"""The `validate` stage splits a large file that many rules select into parts (stages/rules/parts.py)."""

from __future__ import annotations

import pytest
from rules_helpers import make_index, write_files

from orchestrator.testing import run_stage as stage_once
from stages import validate
from stages.rules import parts
from stages.rules.engine import validate_project
from stages.rules.report import render
from stages.sources.base import index_entries

TYPES = ("Material", "Model", "Mesh", "Texture")
RULES = """
- {id: guid-set, rpath: 'resource\\.repository$', xpath: '*/Items/Item,GUID', condition: [in, artfunc_res_store.res_in_disk]}
- {id: guid-unique, rpath: 'resource\\.repository$', xpath: '*/Items/Item,GUID', condition: ['唯一']}
- {id: names, rpath: 'resource\\.repository$', xpath: '*/Items/Item,Name', condition: ['唯一']}
- {id: name-short, rpath: 'resource\\.repository$', xpath: '*/Items/Item,Name', condition: [expr, 'len(d) < 9']}
- {id: types, rpath: 'resource\\.repository$', xpath: '*/Items/Item,Type', condition: [in, "['Material', 'Model', 'Mesh']"]}
- {id: materials, rpath: 'resource\\.repository$', xpath: '*/Items/Item.Type==Material,GUID,Name', condition: [expr, "d['Name'][0].endswith('0')"]}
- {id: model-faces, rpath: 'resource\\.repository$', xpath: '*/Items/Item.Type==Model,GUID', filter: artfunc_res_filter.guidToRealPath, subxpath: 'M,Faces', condition: ['<=', 10]}
- {id: deps, rpath: 'resource\\.repository$', xpath: '*/Items/Item,Deps', condition: [not_empty]}
- {id: custom, rpath: 'resource\\.repository$', xpath: '*/Items/Item.Type==Mesh,Name', condition: [func_f], func_str: "def f(**kw):\\n    return [d for d in kw['data'] if d.endswith('7')]\\n"}
- {id: model-faces-again, rpath: 'resource\\.repository$', xpath: '*/Items/Item.Type==Model,GUID', filter: artfunc_res_filter.guidToRealPath, subxpath: 'M,Faces', condition: ['<=', 10]}
- {id: small, rpath: 'small\\.xml$', xpath: 'S', condition: ['==', 1]}
"""  # noqa: E501


def guid(i: int) -> str:
    return f"{i:08x}-0000-4000-8000-000000000000"


@pytest.fixture
def project(tmp_path):
    items, files, resources = [], {"small.xml": "<S>2</S>"}, {}
    for i in range(3000):
        kind = TYPES[i % 4]
        items.append(
            f"<Item><Type>{kind}</Type><GUID>{guid(i)}</GUID><Name>n{i % 2900}</Name>"
            f"{'<Deps>x</Deps>' if i % 3 else ''}<Pad>{'p' * 40}</Pad></Item>"
        )
        if kind == "Model" and i < 400:
            files[f"Models/{i}/resource.xml"] = f"<M><Faces>{i % 13}</Faces></M>"
            resources[guid(i)] = {"type": "Model", "file": f"Models/{i}/resource.xml"}
    files["Repository/resource.repository"] = (
        "<Repository><Items>" + "\n".join(items) + "</Items></Repository>"
    )
    root = write_files(tmp_path / "p", files)
    rule_file = tmp_path / "rules.yaml"
    rule_file.write_text(RULES, encoding="utf-8")
    index = make_index(root, resources)
    inputs = {"assets": {}, "index": index_entries(index), "cooklist": None}
    return root, rule_file, inputs, index


def run_stage(root, rule_file, inputs, resident=False):
    run = stage_once(
        validate,
        project=root,
        inputs=inputs,
        workdir=rule_file.parent,
        settings={"rules": {"files": [rule_file.name]}},
        publish=False,
        resident=resident,
    )
    return run.plan, run.outputs["validation"]


def test_a_big_file_in_parts_gives_the_document_of_one_unit(project, monkeypatch):
    """The repository is checked in several units, each reading it once, and the document
    (every rendering) is byte-identical to one unit per file and to validate_project."""
    root, rule_file, inputs, index = project
    assert (root / "Repository/resource.repository").stat().st_size > parts.SPLIT_MIN_BYTES
    plan, document = run_stage(root, rule_file, inputs)
    repository = [u for u in plan.units if u.files == ("Repository/resource.repository",)]
    assert len(repository) > 1 and len({u.id for u in plan.units}) == len(plan.units)
    assert sorted(i for u in repository for check in u.payload for i in check.rules) == list(
        range(10)
    )
    assert [u.cost for u in plan.units] == sorted((u.cost for u in plan.units), reverse=True)
    assert document["failures"] and document["sources_checked"] > 10

    monkeypatch.setattr(parts, "SPLIT_MIN_BYTES", 1 << 40)
    whole_plan, whole = run_stage(root, rule_file, inputs)
    assert [u.id for u in whole_plan.units if u.payload[0].path.endswith(".repository")] == [
        "Repository/resource.repository"
    ]
    for fmt in ("json", "junit", "text"):
        assert render(document, fmt) == render(whole, fmt)
    in_process = validate_project(str(root), [rule_file], index, files=sorted(project_paths(root)))
    assert render(document, "json") == render(in_process, "json")


def test_rules_with_one_digest_share_a_part(project):
    """Two rules that check the same thing (one digest) land in one part, so the rule's
    outcome is reported once."""
    root, rule_file, inputs, index = project
    plan, _ = run_stage(root, rule_file, inputs)
    twins = {6, 9}  # model-faces and model-faces-again, apart in the library
    holders = [u for u in plan.units if any(twins & set(check.rules) for check in u.payload)]
    assert len(holders) == 1 and twins <= set(holders[0].payload[0].rules)
    assert plan.shared.rules[6].digest == plan.shared.rules[9].digest


def test_a_rule_edit_changes_only_the_keys_of_the_parts_holding_it(project):
    """Editing one rule's condition leaves the ids of all units and the keys of every unit
    without that rule unchanged, so only its part re-runs."""
    root, rule_file, inputs, index = project
    before, _ = run_stage(root, rule_file, inputs)
    rule_file.write_text(RULES.replace("'len(d) < 9'", "'len(d) < 8'"), encoding="utf-8")
    after, _ = run_stage(root, rule_file, inputs)
    assert [u.id for u in before.units] == [u.id for u in after.units]
    old = {u.id: u for u in before.units}
    changed = {u.id for u in after.units if u.key != old[u.id].key}
    # name-short is the 4th rule
    holding = {u.id for u in after.units if any(3 in check.rules for check in u.payload)}
    assert changed == holding and len(holding) == 1 and len(after.units) > 2


def test_small_files_and_few_rules_stay_one_unit():
    """A file below the size threshold, or selected by few rules, is one part."""
    assert parts.part_count(parts.SPLIT_MIN_BYTES - 1, 40) == 1
    assert parts.part_count(1 << 30, 2 * parts.RULES_PER_PART - 1) == 1
    assert parts.part_count(1 << 30, 40) == 40 // parts.RULES_PER_PART


def project_paths(root):
    """Every file under `root`, project-relative with forward slashes."""
    return [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]


FEW_RULES = """
- {id: names, rpath: 'resource\\.repository$', xpath: '*/Items/Item,Name', condition: ['唯一']}
- {id: cyclic, rpath: 'resource\\.repository$', xpath: '*/Items/Item,GUID', condition: [func_f], func_str: "import res_store\\ndef f(**kw):\\n    return [d for d in kw['data'] if d not in res_store.res_in_repo]\\n"}
- {id: types, rpath: 'resource\\.repository$', xpath: '*/Items/Item,Type', condition: [in, "['Material', 'Model', 'Mesh']"]}
"""  # noqa: E501


def test_rules_reading_the_whole_index_are_apart_in_a_file_with_units_of_its_own(project):
    """A file with units of its own (too large to share a shard) checked by few rules is not
    split, yet a rule whose custom code reads the index is in a unit apart: an edit to one
    Item (which changes the index) re-runs that rule on the file, not the others with it."""
    root, rule_file, inputs, index = project
    rule_file.write_text(FEW_RULES, encoding="utf-8")
    size = (root / "Repository/resource.repository").stat().st_size
    assert size >= parts.SHARD_MAX_BYTES and parts.part_count(size, 3) == 1
    plan, _ = run_stage(root, rule_file, inputs)
    [whole] = [u for u in plan.units if any(1 in check.rules for check in u.payload)]
    assert [check.rules for check in whole.payload] == [(1,)]
    rest = [u for u in plan.units if u is not whole and "repository" in u.id]
    assert [sorted(r for c in u.payload for r in c.rules) for u in rest] == [[0, 2]]


@pytest.mark.parametrize("resident", [False, True])
def test_a_resident_build_keeps_its_custom_code_workers_for_the_next(project, resident):
    """`orchestrate watch` builds again on the next save: its custom-code workers, and the
    index they hold, stay up for it; a build of `orchestrate run` ends them with the stage."""
    from stages.rules.custom.host import close_workers, custom_code_host

    root, rule_file, inputs, index = project
    rule_file.write_text(FEW_RULES, encoding="utf-8")
    try:
        run_stage(root, rule_file, inputs, resident)
        assert bool(custom_code_host().worker_pids()) == resident
    finally:
        close_workers()
