"""The Unity source on tiny hand-made projects: scanner, metas, references, nesting, roots, bundles."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from unity_projects import (
    HEADER,
    build_settings,
    guid,
    material,
    meta_text,
    prefab,
    ref,
    scriptable,
    shader_graph,
    write,
    write_folder_meta,
)

from orchestrator.errors import MissingInput
from orchestrator.files.reads import Reader
from stages.sources import get_source
from stages.sources.base import RESOURCE, WORLD
from stages.sources.unity.documents import (
    is_text_serialized,
    load_documents,
    read_meta,
    references_in_documents,
    scan_json_references,
    scan_references,
)
from stages.sources.unity.reader import SOURCE, bundles_from_meta, collect_unity, walk_project


# -- the scanner -------------------------------------------------------------------------------
def test_scanner_reads_wrapped_mappings_with_their_labels():
    """A mapping wrapped before `type:` or before `guid:` is one reference, labelled by its key."""
    data = (
        HEADER + "--- !u!114 &1\nMonoBehaviour:\n"
        f"  m_Sprite: {{fileID: 21300000, guid: {guid(1)},\n    type: 3}}\n"
        f"  m_CorrespondingSourceObject: {{fileID: -8188517722776874453,\n"
        f"    guid: {guid(2)}, type: 3}}\n"
    ).encode()
    refs = scan_references(data)
    assert [(r.guid, r.file_id, r.type, r.label, r.line) for r in refs] == [
        (guid(1), 21300000, 3, "m_Sprite", 5),
        (guid(2), -8188517722776874453, 3, "m_CorrespondingSourceObject", 7),
    ]


def test_scanner_reads_every_document_and_labels_list_items_by_their_list():
    """Multi-document files (with `stripped` headers): list items get the key of their list."""
    data = (
        material(3, 4).encode()
        + (
            "--- !u!4 &9 stripped\nTransform:\n"
            f"  m_CorrespondingSourceObject: {ref(5, 7, 3)}\n"
            f"  m_Children:\n  - {ref(6)}\n  - {{fileID: 0}}\n  - {ref(7)}\n"
        ).encode()
    )
    labels = [(r.guid, r.label) for r in scan_references(data)]
    assert labels == [
        ("0000000000000000f000000000000000", "m_Shader"),
        (guid(3), "m_Texture"),
        (guid(4), "m_Texture"),
        (guid(5), "m_CorrespondingSourceObject"),
        (guid(6), "m_Children"),
        (guid(7), "m_Children"),
    ]


def test_scanner_agrees_with_pyyaml_on_a_nested_prefab():
    """The fast scanner and PyYAML find the same (guid, fileID, type, label) sequence."""
    data = prefab([("icon", 1), ("config", 2)], nested=[3, 4]).encode()
    scanned = [(r.guid, r.file_id, r.type, r.label) for r in scan_references(data)]
    assert scanned == references_in_documents(load_documents(data))
    assert len(load_documents(data)) == 6


def test_scanner_ignores_guid_text_outside_reference_mappings():
    """`guid:` in a string or a longer key is not a reference."""
    data = (
        HEADER + "--- !u!114 &1\nMonoBehaviour:\n"
        f"  m_Text: 'see guid: {guid(1)}'\n  assetguid: {guid(2)}\n"
    ).encode()
    assert scan_references(data) == []


def test_scanner_is_linear_on_a_huge_line():
    """A multi-megabyte line (a font atlas) with references around it scans in well under a second."""
    data = (
        HEADER
        + "--- !u!28 &1\nTexture2D:\n  image data: "
        + "ab" * 3_000_000
        + "\n"
        + f"  m_Ref: {ref(1)}\n"
        + "  m_Other: {fileID: 1, guid: "
        + "c" * 31
        + "}\n"
    ).encode()
    start = time.perf_counter()
    refs = scan_references(data)
    assert time.perf_counter() - start < 1.0
    assert [r.guid for r in refs] == [guid(1)]


def test_json_scanner_reads_escaped_and_plain_guids_of_a_shader_graph():
    """Each `"guid"` key of a Shader Graph is a reference, in an escaped string or plain, with
    the fileID and type of its object, the key holding the object, and its line."""
    data = shader_graph(guid(61), guid(62), guid(63)).encode()
    refs = scan_json_references(data)
    assert [(r.guid, r.file_id, r.type, r.label) for r in refs] == [
        (guid(61), 2800000, 3, "texture"),
        (guid(62), 2800000, 3, "m_Texture"),
        (guid(63), -5475051401550479605, 3, "subGraph"),
    ]
    lines = data.decode().splitlines()
    for found in refs:
        assert found.guid in lines[found.line - 1]


JSON_KEYS = st.sampled_from(["m_Texture", "texture", "m_Value", "data", "guidish", "Guid"])
HEX32 = st.text("0123456789abcdef", min_size=32, max_size=32)


@st.composite
def json_with_references(draw, depth: int = 0) -> tuple[object, list[str]]:
    """A JSON value and the GUIDs its `"guid"` keys hold, in document order; some objects are
    serialized into strings (as Shader Graph stores textures), escaping their quotes."""
    if depth >= 3 or draw(st.booleans()):
        return draw(st.one_of(st.integers(), HEX32, st.text(max_size=8))), []
    value: dict[str, object] = {}
    found: list[str] = []
    if draw(st.booleans()):
        value["fileID"] = draw(st.integers(-(2**63), 2**63 - 1))
        value["guid"] = draw(HEX32)
        found.append(value["guid"])
    for key in draw(st.lists(JSON_KEYS, max_size=3, unique=True)):
        child, inner = draw(json_with_references(depth + 1))
        if inner and draw(st.booleans()):
            child = json.dumps(child, indent=draw(st.sampled_from([None, 4])))
        value[key] = child
        found += inner
    return value, found


@settings(max_examples=150, deadline=None, derandomize=True)
@given(document=json_with_references(), indent=st.sampled_from([None, 2, 4]))
def test_json_scanner_finds_every_guid_key_in_order(document, indent):
    """Whatever the nesting and escaping, the scanner finds exactly the GUIDs under `"guid"`
    keys, in order (32-hex values under other keys are no references)."""
    value, expected = document
    data = json.dumps(value, indent=indent).encode()
    assert [r.guid for r in scan_json_references(data)] == expected


def test_json_scanner_is_linear_on_a_huge_line():
    """Megabytes of backslashes and quotes on one line scan in well under a second."""
    data = b'{"a": "' + b"\\" * 2_000_000 + b'\\"guid' * 200_000 + b'"}'
    start = time.perf_counter()
    assert scan_json_references(data) == []
    assert time.perf_counter() - start < 1.0


def test_meta_reader_and_binary_detection():
    """`.meta` gives guid, bundle name/variant, folder flag and importer; binary assets are told
    from YAML."""
    info = read_meta(meta_text(guid(7), bundle="ui", variant="hd", folder=True).encode())
    assert info == (guid(7), "ui", "hd", True, "DefaultImporter")
    texture = meta_text(guid(8), importer="TextureImporter").replace("\n", "\r\n").encode()
    assert read_meta(texture) == (guid(8), "", "", False, "TextureImporter")
    # Only the top-level key names the importer (a nested `…Importer:` key is no section).
    nested = f"fileFormatVersion: 2\nguid: {guid(9)}\nScriptedImporter:\n  OtherImporter: 1\n"
    assert read_meta(nested.encode()).importer == "ScriptedImporter"
    assert read_meta(b"fileFormatVersion: 2\n") is None
    assert is_text_serialized(HEADER.encode())
    assert not is_text_serialized(b"\x00\x00\x00\x17UnityFS")


# -- collecting a project ----------------------------------------------------------------------
@pytest.fixture
def project(tmp_path: Path) -> Path:
    """Scenes, nested prefabs, a material, textures, Resources, an orphan meta, StreamingAssets."""
    write(
        tmp_path,
        "ProjectSettings/EditorBuildSettings.asset",
        build_settings(
            ("Assets/Scenes/Main.unity", 10, True), ("Assets/Scenes/Old.unity", 11, False)
        ),
    )
    write_folder_meta(tmp_path, "Assets/Scenes", guid(90))
    write(
        tmp_path,
        "Assets/Scenes/Main.unity",
        HEADER
        + "--- !u!29 &1\nOcclusionCullingSettings:\n  m_ObjectHideFlags: 0\n"
        + f"--- !u!114 &2\nMonoBehaviour:\n  m_Script: {ref(900, 11500000, 3)}\n"
        + f"  hud: {ref(20, 100100000, 3)}\n"
        + "  m_Cookie: {fileID: 10001, guid: 0000000000000000e000000000000000, type: 0}\n"
        + f"  m_Lost: {ref(99, 21300000, 3)}\n",
        guid(10),
    )
    write(
        tmp_path,
        "Assets/Scenes/Old.unity",
        HEADER + "--- !u!29 &1\nOcclusionCullingSettings: {}\n",
        guid(11),
    )
    write(
        tmp_path, "Assets/UI/Resources/Hud.prefab", prefab([("config", 30)], nested=[21]), guid(20)
    )
    write(tmp_path, "Assets/UI/Panel.prefab", prefab([("skin", 31)], nested=[22]), guid(21))
    write(tmp_path, "Assets/UI/Button.prefab", prefab([("look", 32)]), guid(22))
    write(tmp_path, "Assets/UI/Hud.asset", scriptable(31), guid(30))
    write(tmp_path, "Assets/UI/Skin.mat", material(40), guid(31))
    write(tmp_path, "Assets/UI/Look.mat", material(41), guid(32))
    write(tmp_path, "Assets/Textures/a.png", b"\x89PNG\r\n\x1a\n", guid(40))
    write(tmp_path, "Assets/Textures/b.png", b"\x89PNG\r\n\x1a\n", guid(41))
    write(tmp_path, "Assets/Data/Resources/table.txt", "x", guid(42))
    write(tmp_path, "Assets/Editor/Resources/tool.txt", "x", guid(43))
    write(tmp_path, "Assets/Data/Binary.asset", b"\x00\x01binary serialized\x00", guid(44))
    write(tmp_path, "Assets/Scripts/Hud.cs", "class Hud {}", guid(900))
    (tmp_path / "Assets/Fonts").mkdir(parents=True)
    (tmp_path / "Assets/Fonts/Big.asset.meta").write_text(meta_text(guid(45)), encoding="utf-8")
    write(tmp_path, "Assets/StreamingAssets/ui.unity3d.manifest", "Assets: []", guid(46))
    write(tmp_path, "Assets/NoMeta.txt", "x")
    return tmp_path


def test_source_is_registered_under_unity():
    """A build file's `source: unity` gets this module's SOURCE."""
    assert get_source("unity") is SOURCE


def test_assets_are_project_paths_with_unity_types(project: Path):
    """Ids are project-relative paths; types are Unity's qualified class names; scenes are worlds."""
    result = collect_unity(str(project))
    assets = result.assets
    assert assets["Assets/UI/Skin.mat"].type == "UnityEngine.Material"
    assert assets["Assets/UI/Panel.prefab"].type == "UnityEngine.GameObject"
    assert assets["Assets/UI/Hud.asset"].type == "UnityEngine.ScriptableObject"
    assert assets["Assets/Textures/a.png"].type == "UnityEngine.Texture2D"
    assert assets["Assets/Data/Resources/table.txt"].type == "UnityEngine.TextAsset"
    assert assets["Assets/Scenes/Main.unity"].type == "UnityEngine.SceneAsset"
    assert assets["Assets/Scenes/Main.unity"].kind == WORLD
    assert assets["Assets/UI/Skin.mat"].kind == RESOURCE
    assert assets["Assets/UI/Skin.mat"].files == ("Assets/UI/Skin.mat", "Assets/UI/Skin.mat.meta")
    assert "Assets/Scripts/Hud.cs" not in assets  # code is not content
    assert not any(a.startswith("Assets/StreamingAssets/") for a in assets)
    assert result.index.path_of(guid(31)) == "Assets/UI/Skin.mat"
    assert result.index.guid_of("Assets/UI/Skin.mat") == guid(31)


