"""The Cocos project generator: deterministic, the structure the benchmarks rely on, and a
project the pipeline builds with only the planted defects reported."""

from __future__ import annotations

import filecmp
import json

import pytest

from orchestrator.shell.cli import main
from stages.sources.cocos import collect_cocos
from stages.sources.cocos.generator import generate_cocos_project


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return generate_cocos_project(tmp_path_factory.mktemp("gen") / "cocos-600", 600, 4)


def test_same_seed_same_bytes(generated, tmp_path):
    """Generating again with the same size and seed writes the same files."""
    again = generate_cocos_project(tmp_path / "again", 600, 4)
    comparison = filecmp.dircmp(generated.project, again.project)
    stack = [comparison]
    while stack:
        current = stack.pop()
        assert not current.left_only and not current.right_only and not current.diff_files
        stack.extend(current.subdirs.values())
    other = generate_cocos_project(tmp_path / "other", 600, 5)
    assert (other.root / "generated.json").read_text() != (
        generated.root / "generated.json"
    ).read_text()


def test_structure_bundles_priorities_nesting_and_atlases(generated):
    """Four bundle folders of three priorities, prefabs nesting prefabs, sheets and auto atlases."""
    source = collect_cocos(str(generated.project))
    assert source.bundle_priorities == {"main": 7, "resources": 8, "ui": 6, "levels": 3, "dlc": 3}
    pages = {p.image for atlas in source.pack_hook.data.atlases for p in atlas.pages}
    top = [a for a in source.assets.values() if "@" not in a.id and a.id not in pages]
    assert len(top) == 600 + generated.counts["sheet"]  # each sheet brings its image
    prefabs = {a.id for a in source.assets.values() if a.type == "cc.Prefab"}
    assert any(r.target in prefabs for p in prefabs for r in source.assets[p].refs)
    assert any(a.type == "cc.SpriteAtlas" and a.refs for a in source.assets.values())
    assert source.pack_hook.data.atlases and all(a.pages for a in source.pack_hook.data.atlases)
    kinds = {p.kind for p in source.problems}
    assert kinds == {"unresolved_ids"}  # the planted dangling reference, nothing else


def test_the_pipeline_builds_it_and_finds_the_planted_defects(generated, capsys):
    """A full build: priority redirects appear, and the rules find exactly the planted defects."""
    with pytest.raises(SystemExit) as stop:
        main(["run", str(generated.build_file), "--executor", "local"])
    assert stop.value.code == 1  # the planted dangling reference is an error
    out = generated.root / "out"
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert {"main", "resources", "ui", "levels", "dlc"} <= set(manifest["bundles"])
    assert any(b["redirects"] for b in manifest["bundles"].values())
    report = json.loads((out / "reports" / "validate.json").read_text(encoding="utf-8"))
    found = {(f["rule"], f["source"]) for f in report["failures"]}
    planted = {(rule, path) for rule, paths in generated.planted.items() for path in paths}
    assert found == planted
