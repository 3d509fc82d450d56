"""Rules on Unity content: the `unity_yaml` path language, its registration, and the shipped
configs/rules/unity-common.yaml on hand-made files and on the real project."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml
from unity_projects import HEADER, build_settings, guid, material, prefab, write

from orchestrator.shell.cli import main
from stages.rules import registry
from stages.rules.engine import validate_project
from stages.sources.unity.paths import (
    LANGUAGE,
    UnityParseError,
    UnityPathError,
    compile_unity_path,
    evaluate,
    parse_unity_yaml,
)
from stages.sources.unity.reader import collect_unity

REPO = Path(__file__).resolve().parents[1]
LIBRARY = REPO / "configs" / "rules" / "unity-common.yaml"
REALDATA = "realdata/unity-slg-warriors"


def query(expr: str, text: str, relpath: str = "x.prefab") -> tuple[list, list]:
    return evaluate(compile_unity_path(expr), parse_unity_yaml(text.encode(), relpath))


def texture_meta(
    asset_guid: str,
    max_size: int = 2048,
    readable: int = 0,
    texture_type: int = 8,
    mipmaps: int = 0,
    override: tuple[int, int] = (0, 2048),
) -> str:
    """A texture's `.meta` as Unity 2018 writes it (the keys the rule library reads)."""
    overridden, platform_size = override
    return (
        f"fileFormatVersion: 2\nguid: {asset_guid}\nTextureImporter:\n"
        f"  mipmaps:\n    enableMipMap: {mipmaps}\n  isReadable: {readable}\n"
        f"  maxTextureSize: {max_size}\n  textureType: {texture_type}\n"
        f"  platformSettings:\n  - serializedVersion: 2\n    buildTarget: DefaultTexturePlatform\n"
        f"    maxTextureSize: {max_size}\n    overridden: 0\n"
        f"  - serializedVersion: 2\n    buildTarget: Android\n"
        f"    maxTextureSize: {platform_size}\n    overridden: {overridden}\n"
        f"  userData: \n  assetBundleName: \n  assetBundleVariant: \n"
    )


# -- the language --------------------------------------------------------------------------------
def test_dotted_keys_read_meta_and_material_values_with_lines():
    """A `.meta` is one plain document; a `.mat` a Unity document; values keep text and line."""
    meta = texture_meta(guid(1), max_size=1024)
    assert query("TextureImporter.maxTextureSize", meta, "t.png.meta") == (["1024"], [7])
    assert query("guid", meta, "t.png.meta") == ([guid(1)], [2])
    mat = material(7, 8)
    assert query("Material.m_Shader.guid", mat, "m.mat") == (
        ["0000000000000000f000000000000000"],
        [6],
    )
    assert query("Material.m_Shader", mat, "m.mat")[0] == [
        {"fileID": "46", "guid": "0000000000000000f000000000000000", "type": "0"}
    ]


def test_wildcards_lists_and_deep_steps():
    """`*` takes every value, lists are walked through, `**` reaches any depth, `m_*` matches keys."""
    mat = material(7, 8)
    assert query("Material.m_SavedProperties.m_TexEnvs.*.m_Texture.guid", mat, "m.mat") == (
        [guid(7), guid(8)],
        [10, 12],
    )
    assert query("**.guid", mat, "m.mat")[0] == [
        "0000000000000000f000000000000000",
        guid(7),
        guid(8),
    ]
    assert query("Material.m_*", mat, "m.mat")[0][0] == "m"  # m_Name first, then m_Shader, …
    meta = texture_meta(guid(1), override=(1, 4096))
    assert query("TextureImporter.platformSettings.maxTextureSize", meta, "t.png.meta")[0] == [
        "2048",
        "4096",
    ]


def test_filters_select_nodes_by_a_relative_value():
    """`[k==v]` keeps the nodes with that value, `[k!=v]` the others; filters apply per list item."""
    meta = texture_meta(guid(1), override=(1, 4096))
    assert query(
        "TextureImporter.platformSettings[overridden==1].maxTextureSize", meta, "t.png.meta"
    ) == (["4096"], [16])
    assert query(
        "TextureImporter.platformSettings[buildTarget!=Android].buildTarget", meta, "t.png.meta"
    )[0] == ["DefaultTexturePlatform"]
    assert query("TextureImporter[textureType==8].mipmaps.enableMipMap", meta, "t.png.meta")[0] == [
        "0"
    ]
    assert query('TextureImporter[textureType=="0"].isReadable', meta, "t.png.meta")[0] == []