def test_references_external_missing_and_code(project: Path):
    """Built-ins are external, a GUID with no .meta stays a dangling Ref, m_Script is no reference."""
    result = collect_unity(str(project))
    scene = result.assets["Assets/Scenes/Main.unity"]
    assert [(r.target, r.label) for r in scene.refs] == [
        ("Assets/UI/Resources/Hud.prefab", "hud"),
        ("0000000000000000e000000000000000", "m_Cookie"),
        (guid(99), "m_Lost"),
    ]
    assert guid(99) not in result.assets and guid(99) not in result.external
    assert "0000000000000000e000000000000000" in result.external
    assert not any(
        r.target == "Assets/Scripts/Hud.cs" or r.target == guid(900)
        for a in result.assets.values()
        for r in a.refs
    )
    # A script GUID no .meta declares (a package's) is known to be external, but is not a Ref.
    assert guid(901) in result.external


def test_nested_prefabs_hoist_content_but_not_deeper_prefabs(project: Path):
    """Hud nests Panel nests Button: Hud refs Panel and the content of both, never Button itself."""
    assets = collect_unity(str(project)).assets
    hud = [(r.target, r.label) for r in assets["Assets/UI/Resources/Hud.prefab"].refs]
    assert hud == [
        ("Assets/UI/Hud.asset", "config"),
        ("Assets/UI/Panel.prefab", "m_SourcePrefab"),
        ("Assets/UI/Skin.mat", "skin via Assets/UI/Panel.prefab"),
        ("Assets/UI/Look.mat", "look via Assets/UI/Button.prefab via Assets/UI/Panel.prefab"),
    ]
    panel = [(r.target, r.label) for r in assets["Assets/UI/Panel.prefab"].refs]
    assert panel == [
        ("Assets/UI/Skin.mat", "skin"),
        ("Assets/UI/Button.prefab", "m_SourcePrefab"),
        ("Assets/UI/Look.mat", "look via Assets/UI/Button.prefab"),
    ]


