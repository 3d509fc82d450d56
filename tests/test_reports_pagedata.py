"""The page's data: assets in more than one bundle and what they cost, chains that are not a
parent's chain plus one step, string tables."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from reportkit import build, copy_demo

from stages.reports.outputs import bundle_contents, read_manifest
from stages.reports.pagedata import Names, content

SHARED = Path(__file__).resolve().parents[2] / "shared"
SHARED_ASSETS = {  # what `shared_dependencies: extract` puts in the one shared bundle
    "e5ce0940-f689-404d-968f-775317804069",
    "914fa3a0-62cd-4b5a-83df-92fdf494534a",
    "9dc97d9a-64b5-49fb-acfa-c1704ebc2ef2",
    "e081bf41-a561-4750-83af-78c80468bc6c",
    "3b1e7c52-0a4f-4d7e-9b8e-5f2a6c1d9e01",
}


@pytest.fixture
def demo(tmp_path) -> Path:
    if not (SHARED / "examples" / "demo").is_dir():
        pytest.skip(f"../shared is absent ({SHARED}); the demo is needed")
    return copy_demo(SHARED, tmp_path / "demo")


def page_content(output: Path):
    manifest = read_manifest(output)
    return content(output, manifest, bundle_contents(output, manifest))


def test_duplicated_assets_are_counted_with_their_extra_bytes(demo):
    """With `shared_dependencies: duplicate` the assets two maps share are in both map bundles:
    each is listed once, with both bundles, and costs its stored size once more."""
    data = yaml.safe_load(demo.read_text(encoding="utf-8"))
    data["bundles"]["shared_dependencies"] = "duplicate"
    demo.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    output = build(demo, "build/out")
    page = page_content(output)
    assets, bundles = page.data["assets"], page.data["bundles"]
    duplicated = {
        assets["id"][i]: sorted(bundles["name"][b] for b in held)
        for i, held in enumerate(assets["bundle"])
        if isinstance(held, list)
    }
    assert duplicated == {asset: ["maps/Dungeon", "maps/Town"] for asset in SHARED_ASSETS}
    stored = {assets["id"][i]: assets["size"][i] for i in range(len(assets["id"]))}
    assert page.figures["duplicated"] == 5
    assert page.figures["duplicated_bytes"] == sum(stored[a] for a in SHARED_ASSETS) > 0


def test_extract_policy_duplicates_nothing(demo):
    """The demo's own build file extracts shared assets: no duplicates, one shared bundle."""
    page = page_content(build(demo, "build/out"))
    assert page.figures["duplicated"] == 0 and page.figures["duplicated_bytes"] == 0
    kinds = sorted(tile.kind for tile in page.tiles)
    assert kinds == ["layout", "layout", "layout", "shared"]


def test_a_chain_that_is_not_its_parents_chain_is_kept_whole(tmp_path):
    """A chain that does not extend its parent's chain is stored as it is."""
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "cooklist.json").write_text(
        '{"cooked": ["r", "a", "b"], "chains": {"r": ["r"], "a": ["r", "a"], "b": ["x", "a", "b"]}}',
        encoding="utf-8",
    )
    data = content(tmp_path, None, {}).data
    ids, parents = data["assets"]["id"], data["assets"]["parent"]
    assert parents[ids.index("r")] == -1 and parents[ids.index("a")] == ids.index("r")
    b = ids.index("b")
    assert parents[b] == -3
    assert [ids[i] for i in data["chains"][str(b)]] == ["x", "a", "b"]


def test_names_are_stored_once():
    """A string table gives each string one index."""
    names = Names()
    assert [names("a"), names("b"), names("a")] == [0, 1, 0] and names.items == ["a", "b"]