def test_queries_cross_every_document_including_stripped_ones():
    """A nested prefab's documents (PrefabInstance, a `stripped` Transform) are all queried."""
    text = prefab([("m_Icon", 5)], nested=[6])
    assert query("PrefabInstance.m_SourcePrefab.guid", text)[0] == [guid(6)]
    assert query("Transform.m_CorrespondingSourceObject.guid", text)[0] == [guid(6)]
    values, lines = query("**.guid", text)
    assert values == [guid(900), guid(5), guid(6), guid(6), guid(6)]
    assert lines == sorted(lines) and len(parse_unity_yaml(text.encode(), "x.prefab")) == 4


def test_compile_and_parse_errors():
    """XML expressions and malformed paths are rejected; binary assets and bad YAML name a line."""
    for bad in ("*/Items/Item,GUID", "a..b", "a[b=c]", "a.x**", "a[b==c", "", "a[**==1]"):
        with pytest.raises(UnityPathError):
            compile_unity_path(bad)
    with pytest.raises(UnityParseError) as binary:
        parse_unity_yaml(b"\x00\x01binary", "Assets/a.asset")
    assert binary.value.line == 1
    with pytest.raises(UnityParseError) as broken:
        parse_unity_yaml(
            (HEADER + "--- !u!21 &1\nMaterial:\n  m_Name: [unclosed\n").encode(), "m.mat"
        )
    assert broken.value.line == 6


def alias_bomb(levels: int = 9) -> str:
    """A MonoBehaviour whose `data` expands to 10**(levels) leaves (10**9 in ~650 bytes)."""
    lines = ["    l0: &l0 [" + ", ".join(["x"] * 10) + "]\n"]
    lines += [
        f"    l{n}: &l{n} [" + ", ".join([f"*l{n - 1}"] * 10) + "]\n" for n in range(1, levels)
    ]
    return (
        HEADER + "--- !u!114 &11400000\nMonoBehaviour:\n  m_Name: Bomb\n  data:\n" + "".join(lines)
    )


def test_an_alias_bomb_in_an_asset_is_refused_before_it_is_walked():
    """The budget of orchestrator/yamlfile.py holds for Unity files: refused at the alias's line,
    naming the budget (before, the 10**9 leaves composed in a moment and `**.guid` walked them)."""
    with pytest.raises(UnityParseError) as refused:
        parse_unity_yaml(alias_bomb().encode(), "Assets/Data/Bomb.asset")
    assert refused.value.line == 12  # lines 8-11 add 234,540; the fourth *l4 crosses 1,000,000
    assert "YAML expansion budget of 1,000,000" in str(refused.value)
    # Aliases within the budget are read, and what they repeat is found through them.
    documents = parse_unity_yaml(alias_bomb(levels=3).encode(), "Assets/Data/Small.asset")
    assert len(query_nodes("MonoBehaviour.data.l2", documents)) == 1000


def query_nodes(expr: str, documents: list) -> list:
    return evaluate(compile_unity_path(expr), documents)[0]


def test_an_alias_bomb_is_a_failure_of_its_file_not_of_the_build(tmp_path: Path):
    """The shipped library on a project holding the bomb: that file fails its rule, with its line
    and the budget; the other files are checked as before."""
    root = planted_project(tmp_path / "project")
    write(root, "Assets/Data/Bomb.asset", alias_bomb(), guid(41))
    index = collect_unity(str(root)).index
    document = validate_project(str(root), [LIBRARY], index)
    assert not document["rule_errors"]
    bomb = [f for f in document["failures"] if f["source"] == "Assets/Data/Bomb.asset"]
    assert [f["rule"] for f in bomb] == ["asset-guids-resolve"]
    assert bomb[0]["message"].startswith("Assets/Data/Bomb.asset:12: ")
    assert "YAML expansion budget of 1,000,000" in bomb[0]["message"]
    assert len(document["failures"]) == 13  # the 12 planted defects, and the bomb