def test_roots_are_enabled_scenes_and_resources_outside_editor(project: Path):
    """Enabled scenes in build order; every asset in a Resources folder except under Editor."""
    result = collect_unity(str(project))
    assert result.roots["scenes"] == ["Assets/Scenes/Main.unity"]
    assert result.roots["resources"] == [
        "Assets/Data/Resources/table.txt",
        "Assets/UI/Resources/Hud.prefab",
    ]
    assert result.index.scenes == ("Assets/Scenes/Main.unity",)


def test_problems_are_reported_once_and_collect_goes_on(project: Path):
    """Orphan meta, binary asset, file without meta: one Problem each, none fatal."""
    result = collect_unity(str(project))
    problems = {(p.kind, p.file) for p in result.problems}
    assert problems == {
        ("orphan_meta", "Assets/Fonts/Big.asset.meta"),
        ("binary_asset", "Assets/Data/Binary.asset"),
        ("missing_meta", "Assets/NoMeta.txt"),
    }
    assert len(result.problems) == 3 and not any(p.fatal for p in result.problems)
    assert result.assets["Assets/Data/Binary.asset"].refs == ()
    # The orphan's GUID still resolves to its path, so a reference to it names the missing file.
    assert result.index.path_of(guid(45)) == "Assets/Fonts/Big.asset"
    assert "Assets/Fonts/Big.asset" not in result.assets


