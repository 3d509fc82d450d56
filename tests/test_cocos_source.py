"""`source: cocos` on hand-made projects: ids, URLs, sub-assets, the dependency rules of each
importer, the build file's cocos section, and `orchestrate why` / `cooklist` with Cocos names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from cocos_projects import CocosProject, frame, texture

from orchestrator.core.config import load_build
from orchestrator.errors import ConfigError
from orchestrator.shell.cli import main
from stages.layout.options import sharing_policy
from stages.settings import cocos_engine_path
from stages.sources.cocos import collect_cocos
from stages.sources.cocos.uuids import compress_uuid


def targets(source, asset_id: str) -> list[str]:
    return [r.target for r in source.assets[asset_id].refs]


def test_ids_urls_and_types_of_sub_assets(tmp_path):
    """An image is three assets: `uuid`, `uuid@6c48a` (texture), `uuid@f9941` (sprite frame)."""
    project = CocosProject(tmp_path)
    hero = project.image("assets/ui/hero.png")
    source = collect_cocos(str(tmp_path))
    assert source.assets[hero].virtual_paths == ("db://assets/ui/hero.png",)
    assert source.assets[texture(hero)].virtual_paths == ("db://assets/ui/hero.png/texture",)
    assert source.assets[frame(hero)].type == "cc.SpriteFrame"
    assert source.assets[texture(hero)].type == "cc.Texture2D"
    assert source.assets[hero].type == "cc.ImageAsset"
    assert source.assets[hero].files == ("assets/ui/hero.png", "assets/ui/hero.png.meta")
    # A sprite frame needs its texture (imageUuidOrDatabaseUri), the texture its image.
    assert targets(source, frame(hero)) == [texture(hero)]
    assert targets(source, texture(hero)) == [hero]
    assert targets(source, hero) == []


def test_structure_decides_when_the_importer_data_names_a_db_uri(tmp_path):
    """`imageUuidOrDatabaseUri` as a db:// URI: texture → parent image, frame → sibling texture."""
    project = CocosProject(tmp_path)
    hero = project.image("assets/hero.png")
    meta_path = tmp_path / "assets/hero.png.meta"
    meta = json.loads(meta_path.read_text())
    for sub in meta["subMetas"].values():
        sub["userData"]["imageUuidOrDatabaseUri"] = "db://assets/hero.png"
    meta_path.write_text(json.dumps(meta))
    source = collect_cocos(str(tmp_path))
    assert targets(source, texture(hero)) == [hero]
    assert targets(source, frame(hero)) == [texture(hero)]


def test_serialized_references_in_order_and_nested_prefabs(tmp_path):
    """Every `__uuid__` of a scene in file order, nested prefabs included; once each."""
    project = CocosProject(tmp_path)
    a, b = project.image("assets/a.png"), project.image("assets/b.png")
    inner = project.prefab("assets/inner.prefab", [frame(b)])
    outer = project.prefab("assets/outer.prefab", [frame(a), inner, frame(a)])
    scene = project.scene("assets/s.scene", [outer])
    source = collect_cocos(str(tmp_path))
    assert targets(source, outer) == [frame(a), inner]
    assert targets(source, inner) == [frame(b)]
    assert source.roots["scenes"] == [scene]
    assert source.assets[scene].kind == "world"


def test_importer_data_dependencies(tmp_path):
    """bitmap-font → the image's sprite frame; particle and label-atlas → spriteFrameUuid;
    spine → each page's texture; a plist → its frames."""
    project = CocosProject(tmp_path)
    page = project.image("assets/font.png")
    font = project.raw("assets/font.fnt", "bitmap-font", [".json"], user={"textureUuid": page})
    particle = project.raw(
        "assets/fx.plist", "particle", [".json"], user={"spriteFrameUuid": frame(page)}
    )
    atlas = project.raw("assets/hero.atlas", "*", [".atlas"], content=b"hero.png\nsize: 8,8\n")
    skin = project.image("assets/hero.png")
    spine = project.raw("assets/hero.json", "spine-data", [".json"], user={"atlasUuid": atlas})
    plist = project.meta(
        "assets/sheet.plist",
        "sprite-atlas",
        sub={
            "aaaaa": {"importer": "sprite-frame", "name": "one", "userData": {}, "subMetas": {}},
            "bbbbb": {"importer": "sprite-frame", "name": "two", "userData": {}, "subMetas": {}},
        },
    )
    (tmp_path / "assets/sheet.plist").write_text("<plist/>")
    source = collect_cocos(str(tmp_path))
    assert targets(source, font) == [frame(page)]
    assert targets(source, particle) == [frame(page)]
    assert targets(source, spine) == [texture(skin)]
    assert targets(source, plist) == [f"{plist}@aaaaa", f"{plist}@bbbbb"]
    assert source.assets[f"{plist}@bbbbb"].virtual_paths == ("db://assets/sheet.plist/two",)