def test_the_language_is_registered_and_found_without_package_metadata(monkeypatch):
    """Entry point or not (stale metadata), `.meta`/`.prefab` files use unity_yaml, XML the rest."""
    assert registry.path_languages()["unity_yaml"] is LANGUAGE
    assert registry.language_for("Assets/UI/A.prefab") is LANGUAGE
    assert registry.language_for("Assets/UI/a.PNG.meta") is LANGUAGE
    assert registry.language_for("Repository/resource.xml") is registry.XML
    monkeypatch.setattr(registry, "entry_points", lambda group: [])
    registry.path_languages.cache_clear()
    registry.available_checks.cache_clear()
    try:
        assert registry.path_languages()["unity_yaml"] is LANGUAGE
        assert "unity_guid_resolves" in registry.available_checks()
    finally:
        registry.path_languages.cache_clear()
        registry.available_checks.cache_clear()


# -- the rule library ----------------------------------------------------------------------------
def planted_project(root: Path) -> Path:
    """One defect per rule of unity-common.yaml, next to clean files of each kind."""
    write(
        root,
        "ProjectSettings/EditorBuildSettings.asset",
        build_settings(
            ("Assets/Scenes/Main.unity", 50, True),
            ("Assets/Scenes/Gone.unity", 51, True),
            ("Assets/Scenes/Off.unity", 52, False),
        ),
    )
    write(root, "Assets/Scenes/Main.unity", prefab([("m_Icon", 1)]), guid(50))
    textures = {
        "Ok": {},
        "Huge": {"max_size": 4096},
        "Override": {"override": (1, 4096)},
        "Readable": {"readable": 1},
        "Mipmapped": {"mipmaps": 1},
    }
    for n, (name, settings) in enumerate(textures.items(), start=1):
        write(root, f"Assets/Textures/{name}.png", b"\x89PNG")
        write(root, f"Assets/Textures/{name}.png.meta", texture_meta(guid(n), **settings))
    write(root, "Assets/Textures/Normal.png", b"\x89PNG")  # mipmaps are fine off sprites
    write(root, "Assets/Textures/Normal.png.meta", texture_meta(guid(9), texture_type=1, mipmaps=1))
    write(root, "Assets/Other/NoGuid.txt", "x")
    write(root, "Assets/Other/NoGuid.txt.meta", "fileFormatVersion: 2\nDefaultImporter: {}\n")
    write(root, "Assets/Other/Upper.txt", "x")
    write(root, "Assets/Other/Upper.txt.meta", f"fileFormatVersion: 2\nguid: {guid(10).upper()}\n")
    write(root, "Assets/Other/Gone.png.meta", texture_meta(guid(11)))  # its file is gone
    write(root, "Assets/Materials/Ok.mat", material(1), guid(20))
    write(
        root,
        "Assets/Materials/NoShader.mat",
        material(1).replace(
            "{fileID: 46, guid: 0000000000000000f000000000000000, type: 0}", "{fileID: 0}"
        ),
        guid(21),
    )
    write(
        root,
        "Assets/Materials/LostShader.mat",
        material(1).replace(
            "{fileID: 46, guid: 0000000000000000f000000000000000, type: 0}",
            f"{{fileID: 4800000, guid: {guid(98)}, type: 3}}",
        ),
        guid(22),
    )
    write(root, "Assets/Materials/LostTexture.mat", material(1, 97), guid(23))
    write(root, "Assets/Prefabs/Ok.prefab", prefab([("m_Sprite", 1)], nested=[30]), guid(30))
    write(
        root, "Assets/Prefabs/Broken.prefab", prefab([("m_Sprite", 96), ("m_Font", 11)]), guid(31)
    )
    write(
        root,
        "Assets/Data/Broken.asset",
        HEADER
        + f"--- !u!114 &1\nMonoBehaviour:\n  icon: {{fileID: 1, guid: {guid(95)}, type: 2}}\n",
        guid(40),
    )
    return root