def test_shader_graph_references_resolve_and_default_assets_are_named(tmp_path: Path):
    """A Shader Graph's GUIDs resolve to project paths (an unknown one is missing, a built-in
    one external); files whose .meta names the DefaultImporter are never bundled, folders and
    scenes (which have that importer too) excepted."""
    write(tmp_path, "Assets/Textures/Foam.png", b"png", guid(61))
    write(tmp_path, "Assets/Textures/Noise.png", b"png", guid(62))
    graph = shader_graph(guid(61), guid(62), "0000000000000000f000000000000000")
    write(tmp_path, "Assets/Shaders/Water.shadergraph", graph, guid(60))
    write(tmp_path, "Assets/Shaders/Lost.shadersubgraph", shader_graph(guid(99), "", ""), guid(64))
    write_folder_meta(tmp_path, "Assets/Data", guid(70))
    write(tmp_path, "Assets/Data/Items.xlsx", b"PK", guid(71))
    write(tmp_path, "Assets/Data/Chair.mtl", "newmtl chair\n", guid(72))
    write(tmp_path, "Assets/Scenes/Main.unity", prefab([]), guid(73))
    result = collect_unity(str(tmp_path))
    water = result.assets["Assets/Shaders/Water.shadergraph"]
    assert [(r.target, r.label) for r in water.refs] == [
        ("Assets/Textures/Foam.png", "texture"),
        ("Assets/Textures/Noise.png", "m_Texture"),
        ("0000000000000000f000000000000000", "subGraph"),
    ]
    assert water.type == "UnityEngine.Shader"
    assert "0000000000000000f000000000000000" in result.external
    assert [r.target for r in result.assets["Assets/Shaders/Lost.shadersubgraph"].refs] == [
        guid(99)
    ]
    assert set(result.not_bundled) == {"Assets/Data/Items.xlsx", "Assets/Data/Chair.mtl"}
    assert "DefaultImporter" in result.not_bundled["Assets/Data/Items.xlsx"]
    assert result.info().not_bundled == result.not_bundled


def test_bundles_from_meta_names_variants_and_folder_names(tmp_path: Path):
    """Own assetBundleName wins; a folder's name covers the assets inside; variants are suffixed."""
    write_folder_meta(tmp_path, "Assets/UI", guid(1), bundle="ui")
    write(tmp_path, "Assets/UI/a.png", b"png", guid(2))
    write(tmp_path, "Assets/UI/b.png", b"png", guid(3), bundle="Icons", variant="hd")
    write(tmp_path, "Assets/Other/c.png", b"png", guid(4))
    result = collect_unity(str(tmp_path))
    assert bundles_from_meta(result.index) == {
        "icons.hd": ["Assets/UI/b.png"],
        "ui": ["Assets/UI/a.png"],
    }


