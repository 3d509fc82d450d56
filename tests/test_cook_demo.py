"""The demo project's cook list matches the hand-derived shared/examples/demo/expected/cook.json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from stages.cooklist.closure import compute_cooklist
from stages.cooklist.explain import why
from stages.sources.messiah.reader import build_index, collect_project

SHARED = Path(__file__).resolve().parents[2] / "shared"
DEMO = SHARED / "examples" / "demo"

pytestmark = [
    pytest.mark.shared,
    pytest.mark.skipif(not DEMO.is_dir(), reason=f"shared demo not found at {DEMO}"),
]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    copy = tmp_path_factory.mktemp("demo") / "demo"
    shutil.copytree(DEMO, copy)
    build = yaml.safe_load((copy / "build.yaml").read_text(encoding="utf-8"))
    source = collect_project(str(copy / build["project"]))
    cooklist = compute_cooklist(source.assets, build["cook"], build["bundles"])
    expected = json.loads((copy / "expected" / "cook.json").read_text(encoding="utf-8"))
    return source, build, cooklist, expected


def test_cooked_set_matches(demo):
    """Exactly the expected worlds, levels and resources are cooked."""
    _, _, cooklist, expected = demo
    assert sorted(cooklist.cooked) == sorted(expected["cooked"])
    assert cooklist.cooked[:2] == ["Worlds/Town.iworld", "Worlds/Dungeon.iworld"]


def test_missing_references_with_chains(demo):
    """Each missing reference is reported once, with the expected reason kind and chain."""
    _, _, cooklist, expected = demo
    assert set(cooklist.missing) == set(expected["missing"])
    for asset_id, reason in expected["missing"].items():
        kind, chain = reason.split("; chain ")
        assert cooklist.missing[asset_id].startswith(kind)
        assert f"chain {chain}" in cooklist.missing[asset_id]


def test_ambiguous_duplicate(demo):
    """The GUID in both repositories is ambiguous, its payload from CommonRepository."""
    _, _, cooklist, expected = demo
    assert set(cooklist.ambiguous) == set(expected["ambiguous"])
    guid = "9dc97d9a-64b5-49fb-acfa-c1704ebc2ef2"
    assert f"payload from CommonRepository/Common/{guid}" in cooklist.ambiguous[guid]


def test_why_chains(demo):
    """`why` prints the expected shortest BFS chains."""
    source, build, cooklist, expected = demo
    for asset_id, chain in expected["why"].items():
        (answer,) = why(source.assets, cooklist, asset_id, build["cook"])
        assert answer.cooked and list(answer.chain) == chain


def test_not_cooked_explanations(demo):
    """Assets left out are explained: never_cook, unreachable, unused level."""
    source, build, cooklist, expected = demo
    for asset_id, expected_reason in expected["not_cooked"].items():
        assert asset_id not in cooklist.cooked
        (answer,) = why(source.assets, cooklist, asset_id, build["cook"])
        assert not answer.cooked
        if "never_cook" in expected_reason:
            assert "never_cook Dev/" in answer.reason
        elif "world" in expected_reason:
            assert "no cooked world uses it" in answer.reason
        else:
            assert "unreachable" in answer.reason


def test_demo_index_predefined_sets():
    """The demo's index: the duplicate's two items and folders, and the three used levels."""
    index = build_index(str(DEMO / "project"))
    root = str(DEMO / "project").replace("\\", "/")
    guid = "9dc97d9a-64b5-49fb-acfa-c1704ebc2ef2"
    assert [r.Repository for r in index.res_in_repo[guid]] == ["CommonRepository", "Repository"]
    assert [f.Resource for f in index.res_in_disk[guid]] == [
        f"{root}/CommonRepository/Common/{guid}/texture.xml",
        f"{root}/Repository/Test/Test_Demo/{guid}/texture.xml",
    ]
    assert index.ilevels == {
        f"{root}/Levels/{n}.ilevel" for n in ("Dungeon_1", "Town_Main", "Town_Night")
    }
    assert "e4ea79e4-3505-4e96-bbc0-bc567a1204e5" not in index.res_in_disk
