"""Rules on Cocos files: the `cocos_json` path language, its registration beside `unity_yaml`,
and configs/rules/cocos-common.yaml, each rule tried on the real project and on hand-made files."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from cocos_projects import CocosProject, frame

from stages.rules import registry
from stages.rules.engine import validate_project
from stages.sources.cocos import collect_cocos
from stages.sources.cocos.paths import LANGUAGE, CocosParseError, parse_cocos_json
from stages.sources.unity.paths import compile_unity_path, evaluate

REPO = Path(__file__).resolve().parents[1]
LIBRARY = REPO / "configs" / "rules" / "cocos-common.yaml"
REALDATA = Path(__file__).resolve().parents[2] / "shared" / "realdata"
PROJECT = REALDATA / "cocos-room-of-death"
ENGINE = REALDATA / "cocos-engine-3.8.5"


def query(expr: str, text: str) -> tuple[list, list]:
    return evaluate(compile_unity_path(expr), parse_cocos_json(text.encode()))


def failures(document: dict) -> Counter:
    return Counter(f["rule"] for f in document["failures"])


def test_dotted_paths_read_metas_and_serialized_assets_with_lines():
    """Keys from the root, `**` at any depth, filters on sub-metas; a JSON array is walked through."""
    meta = json.dumps(
        {
            "uuid": "u",
            "importer": "image",
            "subMetas": {
                "f9941": {"importer": "sprite-frame", "userData": {"width": 40, "packable": True}}
            },
        },
        indent=2,
    )
    assert query("importer", meta) == (["image"], [3])
    assert query("**[importer==sprite-frame].userData.width", meta)[0] == ["40"]
    assert query("**[importer==sprite-frame][userData.packable==true].userData.width", meta)[0] == [
        "40"
    ]
    scene = json.dumps(
        [
            {"__type__": "cc.SceneAsset"},
            {"__type__": "cc.Sprite", "_spriteFrame": {"__uuid__": "a@f9941"}},
            {"__type__": "cc.Label", "_font": {"__uuid__": "b"}},
        ],
        indent=2,
    )
    assert query("**.__uuid__", scene)[0] == ["a@f9941", "b"]
    assert query("**[__type__==cc.Sprite]._spriteFrame.__uuid__", scene)[0] == ["a@f9941"]


def test_invalid_json_names_the_line():
    """Malformed JSON fails with its line (YAML would have accepted a trailing comma)."""
    with pytest.raises(CocosParseError) as error:
        parse_cocos_json(b'{\n  "a": 1,\n}')
    assert error.value.line == 2


def test_json_files_take_cocos_json_and_yaml_files_keep_unity_yaml():
    """`.meta` and `.prefab` are claimed by both languages: the content decides."""
    assert registry.path_languages()["cocos_json"] is LANGUAGE
    assert registry.language_for("assets/a.png.meta", b'{"uuid": "x"}') is LANGUAGE
    assert registry.language_for("assets/a.prefab", b"[{}]") is LANGUAGE
    assert (
        registry.language_for("Assets/a.png.meta", b"fileFormatVersion: 2\n").name == "unity_yaml"
    )
    assert registry.language_for("Assets/a.prefab").name == "unity_yaml"
    assert registry.language_for("assets/a.scene", b"[]") is LANGUAGE


@pytest.fixture(scope="module")
def real_document() -> dict:
    if not PROJECT.is_dir() or not ENGINE.is_dir():
        pytest.skip(f"the real Cocos project is absent ({PROJECT}): ../shared is not mounted")
    index = collect_cocos(str(PROJECT), str(ENGINE)).index
    return validate_project(str(PROJECT), [LIBRARY], index)


def test_cocos_common_on_the_real_project(real_document):
    """Every rule runs on Room of Death; with the engine only the one packable frame outside an
    auto atlas (bg2.png, info) is reported."""
    assert real_document["rules"] == 9 and not real_document["rule_errors"]
    assert real_document["sources_checked"] > 1000
    assert failures(real_document) == {"packable-frame-outside-auto-atlas": 1}
    (failure,) = real_document["failures"]
    assert failure["source"] == "assets/resources/texture/level/bg2.png.meta"
    assert failure["errors"] == ["72be4324-ac82-4fa1-a442-600ff4be8423@f9941"]


def test_without_the_engine_built_in_references_fail(real_document):
    """No engine: the scenes' built-in sprites and font name nothing, with their lines."""
    index = collect_cocos(str(PROJECT)).index
    document = validate_project(str(PROJECT), [LIBRARY], index)
    assert failures(document)["references-resolve"] == 3
    start = next(f for f in document["failures"] if f["source"] == "assets/scenes/start.scene")
    assert start["errors"][0] == "b23391b6-52eb-46a6-8da1-6244d9d315fb" and start["lines"][0] == 490


def test_each_rule_catches_its_defect(tmp_path):
    """Hand-made defects: a huge image, a large frame, a stray packable frame, a dangling id,
    a wav clip and a nested bundle folder each fail their rule."""
    project = CocosProject(tmp_path)
    project.image("assets/huge.png", (2100, 16))
    project.folder("assets/ui")
    project.pac("assets/ui/auto.pac")
    project.image("assets/ui/in-atlas.png", (1030, 8))
    project.scene("assets/s.scene", ["deadbeef-0000-4000-8000-000000000000"])
    project.raw("assets/music.wav", "audio-clip", [".json", ".wav"])
    project.folder("assets/outer", bundle="outer")
    project.folder("assets/outer/inner", bundle="inner")
    index = collect_cocos(str(tmp_path)).index
    document = validate_project(str(tmp_path), [LIBRARY], index)
    assert not document["rule_errors"]
    found = {(f["rule"], f["source"]) for f in document["failures"]}
    assert found == {
        ("texture-max-width", "assets/huge.png.meta"),
        ("sprite-frame-fits-an-atlas-page", "assets/huge.png.meta"),
        ("sprite-frame-fits-an-atlas-page", "assets/ui/in-atlas.png.meta"),
        ("packable-frame-outside-auto-atlas", "assets/huge.png.meta"),
        ("references-resolve", "assets/s.scene"),
        ("audio-format", "assets/music.wav.meta"),
        ("bundle-folders-do-not-nest", "assets/outer.meta"),
        ("bundle-folders-do-not-nest", "assets/outer/inner.meta"),
    }
    dangling = next(f for f in document["failures"] if f["rule"] == "references-resolve")
    assert dangling["errors"] == ["deadbeef-0000-4000-8000-000000000000"]


def test_compressed_ids_resolve(tmp_path):
    """Creator's compressed uuids (release builds) are understood by the resolves check."""
    from stages.sources.cocos.uuids import compress_uuid

    project = CocosProject(tmp_path)
    hero = project.image("assets/hero.png")
    index = collect_cocos(str(tmp_path)).index
    assert index.resolves(compress_uuid(frame(hero)))
    assert not index.resolves(compress_uuid("deadbeef-0000-4000-8000-000000000000"))
