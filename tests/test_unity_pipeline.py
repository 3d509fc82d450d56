"""`source: unity` through the real pipeline: Unity's own bundle manifests as the oracle, the cook
list, `orchestrate why`, and `bundles.from_meta` on a hand-made project."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from buildkit import edit_build, make_project
from unity_projects import (
    build_settings,
    guid,
    material,
    prefab,
    scriptable,
    shader_graph,
    write,
    write_folder_meta,
)

from orchestrator.errors import ConfigError
from orchestrator.shell.cli import main
from stages.algorithms.globs import escape_glob, glob_match
from stages.layout.packing import pack
from stages.sources.unity.reader import collect_unity

REALDATA = "realdata/unity-slg-warriors"
STREAMING = "Assets/StreamingAssets"
SKILL_CHOOSE = "resources/prefabs/uiview/uiview_skillchoose.unity3d"
CHINESE_FONT = "Assets/HalfSLG/Font/chinese.asset"
SCENES = ["Assets/HalfSLG/Scenes/SceneStart.unity", "Assets/HalfSLG/Scenes/SceneBattle.unity"]


def run_cli(*args: str) -> int:
    """`orchestrate ARGS` in this process; its exit code."""
    with pytest.raises(SystemExit) as stop:
        main(list(args))
    return stop.value.code


def write_build(folder: Path, **sections) -> Path:
    """A build file for the Unity project in `folder/project`, local executor."""
    data = {
        "project": "project",
        "source": "unity",
        "output": "out",
        "cache": "cache",
        "executor": {"kind": "local"},
        **sections,
    }
    build = folder / "build.yaml"
    build.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return build


@pytest.fixture
def unity_copy(shared_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the real Unity project (tests build into it)."""
    source = shared_dir / REALDATA
    if not source.is_dir():
        pytest.skip(f"the real Unity project is absent ({source})")
    shutil.copytree(source, tmp_path / "project")
    return tmp_path


def unity_manifests(project: Path) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Per bundle (name under StreamingAssets): its `Assets:` (project-relative) and `Dependencies:`."""
    explicit, dependencies = {}, {}
    streaming = project / STREAMING
    for manifest in sorted(streaming.rglob("*.unity3d.manifest")):
        name = manifest.relative_to(streaming).as_posix()[: -len(".manifest")]
        sections: dict[str, list[str]] = {"Assets:": [], "Dependencies:": []}
        current = None
        for line in manifest.read_text(encoding="utf-8").splitlines():
            if line in sections or line.startswith("Dependencies: "):
                current = sections.get(line)  # `Dependencies: []` leaves the list empty
            elif current is not None and line.startswith("- "):
                current.append(line[2:].strip().replace("\\", "/"))
            elif not line.startswith(" "):
                current = None
        explicit[name] = [a[a.index("Assets/") :] for a in sections["Assets:"]]
        # Absolute paths of the build machine: E:/games/…/StreamingAssets/<name>.
        dependencies[name] = sorted(
            d.split("/StreamingAssets/", 1)[1] for d in sections["Dependencies:"]
        )
    return explicit, dependencies


def test_escaped_globs_name_exactly_one_path():
    """A path with glob metacharacters becomes a glob that matches it and nothing else."""
    path = "Assets/UI/[Old] icon*?.png"
    assert glob_match(escape_glob(path), path)
    assert not glob_match(escape_glob(path), "Assets/UI/O icon*?.png")
    assert not glob_match(escape_glob(path), "Assets/UI/[Old] iconXY.png")


def test_pipeline_bundles_reproduce_unitys_manifests(unity_copy: Path):
    """23 of Unity's 24 bundles get Unity's dependencies; uiview_skillchoose lacks only font.unity3d."""
    explicit, expected = unity_manifests(unity_copy / "project")
    assert len(explicit) == 24
    layout = [
        {"name": name, "include": [escape_glob(path) for path in paths]}
        for name, paths in explicit.items()
    ]
    build = write_build(unity_copy, bundles={"layout": layout, "shared_dependencies": "duplicate"})
    assert run_cli("run", str(build)) == 0

    manifest = json.loads((unity_copy / "out/manifest.json").read_text(encoding="utf-8"))
    assert manifest["build"]["shared_dependencies"] == "duplicate"
    bundles = manifest["bundles"]
    computed = {name: bundles[name]["dependencies"] for name in explicit}
    assert {name for name in explicit if computed[name] != expected[name]} == {SKILL_CHOOSE}
    # Unity recorded font.unity3d through chinese.asset, one of the two files left out of the
    # snapshot: its .meta remains, so the reference names the path, but nothing can be packed.
    assert set(expected[SKILL_CHOOSE]) - set(computed[SKILL_CHOOSE]) == {"font.unity3d"}
    assert set(computed[SKILL_CHOOSE]) < set(expected[SKILL_CHOOSE])
    assert CHINESE_FONT in explicit["font.unity3d"]
    assert CHINESE_FONT in manifest["missing"] and CHINESE_FONT not in manifest["assets"]
    # Every explicit asset the project has is explicit in its bundle, as Unity listed them.
    for name, paths in explicit.items():
        present = [p for p in paths if p in manifest["assets"]]
        assert sorted(bundles[name]["explicit"]) == sorted(present), name
    for name in explicit:
        assert (unity_copy / "out" / bundles[name]["file"]).is_file()


def test_pipeline_outputs_name_unity_types(unity_copy: Path):
    """link.xml puts the source's UnityEngine types in the UnityEngine assembly; payloads are copies."""
    build = write_build(unity_copy)
    assert run_cli("run", str(build)) == 0
    link_xml = (unity_copy / "out/link.xml").read_text(encoding="utf-8")
    assert '<assembly fullname="UnityEngine">' in link_xml
    assert '<type fullname="UnityEngine.Material" preserve="all"/>' in link_xml
    assert '<type fullname="UnityEngine.Texture2D" preserve="all"/>' in link_xml
    assert "Messiah" not in link_xml
    manifest = json.loads((unity_copy / "out/manifest.json").read_text(encoding="utf-8"))
    frame = "Assets/HalfSLG/Textures/Common_0/hexWhiteFrame.png"
    assert manifest["assets"][frame] == {"type": "UnityEngine.Texture2D", "bundles": ["default"]}
    assert manifest["assets"][SCENES[0]]["type"] == "UnityEngine.SceneAsset"


