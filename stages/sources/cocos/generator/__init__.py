"""Generate Cocos Creator 3.x projects of any size (tests, demo, benchmarks).

`generate_cocos_project(dest, assets, seed)` writes `<dest>/project/` (a Creator project:
`package.json`, `settings/`, `assets/` with metas), `<dest>/build.yaml`, `<dest>/rules.yaml` (the
starter library configs/rules/cocos-common.yaml) and `<dest>/generated.json`. `assets` counts top
assets (files with a meta); images add two sub-assets each, sprite sheets one per frame.

The project has bundle folders of several priorities (`resources` 8, `ui` 6, `levels` and `dlc`
3) beside content outside any bundle (`shared`, `scenes`); prefabs nesting earlier prefabs
(from any area, so priorities decide who owns what), materials using textures, TexturePacker
sheets (`sprite-atlas`) with their frames, auto atlases (`.pac`) over folders of packable
images, audio clips and scenes. A pure function of (assets, seed): one `random.Random(seed)`
drawn in a fixed order while planning; writing draws nothing. Two defects are planted, each
found by one rule of the starter library: a prefab naming a deleted asset, and a `.wav` clip.

`planner.py` decides the items (`model.Item`), `files.py` writes them.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from random import Random

from .files import write_project
from .planner import AREAS, KINDS, plan_project

MIN_ASSETS = 100


@dataclass(frozen=True)
class GeneratedCocosProject:
    root: Path
    project: Path
    build_file: Path
    rules_file: Path
    counts: dict[str, int]
    planted: dict[str, list[str]]


def generate_cocos_project(dest: str | Path, assets: int, seed: int) -> GeneratedCocosProject:
    """Write the project, its build file, rule library and `generated.json` under `dest`."""
    if assets < MIN_ASSETS:
        raise ValueError(f"a generated project needs at least {MIN_ASSETS} assets, got {assets}")
    root = Path(dest)
    if root.exists():
        shutil.rmtree(root)
    items, folders, planted = plan_project(assets, Random(seed))
    project = root / "project"
    write_project(project, items, folders)
    rules = root / "rules.yaml"
    rules.write_bytes(
        resources.files("configs").joinpath("rules", "cocos-common.yaml").read_bytes()
    )
    build = root / "build.yaml"
    build.write_text(BUILD_YAML, encoding="utf-8")
    counts = {
        "assets": len(items),
        "folders": len(folders),
        **{kind: sum(i.kind == kind for i in items) for kind, _ in KINDS},
        "auto_atlases": sum(i.kind == "pac" for i in items),
        "bundles": sum(1 for a in AREAS if a[1]),
    }
    (root / "generated.json").write_text(
        json.dumps(
            {
                "assets": assets,
                "seed": seed,
                "source": "cocos",
                "counts": counts,
                "planted": planted,
            },
            indent=1,
            sort_keys=True,
        )
        + "\n",
        encoding="utf-8",
    )
    return GeneratedCocosProject(root, project, build, rules, counts, planted)


BUILD_YAML = """# A generated Cocos Creator project (orchestrate generate --engine cocos)
project: project
source: cocos
platform: web-mobile
rules:
  files: [rules.yaml]
bundles:
  from_meta: true
  shared_dependencies: priority
output: out
cache: cache
"""
