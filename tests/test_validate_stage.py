"""The `validate` stage module: units, keys, scope, finish and publish (with a stand-in context)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.reads import Reader
from rules_helpers import REPOSITORY, make_index, write_files
from stages import validate
from stages.sources.base import Asset, CookList, SourceResult

G = "914fa3a0-62cd-4b5a-83df-92fdf494534a"
RULES = f"""
- {{id: plain, rpath: 'resource\\.xml$', xpath: 'Resource,A', condition: ['==', 1]}}
- {{id: indexed, rpath: 'resource\\.repository$', xpath: '*/Items/Item,GUID',
   condition: [in, artfunc_res_store.res_in_disk]}}
- {{id: custom, rpath: 'Other/.*\\.xml$', xpath: 'R', condition: [func_f],
   func_str: "def f(**kw):\\n    return ['c']\\n"}}
"""


class Log:
    def info(self, *args, **kwargs):
        pass


class Ctx:
    """The parts of orchestrator.context.Context the stage uses."""

    def __init__(self, root: Path, rule_file: Path, **rules) -> None:
        self.root = root.as_posix()
        self.build_dir = rule_file.parent
        self.log = Log()
        self.published: dict[str, bytes] = {}
        self._rules = {"files": [rule_file.name], "fail_on": "error", "allow_custom_code": True,
                       "scope": "all", "timeout": 30.0, **rules}

    def section(self, name):
        assert name == "rules"
        return dict(self._rules)

    def publish_bytes(self, relpath, data):
        self.published[relpath] = data


@pytest.fixture
def setup(tmp_path):
    root = write_files(tmp_path / "p", {
        "Repository/resource.repository": REPOSITORY,
        f"Repository/Test/{G}/resource.xml": "<Resource><A>2</A></Resource>",
        "Repository/Loose/resource.xml": "<Resource><A>3</A></Resource>",
        "Other/x.xml": "<R/>"})
    rule_file = tmp_path / "rules.yaml"
    rule_file.write_text(RULES, encoding="utf-8")
    index = make_index(root, {G: {"file": f"Repository/Test/{G}/resource.xml"}})
    asset = Asset(G, "resource", "Material", ("Test/Hole_mat",), (f"Repository/Test/{G}",),
                  (f"Repository/Test/{G}/resource.xml",), ())
    source = SourceResult(assets={G: asset}, index=index)
    cooklist = CookList([G], {}, {}, {}, {}, [], {})
    files = {str(p.relative_to(root).as_posix()): "d" for p in sorted(root.rglob("*"))
             if p.is_file()}
    return root, rule_file, {"files": files, "source": source, "cooklist": cooklist}


def run_stage(ctx, inputs):
    plan = validate.plan(ctx, inputs)
    results = {u.id: validate.run(u.payload, plan.shared, Reader(ctx.root)) for u in plan.units}
    return plan, validate.finish(ctx, inputs, results)


def test_units_are_per_file_with_keys_naming_what_they_use(setup):
    """One unit per selected file; index digest and root enter keys only where rules need them."""
    root, rule_file, inputs = setup
    plan = validate.plan(Ctx(root, rule_file), inputs)
    keys = {u.id: u.key for u in plan.units}
    assert sorted(keys) == ["Other/x.xml", "Repository/Loose/resource.xml",
                            f"Repository/Test/{G}/resource.xml", "Repository/resource.repository"]
    assert "index" in keys["Repository/resource.repository"]
    assert "index" not in keys["Repository/Loose/resource.xml"]
    assert "root" in keys["Other/x.xml"] and "root" not in keys["Repository/resource.repository"]
    assert all(u.files == (u.id,) for u in plan.units)


def test_finish_and_publish(setup):
    """finish returns the document; publish writes the three reports."""
    root, rule_file, inputs = setup
    ctx = Ctx(root, rule_file)
    _, outputs = run_stage(ctx, inputs)
    document = outputs["validation"]
    assert {(f["rule"], f["source"]) for f in document["failures"]} == {
        ("plain", f"Repository/Test/{G}/resource.xml"), ("plain", "Repository/Loose/resource.xml"),
        ("indexed", "Repository/resource.repository"), ("custom", "Other/x.xml")}
    validate.publish(ctx, outputs)
    assert set(ctx.published) == {"reports/validate.json", "reports/junit.xml",
                                  "reports/validate.txt"}
    assert json.loads(ctx.published["reports/validate.json"])["rules"] == 3


def test_scope_cooked_checks_only_files_of_cooked_assets(setup):
    """rules.scope: cooked limits the units to files of cooked assets."""
    root, rule_file, inputs = setup
    plan = validate.plan(Ctx(root, rule_file, scope="cooked"), inputs)
    assert [u.id for u in plan.units] == [f"Repository/Test/{G}/resource.xml"]


def test_finish_without_plan_reloads_rules(setup):
    """finish in a context it did not plan for loads the rules again and still assembles."""
    root, rule_file, inputs = setup
    ctx = Ctx(root, rule_file)
    plan = validate.plan(ctx, inputs)
    results = {u.id: validate.run(u.payload, plan.shared, Reader(ctx.root)) for u in plan.units}
    other = Ctx(root, rule_file)
    assert validate.finish(other, inputs, results)["validation"]["rules"] == 3