def test_cook_list_and_problems_through_the_pipeline(unity_copy: Path, capsys):
    """Enabled scenes and Resources/ are the roots: 83 cooked, 5 missing with chains, 2 built-ins."""
    build = write_build(unity_copy)
    assert run_cli("cooklist", str(build), "--format", "json") == 0
    cooklist = json.loads(capsys.readouterr().out)
    assert cooklist["roots"]["source:scenes"] == SCENES
    assert len(cooklist["roots"]["source:resources"]) == 34
    assert len(cooklist["cooked"]) == 83
    assert "Assets/HalfSLG/Scenes/SceneLobby.unity" not in cooklist["cooked"]  # disabled
    # One breadth-first search from all roots: the scenes' chains win where they are as short.
    starts = [cooklist["chains"][a][0] for a in cooklist["cooked"]]
    assert sum(start in SCENES for start in starts) == 25
    assert set(starts) - set(SCENES) <= set(cooklist["roots"]["source:resources"])
    # Two files over 4 MiB and the TextMesh Pro shaders were left out; their .meta files remain.
    assert sorted(cooklist["missing"]) == [
        "Assets/3rd/TextMesh Pro/Resources/Shaders/TMP_SDF-Mobile.shader",
        "Assets/3rd/TextMesh Pro/Resources/Shaders/TMP_SDF.shader",
        "Assets/3rd/TextMesh Pro/Resources/Shaders/TMP_Sprite.shader",
        "Assets/HalfSLG/Font/TTF/simhei.ttf",
        CHINESE_FONT,
    ]
    assert cooklist["missing"][CHINESE_FONT] == (
        "not found in the project; chain "
        "Assets/HalfSLG/Resources/Prefabs/UIView/UIView_BattleFieldPlayerActOption.prefab"
    )
    assert cooklist["missing"]["Assets/3rd/TextMesh Pro/Resources/Shaders/TMP_SDF.shader"].endswith(
        "chain Assets/3rd/TextMesh Pro/Resources/TMP Settings.asset > Assets/HalfSLG/Font/TMP/fontSLG.asset"
    )
    assert sorted(cooklist["external"]) == [
        "0000000000000000e000000000000000",
        "0000000000000000f000000000000000",
    ]
    source = collect_unity(str(unity_copy / "project"))
    orphans = [p.file for p in source.problems if p.kind == "orphan_meta"]
    assert len(orphans) == 151 and CHINESE_FONT + ".meta" in orphans
    assert source.index.orphans == tuple(sorted(o[: -len(".meta")] for o in orphans))