def test_unity_common_catches_each_planted_defect(tmp_path: Path):
    """Every rule fails exactly on its planted file; the clean files pass."""
    root = planted_project(tmp_path / "project")
    index = collect_unity(str(root)).index
    document = validate_project(str(root), [LIBRARY], index)
    assert document["rules"] == 12 and not document["rule_errors"]
    failed = {(f["rule"], f["source"]): f["errors"] for f in document["failures"]}
    assert failed == {
        ("texture-max-size", "Assets/Textures/Huge.png.meta"): ["4096"],
        ("texture-platform-max-size", "Assets/Textures/Override.png.meta"): ["4096"],
        ("texture-not-readable", "Assets/Textures/Readable.png.meta"): ["1"],
        ("sprite-without-mipmaps", "Assets/Textures/Mipmapped.png.meta"): ["1"],
        ("meta-has-guid", "Assets/Other/NoGuid.txt.meta"): [],
        ("meta-guid-format", "Assets/Other/Upper.txt.meta"): [guid(10).upper()],
        ("material-has-shader", "Assets/Materials/NoShader.mat"): ["0"],
        ("material-shader-resolves", "Assets/Materials/LostShader.mat"): [guid(98)],
        ("material-textures-resolve", "Assets/Materials/LostTexture.mat"): [guid(97)],
        # A GUID no .meta declares, and one whose .meta remains without its file.
        ("prefab-guids-resolve", "Assets/Prefabs/Broken.prefab"): [guid(96), guid(11)],
        ("asset-guids-resolve", "Assets/Data/Broken.asset"): [guid(95)],
        ("build-scenes-exist", "ProjectSettings/EditorBuildSettings.asset"): [guid(51)],
    }
    lines = {f["rule"]: f["lines"] for f in document["failures"]}
    assert lines["texture-max-size"] == [7] and lines["build-scenes-exist"] == [12]


def test_unity_common_through_the_validate_stage(tmp_path: Path):
    """`source: unity` with the library: validate.json lists the failures, errors fail the build."""
    planted_project(tmp_path / "project")
    build = tmp_path / "build.yaml"
    build.write_text(
        yaml.safe_dump(
            {
                "project": "project",
                "source": "unity",
                "output": "out",
                "cache": "cache",
                "executor": {"kind": "local"},
                "rules": {"files": [str(LIBRARY)]},
            }
        ),
        encoding="utf-8",
    )
    for _run in range(2):  # the second run answers from the cache
        with pytest.raises(SystemExit) as stop:
            main(["run", str(build)])
        assert stop.value.code == 1
        report = json.loads((tmp_path / "out/reports/validate.json").read_text(encoding="utf-8"))
        assert len(report["failures"]) == 12 and not report["rule_errors"]


def test_unity_common_on_the_real_project(shared_dir: Path):
    """On SLG Warriors only references into files left out of the snapshot fail (11 sources)."""
    root = shared_dir / REALDATA
    if not root.is_dir():
        pytest.skip(f"the real Unity project is absent ({root})")
    index = collect_unity(str(root)).index
    document = validate_project(str(root), [LIBRARY], index)
    assert document["rules"] == 12 and not document["rule_errors"]
    assert document["sources_checked"] == 1121
    assert Counter(f["rule"] for f in document["failures"]) == {
        "material-shader-resolves": 6,
        "asset-guids-resolve": 3,
        "prefab-guids-resolve": 2,
    }
    missing = {index.path_of(e) for f in document["failures"] for e in f["errors"]}
    assert missing == {
        "Assets/HalfSLG/Font/chinese.asset",
        "Assets/HalfSLG/Font/TTF/simhei.ttf",
        "Assets/3rd/TextMesh Pro/Resources/Shaders/TMP_SDF.shader",
        "Assets/3rd/TextMesh Pro/Resources/Shaders/TMP_SDF-Mobile.shader",
        "Assets/3rd/TextMesh Pro/Resources/Shaders/TMP_Sprite.shader",
    }
    skill_choose = next(
        f for f in document["failures"] if f["source"].endswith("UIView_SkillChoose.prefab")
    )
    assert skill_choose["lines"] == [503, 504, 1104, 1105, 1560]
