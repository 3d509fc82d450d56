"""The Unity source on a real project (../shared/realdata/unity-slg-warriors), checked against the
bundle manifests Unity itself wrote for it. Read-only: nothing is copied or written."""

from __future__ import annotations

from pathlib import Path

import pytest

from stages.cooklist.closure import compute_cooklist
from stages.layout.packing import pack
from stages.sources.base import Asset
from stages.sources.unity.documents import (
    is_text_serialized,
    load_documents,
    references_in_documents,
    scan_references,
)
from stages.sources.unity.reader import collect_unity, walk_project

pytestmark = pytest.mark.shared

PROJECT = Path(__file__).resolve().parents[2] / "shared" / "realdata" / "unity-slg-warriors"
STREAMING = PROJECT / "Assets" / "StreamingAssets"
SKILL_CHOOSE = "resources/prefabs/uiview/uiview_skillchoose.unity3d"
CHINESE_FONT = "Assets/HalfSLG/Font/chinese.asset"


@pytest.fixture(scope="module")
def result():
    if not PROJECT.is_dir():
        pytest.skip(f"real Unity project absent ({PROJECT}): ../shared is not mounted")
    return collect_unity(str(PROJECT))


def read_manifest(path: Path) -> tuple[list[str], list[str]]:
    """(`Assets:` entries, `Dependencies:` entries) of a `.unity3d.manifest`."""
    sections: dict[str, list[str]] = {"Assets:": [], "Dependencies:": []}
    current = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line in sections or line.startswith("Dependencies: "):
            current = sections.get(line)  # `Dependencies: []` leaves the list empty
        elif current is not None and line.startswith("- "):
            current.append(line[2:].strip())
        elif not line.startswith(" "):
            current = None
    return sections["Assets:"], sections["Dependencies:"]


def unity_bundles() -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Per bundle (name relative to StreamingAssets): its explicit assets and Unity's dependencies."""
    explicit, dependencies = {}, {}
    for manifest in sorted(STREAMING.rglob("*.unity3d.manifest")):
        name = manifest.relative_to(STREAMING).as_posix()[: -len(".manifest")]
        assets, deps = read_manifest(manifest)
        explicit[name] = [_project_relative(a) for a in assets]
        # Dependencies are absolute paths of the build machine: E:/games/…/StreamingAssets/<name>.
        dependencies[name] = sorted(
            d.replace("\\", "/").split("/StreamingAssets/", 1)[1] for d in deps
        )
    return explicit, dependencies


def _project_relative(path: str) -> str:
    path = path.replace("\\", "/")
    return path[path.index("Assets/") :] if not path.startswith("Assets/") else path


def bundle_dependencies(
    assets: dict[str, Asset], explicit: dict[str, list[str]]
) -> dict[str, list[str]]:
    """pipeline.md "Pack" (duplicate policy, as Unity's built-in pipeline): a bundle holds its explicit
    assets and what they reach that no bundle names; it depends on the bundles whose explicit assets
    its own assets reference. Only assets the project has can be packed."""
    owner = {a: name for name, ids in explicit.items() for a in ids if a in assets}
    result = {}
    for name, ids in explicit.items():
        depends, seen = set(), set()
        stack = [a for a in ids if a in assets]
        while stack:
            asset_id = stack.pop()
            if asset_id in seen:
                continue
            seen.add(asset_id)
            for ref in assets[asset_id].refs:
                holder = owner.get(ref.target)
                if holder is not None and holder != name:
                    depends.add(holder)  # explicit elsewhere: a dependency, not walked into
                elif ref.target in assets:
                    stack.append(ref.target)  # explicit here, or implicit: part of this bundle
        result[name] = sorted(depends)
    return result


def test_bundle_dependencies_reproduce_unity_manifests(result):
    """23 of Unity's 24 bundles get exactly Unity's dependencies; the 24th lacks only font.unity3d."""
    explicit, expected = unity_bundles()
    assert len(explicit) == 24
    computed = bundle_dependencies(result.assets, explicit)
    mismatched = {name for name in explicit if computed[name] != expected[name]}
    assert mismatched == {SKILL_CHOOSE}
    # Unity recorded font.unity3d for UIView_SkillChoose through chinese.asset (m_fontAsset), one of
    # the two >4 MiB files left out of the snapshot: its .meta remains, so the reference resolves
    # to the path, but no asset exists to be packed in font.unity3d.
    assert set(expected[SKILL_CHOOSE]) - set(computed[SKILL_CHOOSE]) == {"font.unity3d"}
    assert set(computed[SKILL_CHOOSE]) <= set(expected[SKILL_CHOOSE])
    assert CHINESE_FONT in explicit["font.unity3d"] and CHINESE_FONT not in result.assets
    skill_choose = result.assets[
        "Assets/HalfSLG/Resources/Prefabs/UIView/UIView_SkillChoose.prefab"
    ]
    assert CHINESE_FONT in {r.target for r in skill_choose.refs}