def test_why_prints_the_chain_of_a_unity_asset(unity_copy: Path, capsys):
    """`orchestrate why` names a Unity path's chain from its scene, or why it is not cooked:
    each asset by its path and type (a Unity id is its path: not shown twice), scenes by path."""
    build = write_build(unity_copy)
    rage = "Assets/HalfSLG/ScriptableObjects/BBSystem/Chips/Rage.asset"
    scriptable = "(UnityEngine.ScriptableObject)"
    assert run_cli("why", str(build), rage) == 0
    assert capsys.readouterr().out == (
        f"{rage} {scriptable}: cooked: Assets/HalfSLG/Scenes/SceneBattle.unity > "
        f"Assets/HalfSLG/ScriptableObjects/BattleTeam/Hero.asset {scriptable} > "
        f"Assets/HalfSLG/ScriptableObjects/BBSystem/System/Dps.asset {scriptable} > "
        f"{rage} {scriptable} (root from source:scenes)\n"
    )
    frame = "Assets/HalfSLG/Textures/Common_0/hexWhiteFrame.png (UnityEngine.Texture2D)"
    assert run_cli("why", str(build), frame.split(" ")[0]) == 0
    assert capsys.readouterr().out == (
        f"{frame}: cooked: Assets/HalfSLG/Resources/Prefabs/BattleMapUnits/BattleUnit.prefab "
        f"(UnityEngine.GameObject) > {frame} (root from source:resources)\n"
    )
    assert run_cli("why", str(build), "Assets/HalfSLG/Scenes/SceneLobby.unity") == 0
    assert capsys.readouterr().out == (
        "Assets/HalfSLG/Scenes/SceneLobby.unity: not cooked: unreachable (no root references it)\n"
    )
    assert run_cli("why", str(build), CHINESE_FONT) == 0
    assert capsys.readouterr().out.startswith(f"{CHINESE_FONT}: missing: not found in the project")


# -- bundles.from_meta ---------------------------------------------------------------------------
def meta_bundles_project(folder: Path) -> Path:
    """A small project whose `.meta` files name bundles: a folder, a variant, and one asset."""
    root = folder / "project"
    write(root, "ProjectSettings/EditorBuildSettings.asset", build_settings())
    write_folder_meta(root, "Assets/UI", guid(1), bundle="UI")  # Unity builds names lower-case
    write(root, "Assets/UI/Button.prefab", prefab([("m_Sprite", 10), ("m_Material", 20)]), guid(2))
    write(root, "Assets/UI/Icon.png", b"\x89PNG icon", guid(3))
    write(
        root, "Assets/Shared/Atlas.png", b"\x89PNG atlas", guid(10), bundle="shared", variant="hd"
    )
    write(root, "Assets/Shared/Rock.mat", material(10), guid(20))
    write(root, "Assets/Levels/Level.prefab", prefab([("m_Ground", 20)]), guid(30), bundle="levels")
    write(root, "Assets/Other/Unused.png", b"\x89PNG unused", guid(40))
    return root


def test_from_meta_packs_the_bundles_the_metas_name(tmp_path: Path):
    """Bundles come from assetBundleName/Variant; implicit content joins (or is shared by) them."""
    meta_bundles_project(tmp_path)
    build = write_build(tmp_path, bundles={"from_meta": True, "shared_dependencies": "duplicate"})
    assert run_cli("run", str(build)) == 0
    manifest = json.loads((tmp_path / "out/manifest.json").read_text(encoding="utf-8"))
    bundles = manifest["bundles"]
    assert sorted(bundles) == ["levels", "shared.hd", "ui"]
    assert bundles["ui"]["explicit"] == ["Assets/UI/Button.prefab", "Assets/UI/Icon.png"]
    assert bundles["shared.hd"]["explicit"] == ["Assets/Shared/Atlas.png"]
    # Rock.mat is named by no .meta: each user gets a copy (duplicate), Atlas.png stays shared.
    assert bundles["ui"]["implicit"] == bundles["levels"]["implicit"] == ["Assets/Shared/Rock.mat"]
    assert bundles["ui"]["dependencies"] == bundles["levels"]["dependencies"] == ["shared.hd"]
    assert "Assets/Other/Unused.png" not in manifest["cooklist"]


