"""Creator's bundle rules one at a time, on small hand-made projects (spec cocos.md, "Bundles",
"Filling the bundles", "Auto-atlases")."""

from __future__ import annotations

from cocos_projects import CocosProject, contents, frame, pack_project, redirects, texture

from stages.algorithms.priority import fill_by_priority, natural_key
from stages.layout.packing import pack
from stages.sources.base import HARD, Asset, Ref
from stages.sources.cocos import collect_cocos


def image_ids(asset_id: str) -> set[str]:
    return {asset_id, texture(asset_id), frame(asset_id)}


def test_a_higher_priority_owns_and_the_lower_one_redirects(tmp_path):
    """A scene in main using a sprite of a priority-8 bundle gets redirects and depends on it."""
    project = CocosProject(tmp_path)
    project.folder("assets/res", bundle="res", priority=8)
    hero = project.image("assets/res/hero.png")
    scene = project.scene("assets/scenes/a.scene", [frame(hero)])
    _, packing = pack_project(tmp_path)
    assert redirects(packing, "main") == {frame(hero): "res"}
    assert contents(packing, "main") == {scene, frame(hero)}
    assert packing.bundles["main"].dependencies == ("res",)
    assert contents(packing, "res") == image_ids(hero)
    assert packing.bundles["res"].dependencies == ()


def test_equal_priorities_each_keep_a_copy(tmp_path):
    """Two bundles of one priority reaching the same asset each hold it, with no deps."""
    project = CocosProject(tmp_path)
    project.folder("assets/a", bundle="a", priority=5)
    project.folder("assets/b", bundle="b", priority=5)
    shared = project.image("assets/shared/s.png")
    project.prefab("assets/a/p.prefab", [frame(shared)])
    project.prefab("assets/b/q.prefab", [frame(shared)])
    _, packing = pack_project(tmp_path)
    for name in ("a", "b"):
        assert {frame(shared), texture(shared), shared} <= set(packing.bundles[name].assets)
        assert packing.bundles[name].redirects == () and packing.bundles[name].dependencies == ()


def test_a_bundles_own_assets_owned_by_a_higher_bundle(tmp_path):
    """A lower bundle's own asset that a higher bundle reached first is a redirect, path kept."""
    project = CocosProject(tmp_path)
    project.folder("assets/high", bundle="high", priority=9)
    project.folder("assets/low", bundle="low", priority=2)
    icon = project.image("assets/low/icon.png")
    project.prefab("assets/high/ui.prefab", [frame(icon)])
    _, packing = pack_project(tmp_path)
    assert frame(icon) in packing.bundles["high"].assets
    assert redirects(packing, "low") == {frame(icon): "high", texture(icon): "high", icon: "high"}
    assert packing.bundles["low"].dependencies == ("high",)
    assert packing.bundles["low"].source_fields["paths"][frame(icon)] == "icon/spriteFrame"


def test_outside_assets_join_the_bundle_that_reaches_them_first(tmp_path):
    """An asset outside every bundle folder joins the bundles reaching it; once a higher group
    holds it, a lower one redirects to it."""
    project = CocosProject(tmp_path)
    project.folder("assets/res", bundle="resources")
    project.folder("assets/also", bundle="also", priority=8)
    common = project.image("assets/common/c.png")
    project.prefab("assets/res/p.prefab", [frame(common)])
    project.prefab("assets/also/q.prefab", [frame(common)])
    project.scene("assets/s.scene", [frame(common)])
    source, packing = pack_project(tmp_path)
    assert source.bundle_priorities == {"main": 7, "also": 8, "resources": 8}
    assert frame(common) in packing.bundles["resources"].assets
    assert frame(common) in packing.bundles["also"].assets
    # After the group, the first bundle of the group in order ("also") owns it.
    assert redirects(packing, "main") == {frame(common): "also"}


def test_paths_and_scenes_as_creator_records_them(tmp_path):
    """Paths relative to the bundle folder without extension, `db:/…` in main; scenes by URL."""
    project = CocosProject(tmp_path)
    project.folder("assets/resources", bundle="resources")
    hero = project.image("assets/resources/ui/hero.png")
    inner = project.scene("assets/resources/levels/l1.scene")
    outer = project.scene("assets/start.scene")
    _, packing = pack_project(tmp_path)
    res = packing.bundles["resources"].source_fields
    assert res["paths"] == {
        hero: "ui/hero",
        texture(hero): "ui/hero/texture",
        frame(hero): "ui/hero/spriteFrame",
        inner: "levels/l1",
    }
    assert res["scenes"] == {"db://assets/resources/levels/l1.scene": inner}
    main = packing.bundles["main"].source_fields
    assert main["paths"] == {outer: "db:/assets/start"}
    assert main["scenes"] == {"db://assets/start.scene": outer}