def test_render_pipeline_and_physics_material_from_the_project_settings(tmp_path):
    """main's roots add the settings' pipeline and material (defaults: the engine's built-ins)."""
    project = CocosProject(tmp_path)
    rpp = project.serialized("assets/my.rpp", "render-pipeline")
    pmtl = project.serialized("assets/my.pmtl", "physics-material")
    project.settings(
        {"general": {"renderPipeline": rpp}, "physics": {"defaultMaterial": {"__uuid__": pmtl}}}
    )
    source = collect_cocos(str(tmp_path))
    assert source.roots["settings"] == [rpp, pmtl]
    assert source.bundles["main"] == [rpp, pmtl]


def test_missing_metas_and_duplicate_uuids_are_reported(tmp_path):
    """A file without a meta and a second meta with the same uuid: warnings naming the file."""
    project = CocosProject(tmp_path)
    hero = project.image("assets/hero.png")
    (tmp_path / "assets/new.png").write_bytes(b"png")
    (tmp_path / "assets/copy.png").write_bytes(b"png")
    (tmp_path / "assets/copy.png.meta").write_text((tmp_path / "assets/hero.png.meta").read_text())
    source = collect_cocos(str(tmp_path))
    problems = {(p.kind, p.file) for p in source.problems}
    assert ("missing_meta", "assets/new.png") in problems
    assert ("duplicate_uuid", "assets/hero.png.meta") in problems  # copy.png sorts first
    assert hero in source.assets


def write_build(folder: Path, project: Path, **sections) -> Path:
    data = {
        "project": str(project),
        "source": "cocos",
        "output": "out",
        "cache": "cache",
        "executor": {"kind": "local"},
        "bundles": {"from_meta": True},
        **sections,
    }
    build = folder / "build.yaml"
    build.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return build


def run(*args: str) -> int:
    with pytest.raises(SystemExit) as stop:
        main(list(args))
    return stop.value.code


def test_build_file_defaults_and_a_bad_engine(tmp_path, monkeypatch):
    """`source: cocos` defaults to the priority policy and $COCOS_ENGINE (part of the build
    file's slice); a folder without editor/assets is a configuration error naming the key."""
    project = CocosProject(tmp_path / "p")
    build = write_build(tmp_path, project.root)
    monkeypatch.delenv("COCOS_ENGINE", raising=False)
    loaded = load_build(build)
    assert sharing_policy(loaded.section("bundles"), loaded.section("source")) == "priority"
    assert sharing_policy({"shared_dependencies": "extract"}, "cocos") == "extract"
    assert sharing_policy({"shared_dependencies": None}, "messiah") == "extract"
    assert cocos_engine_path(loaded) is None
    engine = tmp_path / "engine"
    (engine / "editor" / "assets").mkdir(parents=True)
    monkeypatch.setenv("COCOS_ENGINE", str(engine))
    loaded = load_build(build)
    assert cocos_engine_path(loaded) == engine
    assert loaded.slice_for(("cocos",))["cocos"]["engine"] == str(engine)
    monkeypatch.setenv("COCOS_ENGINE", str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError) as error:
        load_build(build)
    assert error.value.key == "cocos.engine"


def test_why_and_cooklist_take_and_show_cocos_names(tmp_path, capsys):
    """`why` takes a URL, an id or a compressed id and shows the URL; `cooklist` shows URLs."""
    project = CocosProject(tmp_path / "p")
    hero = project.image("assets/hero.png")
    scene = project.scene("assets/s.scene", [frame(hero)])
    build = write_build(tmp_path, project.root)
    for name in ("db://assets/hero.png/spriteFrame", frame(hero), compress_uuid(frame(hero))):
        assert run("why", str(build), name) == 0
        out = capsys.readouterr().out
        assert out.startswith(
            f"db://assets/hero.png/spriteFrame (cc.SpriteFrame) {frame(hero)}: cooked: "
            f"db://assets/s.scene {scene} > "
        )
    assert run("cooklist", str(build)) == 0
    out = capsys.readouterr().out
    assert (
        f"db://assets/hero.png/texture (cc.Texture2D) {texture(hero)}  <- "
        f"db://assets/s.scene {scene} > "
    ) in out


def test_a_nested_bundle_folder_stops_the_build_naming_both(tmp_path, capsys):
    """Exit 2 with the message naming both folders; no traceback."""
    project = CocosProject(tmp_path / "p")
    project.folder("assets/a", bundle="a")
    project.folder("assets/a/b", bundle="b")
    build = write_build(tmp_path, project.root)
    assert run("run", str(build)) == 2
    err = capsys.readouterr().err
    assert "assets/a/b" in err and "assets/a " in err and "Traceback" not in err


def test_a_sub_asset_name_with_a_control_character_makes_the_meta_malformed():
    """A sub-asset's key or name holding a control character (it becomes an asset id, a name
    in paths and reports): the meta is malformed, saying which and what character."""
    from stages.sources.cocos.meta import parse_meta

    top = '"uuid": "0a1b2c3d-0000-4000-8000-000000000001", "importer": "image"'
    for sub in ('"f9941\\n": {"importer": "texture"}', '"f9941": {"name": "a\\u007fb"}'):
        meta = parse_meta("assets/a.png.meta", f'{{{top}, "subMetas": {{{sub}}}}}'.encode())
        assert meta.problem is not None and "control character" in meta.problem, sub