def test_from_meta_with_extract_and_a_conflicting_layout_rule(tmp_path: Path):
    """With `extract` the shared material gets its own bundle; a layout rule may not rename an asset."""
    meta_bundles_project(tmp_path)
    build = write_build(tmp_path, bundles={"from_meta": True})
    assert run_cli("run", str(build)) == 0
    bundles = json.loads((tmp_path / "out/manifest.json").read_text(encoding="utf-8"))["bundles"]
    shared = [name for name in bundles if name.startswith("shared/")]
    assert len(shared) == 1 and bundles[shared[0]]["used_by"] == ["levels", "ui"]
    assert bundles["ui"]["dependencies"] == ["shared.hd", shared[0]]
    source = collect_unity(str(tmp_path / "project"))
    assets = list(source.assets.values())
    with pytest.raises(
        ConfigError, match=r"assigned to bundle 'ui' by the project.*bundles.layout\[0\]"
    ):
        pack(
            assets,
            [{"name": "icons", "include": ["Assets/UI/*.png"]}],
            [],
            "duplicate",
            assigned=source.bundles,
        )


def test_from_meta_on_a_messiah_project_is_a_config_error(tmp_path: Path, capsys):
    """A source that assigns no bundles in its files makes `bundles.from_meta: true` exit 2."""
    build = make_project(tmp_path / "messiah", assets=100, seed=3)
    edit_build(build, bundles={"from_meta": True}, executor={"kind": "local"})
    assert run_cli("run", str(build)) == 2
    error = capsys.readouterr().err
    assert "bundles.from_meta" in error and "'messiah' source does not assign bundles" in error


# -- what Unity never bundles, Shader Graph references, from_meta with nothing assigned -----------
ITEMS = "Assets/Data/Items.asset"
TABLE = "Assets/Data/Table.xlsx"
ARCHIVE = "Assets/Archives/Art.zip"
MTL = "Assets/Models/Chair.mtl"
SCENE = "Assets/Scenes/Main.unity"
GRAPH = "Assets/Shaders/Water.shadergraph"


def default_assets_project(folder: Path) -> Path:
    """Bundles named by .meta files that also name DefaultAssets (a spreadsheet, an archive),
    a `.mtl` reached as a dependency, a scene bundle, and a Shader Graph whose textures (one in
    an escaped string, one plain) lie in bundles of their own."""
    root = folder / "project"
    write(root, "ProjectSettings/EditorBuildSettings.asset", build_settings((SCENE, 50, True)))
    write(root, SCENE, prefab([("m_Items", 2), ("m_Water", 60)]), guid(50), bundle="scenes")
    write_folder_meta(root, "Assets/Data", guid(1), bundle="data")
    write(root, ITEMS, scriptable(3, 4), guid(2))
    write(root, TABLE, b"PK\x03\x04 sheet", guid(3))
    write(root, MTL, "newmtl chair\n", guid(4))
    write(root, ARCHIVE, b"PK\x03\x04 art", guid(5), bundle="Archives")
    write(root, GRAPH, shader_graph(guid(61), guid(62), guid(63)), guid(60), bundle="shaders")
    write(root, "Assets/Textures/Foam.png", b"\x89PNG foam", guid(61), bundle="foam")
    write(root, "Assets/Textures/Noise.png", b"\x89PNG noise", guid(62), bundle="noise")
    write(root, "Assets/Shaders/Ripple.shadersubgraph", "{}", guid(63))
    return root