def test_raw_files_are_skipped_as_roots_but_their_sub_assets_are_not(tmp_path):
    """A meta whose `files` lacks `.json` is no root; its sub-assets still are."""
    project = CocosProject(tmp_path)
    project.folder("assets/res", bundle="res")
    raw = project.meta(
        "assets/res/hero.atlas",
        "raw-atlas",
        files=[".atlas"],
        sub={
            "abcde": {
                "importer": "text",
                "uuid": "x",
                "name": "data",
                "files": [".json"],
                "subMetas": {},
                "userData": {},
            }
        },
    )
    (tmp_path / "assets/res/hero.atlas").write_text("hero.png\n")
    source = collect_cocos(str(tmp_path))
    assert raw not in source.bundles["res"]
    assert f"{raw}@abcde" in source.bundles["res"]


def test_scripts_are_never_content(tmp_path):
    """A script meta makes no asset, and a `__uuid__` naming it is neither a dependency nor
    unresolved."""
    project = CocosProject(tmp_path)
    (tmp_path / "assets/game.ts").write_text("export class A {}")
    script = project.meta("assets/game.ts", "typescript", files=[".js"])
    scene = project.scene("assets/s.scene", [script])
    source = collect_cocos(str(tmp_path))
    assert script not in source.assets
    assert source.assets[scene].refs == ()
    assert not [p for p in source.problems if p.kind == "unresolved_ids"]


def test_unresolved_ids_are_dropped_and_counted_per_file(tmp_path):
    """Ids that name nothing are left out of the references and reported against their file."""
    project = CocosProject(tmp_path)
    hero = project.image("assets/hero.png")
    gone = "deadbeef-0000-4000-8000-000000000000"
    scene = project.scene("assets/s.scene", [frame(hero), gone, gone + "@f9941"])
    source, packing = pack_project(tmp_path)
    assert [r.target for r in source.assets[scene].refs] == [frame(hero)]
    (problem,) = [p for p in source.problems if p.kind == "unresolved_ids"]
    assert problem.file == "assets/s.scene" and problem.message.startswith("2 referenced id(s)")
    assert source.index.unresolved == {"assets/s.scene": (gone, gone + "@f9941")}
    assert frame(hero) in packing.bundles["main"].assets


def test_nested_bundle_folders_are_refused_naming_both(tmp_path):
    """A bundle folder inside another is a fatal problem naming both folders."""
    project = CocosProject(tmp_path)
    project.folder("assets/outer", bundle="outer")
    project.folder("assets/outer/inner", bundle="inner")
    source = collect_cocos(str(tmp_path))
    (problem,) = [p for p in source.problems if p.kind == "nested_bundle"]
    assert (
        problem.fatal
        and "assets/outer/inner" in problem.message
        and "assets/outer " in problem.message
    )


def test_bundle_names_and_default_priorities(tmp_path):
    """Name from bundleName else the folder; priority 8 for resources, else 1."""
    project = CocosProject(tmp_path)
    (tmp_path / "assets/Levels").mkdir()
    project.meta("assets/Levels", "directory", files=[], user={"isBundle": True})
    project.folder("assets/res", bundle="resources")
    source = collect_cocos(str(tmp_path))
    assert source.bundle_priorities == {"main": 7, "Levels": 1, "resources": 8}


def test_a_bundle_name_that_is_not_text_gives_the_folders_name(tmp_path):
    """`bundleName` as a list, a number or empty text names no bundle: the folder's name is
    used, as when it is absent (a list used to become its Python repr, which the pack stage
    refused as an unsafe name without naming the meta)."""
    project = CocosProject(tmp_path)
    for folder, given in (("Levels", ["levels"]), ("Heroes", 7), ("Items", "")):
        (tmp_path / "assets" / folder).mkdir()
        user = {"isBundle": True, "bundleName": given}
        project.meta(f"assets/{folder}", "directory", files=[], user=user)
    source = collect_cocos(str(tmp_path))
    assert source.bundle_priorities == {"main": 7, "Levels": 1, "Heroes": 1, "Items": 1}


