"""The Cocos source on a real Creator 3.8.4 project (../shared/realdata/cocos-room-of-death), built
through the whole pipeline and checked bundle by bundle against the `config.json` Creator wrote."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from orchestrator.shell.cli import main
from stages.sources.cocos import collect_cocos
from stages.sources.cocos.uuids import compress_uuid, decompress_uuid, is_pack_id

pytestmark = pytest.mark.shared

REALDATA = Path(__file__).resolve().parents[2] / "shared" / "realdata"
PROJECT = REALDATA / "cocos-room-of-death"
ENGINE = REALDATA / "cocos-engine-3.8.5"
CONFIGS = PROJECT / "build" / "web-mobile" / "assets"


def creator_bundle(name: str) -> dict:
    """A bundle's `config.json` with its uuids decompressed: ids (packs left out), redirects,
    deps, paths (id → load path) and scenes (URL → id)."""
    config = json.loads((CONFIGS / name / "config.json").read_text(encoding="utf-8"))
    uuids = [decompress_uuid(u) for u in config["uuids"]]
    pairs = config["redirect"]
    return {
        "ids": {u for u in uuids if not is_pack_id(u)},
        "redirects": {uuids[i]: config["deps"][int(d)] for i, d in zip(pairs[::2], pairs[1::2])},
        "deps": sorted(config["deps"]),
        "paths": {uuids[int(i)]: entry[0] for i, entry in config["paths"].items()},
        "scenes": {url: uuids[i] for url, i in config["scenes"].items()},
    }


@pytest.fixture(scope="module")
def manifest(tmp_path_factory) -> dict:
    """`orchestrate run` on a copy of the project, engine and scenes as Creator built it."""
    if not PROJECT.is_dir() or not ENGINE.is_dir():
        pytest.skip(f"the real Cocos project is absent ({PROJECT}): ../shared is not mounted")
    work = tmp_path_factory.mktemp("room-of-death")
    shutil.copytree(PROJECT, work / "project")
    scenes = sorted(creator_bundle("main")["scenes"])
    build = work / "build.yaml"
    build.write_text(
        yaml.safe_dump(
            {
                "project": "project",
                "source": "cocos",
                "output": "out",
                "cache": "cache",
                "executor": {"kind": "local"},
                "cocos": {"engine": str(ENGINE), "scenes": scenes},
                "bundles": {"from_meta": True, "shared_dependencies": "priority"},
            }
        ),
        encoding="utf-8",
    )
    with pytest.raises(SystemExit) as stop:
        main(["run", str(build)])
    assert stop.value.code == 0
    return json.loads((work / "out" / "manifest.json").read_text(encoding="utf-8"))


def test_decoding_creators_compressed_uuids():
    """Creator's example decodes, and compressing inverts decoding (sub-ids kept)."""
    assert decompress_uuid("425o80X19KipOK7J1f5hsN") == "42e68f34-5f5f-4a8a-938a-ec9d5fe61b0d"
    assert (
        compress_uuid("42e68f34-5f5f-4a8a-938a-ec9d5fe61b0d@f9941")
        == "425o80X19KipOK7J1f5hsN@f9941"
    )
    assert is_pack_id("02c9bb148") and not is_pack_id("425o80X19KipOK7J1f5hsN")


@pytest.mark.parametrize("name", ["main", "resources"])
def test_every_bundle_but_internal_equals_creators_config(manifest, name):
    """uuids (assets and redirects), redirects, deps and paths equal Creator's config.json."""
    expected = creator_bundle(name)
    bundle = manifest["bundles"][name]
    assert set(bundle["assets"]) | set(bundle["redirects"]) == expected["ids"]
    assert not set(bundle["assets"]) & set(bundle["redirects"])
    assert bundle["redirects"] == expected["redirects"]
    assert bundle["dependencies"] == expected["deps"]
    assert bundle["paths"] == expected["paths"]
    assert bundle["scenes"] == expected["scenes"]


def test_the_build_makes_exactly_creators_bundles(manifest):
    """main (7) and resources (8); no internal (cocos.internal is empty), no default bundle."""
    assert sorted(manifest["bundles"]) == ["main", "resources"]
    assert manifest["bundles"]["main"]["priority"] == 7
    assert manifest["bundles"]["resources"]["priority"] == 8
    assert manifest["build"]["shared_dependencies"] == "priority"
    # The 13 redirects of main: a scene uses sprite frames and a clip that resources owns.
    assert len(manifest["bundles"]["main"]["redirects"]) == 13
    assert set(manifest["bundles"]["main"]["redirects"].values()) == {"resources"}


def test_project_counts_and_builtins():
    """99 images, 98 plists, 6 clips, 3 scenes; built-ins come from the engine as db://internal."""
    if not PROJECT.is_dir() or not ENGINE.is_dir():
        pytest.skip(f"the real Cocos project is absent ({PROJECT})")
    source = collect_cocos(str(PROJECT), str(ENGINE))
    types = [
        a.type for a in source.assets.values() if a.virtual_paths[0].startswith("db://assets/")
    ]
    assert types.count("cc.ImageAsset") == 99
    assert types.count("cc.SpriteAtlas") == 98
    assert types.count("cc.AudioClip") == 6
    assert types.count("cc.SceneAsset") == 3
    assert not any(a.type == "cc.Asset" and a.name.endswith(".ts") for a in source.assets.values())
    rpp = source.assets["fd8ec536-a354-4a17-9c74-4f3883c378c8"]
    assert rpp.virtual_paths == ("db://internal/default_renderpipeline/builtin-forward.rpp",)
    assert source.roots["settings"] == [
        "fd8ec536-a354-4a17-9c74-4f3883c378c8",
        "ba21476f-2866-4f81-9c4d-6e359316e448",
    ]
    # The project's scripts were left out of the snapshot, and git keeps no empty folders; their
    # metas remain: reported, and no content is lost.
    orphans = [
        p.file for p in source.problems if p.kind == "orphan_meta" and p.file.startswith("assets/")
    ]
    scripts = [f for f in orphans if f.endswith(".ts.meta")]
    assert scripts and all(
        f in scripts or (PROJECT / f[: -len(".meta")]).suffix == "" for f in orphans
    )
    assert not [p for p in source.problems if p.kind == "unresolved_ids"]


def test_without_the_engine_builtins_are_unresolved_and_counted():
    """No cocos.engine: the scenes' built-in sprites are unresolved, reported per scene file."""
    if not PROJECT.is_dir():
        pytest.skip(f"the real Cocos project is absent ({PROJECT})")
    source = collect_cocos(str(PROJECT))
    unresolved = {p.file: p.message for p in source.problems if p.kind == "unresolved_ids"}
    assert set(unresolved) == {
        "assets/scenes/game.scene",
        "assets/scenes/loading.scene",
        "assets/scenes/start.scene",
    }
    assert unresolved["assets/scenes/loading.scene"].startswith("4 referenced id(s)")
    assert source.index.unresolved["assets/scenes/start.scene"] == (
        "b23391b6-52eb-46a6-8da1-6244d9d315fb",
        "7d8f9b89-4fd1-4c9f-a3ab-38ec7cded7ca@f9941",
    )
    assert {p.kind for p in source.problems} >= {"unresolved_setting"}