def test_plan_gives_stable_unit_ids_per_folder(project: Path):
    """Units are per folder (split past batch_size); a new file elsewhere changes no other unit."""
    files = walk_project(str(project))
    before = {u.id: u.files for u in SOURCE.plan(files, {})}
    write(project, "Assets/Textures/c.png", b"png", guid(47))
    after = {u.id: u.files for u in SOURCE.plan(walk_project(str(project)), {})}
    changed = {uid for uid in after if before.get(uid) != after[uid]}
    assert changed == {"unity:Assets/Textures"}
    assert "unity:settings" in after
    split = [
        u.id for u in SOURCE.plan(files, {"batch_size": 2}) if u.id.startswith("unity:Assets/UI")
    ]
    # Assets/UI holds 5 assets and their 5 metas: 10 files, 5 units of 2.
    assert split == [
        "unity:Assets/UI",
        "unity:Assets/UI#1",
        "unity:Assets/UI#2",
        "unity:Assets/UI#3",
        "unity:Assets/UI#4",
        "unity:Assets/UI/Resources",
    ]


def test_parse_reads_only_through_the_reader(project: Path):
    """A unit reads its metas and native assets via the Reader (recorded); textures are not read."""
    unit = next(u for u in SOURCE.plan(walk_project(str(project)), {}) if u.id == "unity:Assets/UI")
    reader = Reader(str(project))
    SOURCE.parse(unit, reader, {})
    assert sorted(reader.reads) == sorted(unit.files)
    texture_unit = next(
        u for u in SOURCE.plan(walk_project(str(project)), {}) if u.id == "unity:Assets/Textures"
    )
    offline = Reader(str(project), disk=False)
    with pytest.raises(MissingInput):
        SOURCE.parse(texture_unit, offline, {})
    preloaded = {
        path: (project / path).read_bytes() for path in texture_unit.files if path.endswith(".meta")
    }
    parsed = SOURCE.parse(texture_unit, Reader(str(project), preloaded=preloaded, disk=False), {})
    assert len(parsed) == len(texture_unit.files)


def test_broken_build_settings_is_a_problem_not_a_crash(tmp_path: Path):
    """Unparseable EditorBuildSettings: a Problem with its line, no scene roots."""
    write(
        tmp_path,
        "ProjectSettings/EditorBuildSettings.asset",
        HEADER + "--- !u!1045 &1\n  m_Scenes: [\n",
    )
    write(tmp_path, "Assets/a.txt", "x", guid(1))
    result = collect_unity(str(tmp_path))
    assert result.roots["scenes"] == []
    assert [p.kind for p in result.problems] == ["broken_build_settings"]


def test_a_bundle_name_with_a_control_character_is_a_fatal_problem(tmp_path: Path):
    """An assetBundleName holding a control character would become a path and a ledger line:
    the .meta is left out with a fatal problem naming it and the name."""
    write(tmp_path, "Assets/UI/a.png", b"png", guid(2), bundle="ui\x1b[2Jx")
    write(tmp_path, "Assets/UI/b.png", b"png", guid(3), bundle="ui")
    result = collect_unity(str(tmp_path))
    (problem,) = [p for p in result.problems if p.kind == "unsafe_name"]
    assert problem.fatal and problem.file == "Assets/UI/a.png.meta"
    assert "assetBundleName 'ui\\x1b[2Jx'" in problem.message and "U+001B" in problem.message
    assert bundles_from_meta(result.index) == {"ui": ["Assets/UI/b.png"]}


def test_an_alias_bomb_in_build_settings_is_a_problem_not_a_crash(tmp_path: Path):
    """EditorBuildSettings is read by PyYAML: past the YAML expansion budget it is a problem of
    that file with the alias's line (before, 10**9 scene entries were handed to the assembler)."""
    bomb = "".join(
        f"  l{n}: &l{n} ["
        + ", ".join([f"*l{n - 1}" if n else "{path: a, enabled: 1}"] * 10)
        + "]\n"
        for n in range(9)
    )
    write(
        tmp_path,
        "ProjectSettings/EditorBuildSettings.asset",
        HEADER + "--- !u!1045 &1\nEditorBuildSettings:\n" + bomb + "  m_Scenes: *l8\n",
    )
    write(tmp_path, "Assets/a.txt", "x", guid(1))
    result = collect_unity(str(tmp_path))
    assert result.roots["scenes"] == []
    [problem] = result.problems
    assert problem.kind == "broken_build_settings" and problem.line == 9
    assert "YAML expansion budget of 1,000,000" in problem.message