def test_malformed_metas_and_json_are_reported_and_the_build_goes_on(tmp_path):
    """A broken meta, a meta without its file and a scene that does not parse are warnings."""
    project = CocosProject(tmp_path)
    hero = project.image("assets/hero.png")
    (tmp_path / "assets/broken.png").write_bytes(b"x")
    (tmp_path / "assets/broken.png.meta").write_text("{not json")
    project.meta("assets/gone.png", "image")
    scene = project.scene("assets/s.scene", [frame(hero)])
    (tmp_path / "assets/bad.scene").write_text("[{")
    project.meta("assets/bad.scene", "scene")
    source, _ = pack_project(tmp_path)
    kinds = {p.kind: p.file for p in source.problems}
    assert kinds["malformed_meta"] == "assets/broken.png.meta"
    assert kinds["orphan_meta"] == "assets/gone.png.meta"
    assert kinds["malformed_json"] == "assets/bad.scene"
    assert not any(p.fatal for p in source.problems)
    assert scene in source.assets and frame(hero) in source.assets


def test_chinese_names_and_paths(tmp_path):
    """UTF-8 names become URLs and load paths as they are."""
    project = CocosProject(tmp_path)
    project.folder("assets/资源", bundle="资源包", priority=3)
    hero = project.image("assets/资源/英雄.png")
    _, packing = pack_project(tmp_path)
    assert packing.bundles["资源包"].source_fields["paths"][frame(hero)] == "英雄/spriteFrame"


def test_internal_is_built_only_when_listed(tmp_path):
    """`cocos.internal` roots make a priority-21 `internal` bundle that main redirects to."""
    project = CocosProject(tmp_path)
    shared = project.image("assets/shared.png")
    project.scene("assets/s.scene", [frame(shared)])
    source, packing = pack_project(tmp_path)
    assert "internal" not in packing.bundles
    _, packing = pack_project(tmp_path, internal=["db://assets/shared.png/spriteFrame"])
    assert packing.bundles["internal"].priority == 21
    assert redirects(packing, "main") == {frame(shared): "internal"}


def test_included_scenes_from_the_build_file(tmp_path):
    """`cocos.scenes` (URLs or paths) picks main's scenes; others are not roots."""
    project = CocosProject(tmp_path)
    first = project.scene("assets/a.scene")
    project.scene("assets/b.scene")
    source = collect_cocos(str(tmp_path), scenes=["assets/a.scene"])
    assert source.bundles["main"] == [first]
    source = collect_cocos(str(tmp_path), scenes=["db://assets/a.scene", "db://assets/nope.scene"])
    assert source.bundles["main"] == [first]
    assert [p.kind for p in source.problems].count("unknown_scene") == 1


def test_priority_is_a_general_policy_for_layout_rules():
    """Layout rules with `priority:` share by priority, whatever the source."""

    def asset(name, *refs):
        return Asset(
            name,
            "resource",
            "T",
            (f"V/{name}",),
            ("F",),
            (f"F/{name}",),
            tuple(Ref(r, HARD) for r in refs),
        )

    assets = [asset("ui", "tex"), asset("lvl", "tex"), asset("tex")]
    layout = [
        {"name": "ui", "include": ["V/ui"], "priority": 3},
        {"name": "levels", "include": ["V/lvl"]},
    ]
    packing = pack(assets, layout, [], "priority")
    assert packing.bundles["ui"].assets == ("ui", "tex")
    assert packing.bundles["levels"].redirects[0] == ("tex", "ui")
    assert packing.bundles["levels"].priority == 1


def test_groups_walk_in_compare_uuid_order():
    """Equal priorities: the first bundle in numeric, case-insensitive order owns the copy."""
    assert sorted(["b10", "B2", "a", "b1"], key=natural_key) == ["a", "b1", "B2", "b10"]
    edges = {"x": (), "y": ("x",), "z": ("x",)}
    fill = fill_by_priority(
        {"b10": ["y"], "b2": ["z"], "low": ["x"]}, {"b10": 4, "b2": 4, "low": 1}, edges
    )
    assert fill.order == ["b2", "b10", "low"]
    assert fill.owner["x"] == "b2" and fill.redirects["low"] == {"x": "b2"}