def test_the_packer_gives_the_same_bundle_dependencies(result):
    """stages.layout.packing with one layout rule per Unity bundle (duplicate policy) agrees with the helper."""
    explicit, expected = unity_bundles()
    layout = [
        {"name": name, "include": [a for a in ids if a in result.assets]}
        for name, ids in explicit.items()
    ]
    cooklist = compute_cooklist(result.assets, {}, {"layout": layout}, external=result.external)
    packing = pack([result.assets[a] for a in cooklist.cooked], layout, maps=[], policy="duplicate")
    computed = {name: list(packing.bundles[name].dependencies) for name in explicit}
    assert computed == bundle_dependencies(result.assets, explicit)
    assert sum(computed[name] == expected[name] for name in explicit) == 23


def test_nested_prefab_references_follow_unitys_baking(result):
    """A parent refs its nested prefab and that prefab's content, never prefabs nested deeper."""
    prefabs = "Assets/HalfSLG/Resources/Prefabs/UIView/"
    package_prefab = result.assets[prefabs + "ViewElement_BattleUnitPackage.prefab"]
    package = {r.target: r.label for r in package_prefab.refs}
    assert package[prefabs + "ViewElement_PackageItem.prefab"] == "m_SourcePrefab"
    # The nested item's font and textures are hoisted: that is how Unity's manifest gets
    # font.unity3d and textures/common_1.unity3d for viewelement_battleunitpackage.
    hoisted = package["Assets/HalfSLG/Font/TMP/fontSLG.asset"]
    assert hoisted.endswith("via " + prefabs + "ViewElement_PackageItem.prefab")
    info = {
        r.target: r.label for r in result.assets[prefabs + "UIView_BattleFieldUnitInfo.prefab"].refs
    }
    assert info[prefabs + "ViewElement_BattleUnitPackage.prefab"] == "m_SourcePrefab"
    assert prefabs + "ViewElement_PackageItem.prefab" not in info


def test_cook_list_from_the_enabled_scenes(result):
    """The two enabled scenes reach 37 assets, one missing shader (with its chain), two built-ins."""
    assert result.roots["scenes"] == [
        "Assets/HalfSLG/Scenes/SceneStart.unity",
        "Assets/HalfSLG/Scenes/SceneBattle.unity",
    ]
    cooklist = compute_cooklist(
        result.assets, {"maps": result.roots["scenes"]}, external=result.external
    )
    assert len(cooklist.cooked) == 37
    assert "Assets/HalfSLG/Scenes/SceneLobby.unity" not in cooklist.cooked  # disabled in the build
    # Shaders were left out of the snapshot as program code; their .meta files remain.
    shader = "Assets/3rd/TextMesh Pro/Resources/Shaders/TMP_SDF.shader"
    assert list(cooklist.missing) == [shader]
    assert cooklist.missing[shader].endswith(
        "chain Assets/HalfSLG/Scenes/SceneBattle.unity > "
        "Assets/HalfSLG/Resources/Prefabs/Effect/Effect_DamageLabel.prefab > "
        "Assets/HalfSLG/Font/TMP/fontSLG_BattleUnitDamageLabel.mat"
    )
    assert sorted(cooklist.external) == [
        "0000000000000000e000000000000000",
        "0000000000000000f000000000000000",
    ]
    assert (
        cooklist.chains["Assets/HalfSLG/Textures/Common_0/hexWhiteFrame.png"][0]
        == "Assets/HalfSLG/Scenes/SceneBattle.unity"
    )


def test_project_counts_orphans_and_external_guids(result):
    """138 content assets; 151 orphan metas (left-out code, shaders, the two big files); 9 outside GUIDs."""
    assert len(result.assets) == 138
    assert not any(a.startswith("Assets/StreamingAssets/") for a in result.assets)
    orphans = [p.file for p in result.problems if p.kind == "orphan_meta"]
    assert len(orphans) == len(set(orphans)) == 151
    assert {p.kind for p in result.problems} == {"orphan_meta"}
    assert {
        CHINESE_FONT + ".meta",
        "Assets/HalfSLG/Font/TTF/simhei.ttf.meta",
        "Assets/HalfSLG/Prefabs.meta",
    } <= set(orphans)
    assert sum(o.endswith(".cs.meta") for o in orphans) == 128
    # Two built-in resource files and seven scripts of packages (TextMesh Pro, UnityEngine.UI).
    assert len(result.external) == 9
    assert {"0000000000000000e000000000000000", "0000000000000000f000000000000000"} <= set(
        result.external
    )
    # No content reference names a GUID that no .meta declares.
    dangling = {
        r.target
        for a in result.assets.values()
        for r in a.refs
        if r.target not in result.assets and r.target not in result.external
    }
    assert all("/" in target for target in dangling)
    assert len(result.roots["resources"]) == 34


def test_scanner_agrees_with_pyyaml_on_every_text_asset(result):
    """On every YAML file of the project the scanner finds PyYAML's exact reference sequence."""
    checked = 0
    for entry in walk_project(str(PROJECT)):
        if entry.path not in result.assets:
            continue
        data = (PROJECT / entry.path).read_bytes()
        if not is_text_serialized(data):
            continue
        scanned = [(r.guid, r.file_id, r.type, r.label) for r in scan_references(data)]
        assert scanned == references_in_documents(load_documents(data)), entry.path
        checked += 1
    assert checked == 88