def test_default_assets_are_left_out_of_every_bundle_with_a_warning(tmp_path: Path, capsys):
    """A file Unity imports as a DefaultAsset is in no bundle: the bundle a .meta names it for
    goes on without it (not made when it had nothing else), with a `not_bundled` warning naming
    the file and the bundle; reached as a dependency it is packed nowhere; it is still an asset
    that `why` explains. Scenes have the DefaultImporter too and stay in their bundle."""
    default_assets_project(tmp_path)
    build = write_build(tmp_path, bundles={"from_meta": True, "shared_dependencies": "duplicate"})
    assert run_cli("run", str(build)) == 0
    said = capsys.readouterr()
    manifest = json.loads((tmp_path / "out/manifest.json").read_text(encoding="utf-8"))
    bundles = manifest["bundles"]
    assert sorted(bundles) == ["data", "foam", "noise", "scenes", "shaders"]
    assert bundles["data"]["explicit"] == [ITEMS]
    assert bundles["data"]["implicit"] == []  # the .mtl is not copied in
    assert bundles["scenes"]["explicit"] == [SCENE]
    for path in (TABLE, ARCHIVE, MTL):
        assert manifest["assets"][path]["bundles"] == [], path
    assert not (tmp_path / "out" / "archives").exists()
    lines = (said.out + said.err).splitlines()
    assert any("problems in the project: 2 not_bundled" in line for line in lines)
    warnings = [line for line in lines if "not_bundled: " in line]
    assert len(warnings) == 2
    assert any(TABLE in line and "'data'" in line for line in warnings)
    assert any(ARCHIVE in line and "'archives'" in line for line in warnings)
    assert run_cli("why", str(build), MTL) == 0
    assert capsys.readouterr().out.startswith(f"{MTL} (UnityEngine.Object): cooked: {SCENE} > ")


def test_a_layout_rule_naming_a_default_asset_loses_it(tmp_path: Path):
    """Named by a layout rule, a DefaultAsset leaves that bundle too; the warning names the
    rule; a bundle the rule names with nothing else is not made."""
    source = collect_unity(str(default_assets_project(tmp_path)))
    assets = [source.assets[a] for a in (ITEMS, TABLE, MTL)]
    layout = [
        {"name": "tables", "include": ["Assets/Data/*.xlsx"]},
        {"name": "items", "include": ["Assets/Data/*.asset", MTL]},
    ]
    for policy in ("extract", "duplicate", "priority"):
        packing = pack(assets, layout, [], policy, not_bundled=source.not_bundled)
        assert "tables" not in packing.bundles and "default" not in packing.bundles, policy
        assert packing.bundles["items"].assets == (ITEMS,), policy
        assert packing.asset_bundles[TABLE] == packing.asset_bundles[MTL] == (), policy
        assert sorted((p.kind, p.file) for p in packing.problems) == [
            ("not_bundled", TABLE),
            ("not_bundled", MTL),
        ], policy
        (table,) = [p for p in packing.problems if p.file == TABLE]
        assert "'tables'" in table.message and "bundles.layout[0]" in table.message


def test_shader_graph_textures_make_bundle_dependencies(tmp_path: Path):
    """Unity records the bundles of the textures a Shader Graph names (in an escaped string or
    plain) as dependencies of the graph's bundle, and the graph's bundle as one of its users'."""
    default_assets_project(tmp_path)
    build = write_build(tmp_path, bundles={"from_meta": True, "shared_dependencies": "duplicate"})
    assert run_cli("run", str(build)) == 0
    bundles = json.loads((tmp_path / "out/manifest.json").read_text(encoding="utf-8"))["bundles"]
    assert bundles["shaders"]["dependencies"] == ["foam", "noise"]
    assert bundles["shaders"]["implicit"] == ["Assets/Shaders/Ripple.shadersubgraph"]
    assert bundles["scenes"]["dependencies"] == ["data", "shaders"]


def test_from_meta_on_a_project_whose_metas_assign_nothing_warns(unity_copy: Path, capsys):
    """The real project's .meta files name no bundle: `bundles.from_meta: true` says so, and
    what gives the bundles instead (the layout's rules, or nothing: everything in `default`)."""
    build = write_build(unity_copy, bundles={"from_meta": True})
    assert run_cli("run", str(build)) == 0
    said = capsys.readouterr()
    (warning,) = [
        line for line in (said.out + said.err).splitlines() if "from_meta_assigns_nothing: " in line
    ]
    assert "bundles.from_meta is true" in warning and "assetBundleName" in warning
    assert "every cooked asset goes to 'default'" in warning
    source = collect_unity(str(unity_copy / "project"))
    assets = list(source.assets.values())
    layout = [{"name": "ui", "include": ["Assets/HalfSLG/Resources/Prefabs/UIView/*"]}]
    (problem,) = pack(assets, layout, [], assigned=source.bundles).problems
    assert problem.file == "build file" and "bundles.layout names ('ui')" in problem.message
    # Without from_meta (no assignment asked for) nothing is said.
    assert pack(assets, layout, []).problems == []
