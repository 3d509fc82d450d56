"""`orchestrate diff`: what a patch between two builds of the demo ships, each change listed
exactly and nothing else; exit 0 identical, 1 different, 2 not a build output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reportkit import (
    NEW_ICON,
    TRIM_TEX,
    add_icon,
    build,
    cli,
    copy_demo,
    edit_texture_width,
    move_icon,
)

from stages.reports.diff import diff_states, diff_text
from stages.reports.state import AssetState, BuildState, BundleState, LooseState, state_of

SHARED = Path(__file__).resolve().parents[2] / "shared"

EMPTY = {"added": [], "removed": [], "changed": []}
NO_ASSETS = {"added": [], "removed": [], "moved": [], "changed": []}


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict[str, Path]:
    """The demo built four times, each build one edit further: base, an attribute edit, an
    asset added, an asset moved between bundles by a layout change."""
    if not (SHARED / "examples" / "demo").is_dir():
        pytest.skip(f"../shared is absent ({SHARED}); the demo is needed")
    build_file = copy_demo(SHARED, tmp_path_factory.mktemp("diff") / "demo")
    folders = {"base": build(build_file, "out/base")}
    edit_texture_width(build_file, 100)
    folders["edited"] = build(build_file, "out/edited")
    add_icon(build_file)
    folders["added"] = build(build_file, "out/added")
    move_icon(build_file)
    folders["moved"] = build(build_file, "out/moved")
    return folders


def patch_json(capsys, old: Path, new: Path) -> tuple[int, dict]:
    capsys.readouterr()
    code = cli("diff", str(old), str(new), "--format", "json")
    return code, json.loads(capsys.readouterr().out)


def manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text(encoding="utf-8"))


def bundle_file(folder: Path, bundle: str) -> str:
    return manifest(folder)["bundles"][bundle]["file"]


def test_identical_builds_exit_0(builds, capsys):
    """A build against itself ships nothing and exits 0."""
    code, patch = patch_json(capsys, builds["base"], builds["base"])
    assert code == 0 and patch["identical"] is True
    assert patch["files"] == [] and patch["download_bytes"] == 0
    assert patch["bundles"] == EMPTY and patch["assets"] == NO_ASSETS
    assert cli("diff", str(builds["base"]), str(builds["base"])) == 0
    assert "identical" in capsys.readouterr().out


def test_attribute_edit_changes_one_asset_and_its_bundle(builds, capsys):
    """A texture's Width edited: that texture's content and its (shared) bundle change, nothing
    else; the patch ships the new bundle file, the manifest and the staging manifest."""
    old, new = builds["base"], builds["edited"]
    code, patch = patch_json(capsys, old, new)
    assert code == 1 and patch["identical"] is False
    shared = manifest(new)["assets"][TRIM_TEX]["bundles"][0]
    assert [c["bundle"] for c in patch["bundles"]["changed"]] == [shared]
    change = patch["bundles"]["changed"][0]
    assert change["old"]["file"] == bundle_file(old, shared)
    assert change["new"]["file"] == bundle_file(new, shared)
    assert change["old"]["content_hash"] != change["new"]["content_hash"]
    assert change["delta"] == change["new"]["size"] - change["old"]["size"]
    assert patch["bundles"]["added"] == [] and patch["bundles"]["removed"] == []
    assert [c["asset"] for c in patch["assets"]["changed"]] == [TRIM_TEX]
    assert patch["assets"]["changed"][0]["name"] == "Test/Test_Demo/Trim_tex"
    assert {k: v for k, v in patch["assets"].items() if k != "changed"} == {
        "added": [],
        "removed": [],
        "moved": [],
    }
    assert patch["link_xml"] == {"added": [], "removed": []}
    files = {f["file"]: f for f in patch["files"]}
    assert set(files) == {bundle_file(new, shared), "manifest.json", "staging.json"}
    assert patch["download_bytes"] == sum(f["size"] for f in patch["files"])
    assert (
        files[bundle_file(new, shared)]["size"] == (new / bundle_file(new, shared)).stat().st_size
    )
    assert patch["deleted_files"] == [bundle_file(old, shared)]


def test_added_asset_is_listed_with_its_bundle(builds, capsys):
    """A new icon under UI/: the asset is added to `ui`, which changes; nothing else."""
    old, new = builds["edited"], builds["added"]
    code, patch = patch_json(capsys, old, new)
    assert code == 1
    assert [c["bundle"] for c in patch["bundles"]["changed"]] == ["ui"]
    assert patch["bundles"]["added"] == [] and patch["bundles"]["removed"] == []
    added = patch["assets"]["added"]
    assert [(a["asset"], a["name"], a["new_bundles"]) for a in added] == [
        (NEW_ICON, "UI/Icons/UI_icon_small", ["ui"])
    ]
    assert patch["assets"]["removed"] == patch["assets"]["moved"] == []
    assert patch["assets"]["changed"] == []
    assert patch["link_xml"] == {"added": [], "removed": []}  # Texture was preserved already
    assert {f["file"] for f in patch["files"]} == {
        bundle_file(new, "ui"),
        "manifest.json",
        "staging.json",
    }


def test_layout_change_moves_one_asset(builds, capsys):
    """The icon moved to a bundle of its own: one bundle added, `ui` changed, one asset moved
    (its content unchanged)."""
    old, new = builds["added"], builds["moved"]
    code, patch = patch_json(capsys, old, new)
    assert code == 1
    assert [c["bundle"] for c in patch["bundles"]["added"]] == ["icons/small"]
    assert [c["bundle"] for c in patch["bundles"]["changed"]] == ["ui"]
    assert patch["bundles"]["removed"] == []
    moved = patch["assets"]["moved"]
    assert [(m["asset"], m["old_bundles"], m["new_bundles"]) for m in moved] == [
        (NEW_ICON, ["ui"], ["icons/small"])
    ]
    assert moved[0]["old_hash"] == moved[0]["new_hash"]
    assert patch["assets"]["added"] == patch["assets"]["removed"] == []
    assert patch["assets"]["changed"] == []
    assert {f["file"]: f["why"] for f in patch["files"]} == {
        bundle_file(new, "icons/small"): "bundle added",
        bundle_file(new, "ui"): "bundle changed",
        "manifest.json": "changed",
        "staging.json": "changed",
    }
    assert patch["deleted_files"] == [bundle_file(old, "ui")]


def test_text_output_names_each_change(builds, capsys):
    """The text format has a headline and one section per kind of change, and no other."""
    capsys.readouterr()
    assert cli("diff", str(builds["added"]), str(builds["moved"])) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"patch {builds['added']} -> {builds['moved']}: 4 file(s) to download")
    assert f"> {NEW_ICON}  UI/Icons/UI_icon_small  ui -> icons/small" in out
    sections = [line for line in out.splitlines() if line and not line.startswith(" ")][1:]
    assert [s.split(" (")[0] for s in sections] == [
        "bundles added",
        "bundles changed",
        "assets moved",
        "files to download",
        "files to delete",
    ]


def test_not_a_build_output_exits_2(builds, tmp_path, capsys):
    """A folder without a manifest, a missing folder, or a bundle file gone: exit 2, named."""
    capsys.readouterr()
    assert cli("diff", str(builds["base"]), str(tmp_path)) == 2
    assert "not a build output folder" in capsys.readouterr().err
    assert cli("diff", str(tmp_path / "nowhere"), str(builds["base"])) == 2
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text("{not json", encoding="utf-8")
    assert cli("diff", str(broken), str(builds["base"])) == 2
    assert "manifest" in capsys.readouterr().err
    gutted = tmp_path / "gutted"
    gutted.mkdir()
    document = manifest(builds["base"])
    (gutted / "manifest.json").write_text(json.dumps(document), encoding="utf-8")
    assert cli("diff", str(builds["base"]), str(gutted)) == 2
    err = capsys.readouterr().err
    assert "missing" in err and "Traceback" not in err


def test_state_reads_entry_names_and_holders(builds):
    """The state of a build names each entry by its virtual path and lists its bundles."""
    state = state_of(builds["base"])
    assert state.assets[TRIM_TEX].name == "Test/Test_Demo/Trim_tex"
    assert state.assets["Levels/Town_Main.ilevel"].bundles == ("maps/Town",)
    assert set(state.loose) == {"manifest.json", "staging.json", "link.xml"}
    assert "Messiah.Runtime: Messiah.Runtime.Texture" in state.link_types
    assert BuildState.from_json(json.loads(json.dumps(state.to_json()))) == state


def two_states() -> tuple[BuildState, BuildState]:
    old = BuildState(
        {
            "a": BundleState("a_1", 100, "h1", "r1"),
            "gone": BundleState("gone_1", 50, "h2", "r2"),
        },
        {
            "x": AssetState("X", ("a",), "e1", 10),
            "y": AssetState("Y", ("gone",), "e2", 20),
        },
        {"link.xml": LooseState(30, "l1"), "manifest.json": LooseState(40, "m1")},
        ["Asm: Asm.Mesh", "Asm: Asm.Texture"],
    )
    new = BuildState(
        {"a": BundleState("a_1", 100, "h1", "r1"), "b": BundleState("b_1", 70, "h3", "r3")},
        {"x": AssetState("X", ("a", "b"), "e1", 10)},
        {"link.xml": LooseState(31, "l2"), "manifest.json": LooseState(40, "m1")},
        ["Asm: Asm.Mesh", "Asm: Asm.Shader"],
    )
    return old, new


def test_removed_bundle_duplicated_asset_and_link_xml_types():
    """Removals, an asset copied into a second bundle (moved) and link.xml Types both ways."""
    patch = diff_states(*two_states())
    assert [c.bundle for c in patch.bundles_removed] == ["gone"]
    assert [c.bundle for c in patch.bundles_added] == ["b"]
    assert patch.bundles_changed == []
    assert [c.asset for c in patch.assets_removed] == ["y"]
    assert [(c.asset, c.old_bundles, c.new_bundles) for c in patch.assets_moved] == [
        ("x", ("a",), ("a", "b"))
    ]
    assert patch.link_xml_added == ["Asm: Asm.Shader"]
    assert patch.link_xml_removed == ["Asm: Asm.Texture"]
    assert [(f.file, f.size) for f in patch.files] == [("b_1", 70), ("link.xml", 31)]
    assert patch.download_bytes == 101
    assert patch.deleted_files == ["gone_1"]
    text = diff_text(patch, "A", "B")
    assert "+ Asm: Asm.Shader" in text and "- Asm: Asm.Texture" in text
    assert "- gone  gone_1  50 bytes" in text


def test_a_bundle_file_already_shipped_is_not_downloaded_again():
    """A bundle whose new file is byte for byte a file the old build had costs no download."""
    old, new = two_states()
    new.bundles["b"] = BundleState("gone_1", 50, "h2", "r2")  # `gone` renamed to `b`
    patch = diff_states(old, new)
    assert [c.bundle for c in patch.bundles_added] == ["b"]
    assert "gone_1" not in {f.file for f in patch.files}
    assert patch.deleted_files == []
