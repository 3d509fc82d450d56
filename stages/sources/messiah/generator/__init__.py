"""Generate Messiah-style projects (spec/asset-project.md) for the demo, tests and benchmarks.

`generate_project(dest, assets, seed)` writes `<dest>/project/` (repositories, worlds, levels),
`<dest>/build.yaml`, `<dest>/rules.yaml` (the starter rule library) and `<dest>/generated.json`
(what was generated and planted). The output is a pure function of (assets, seed): every random
choice comes from one `random.Random(seed)`, drawn in a fixed order while the project is planned
in memory; writing never draws. Payloads are slices of one random buffer, so 100,000 resources
write in seconds and stay well under 2 GB.

A small, known set of defects is planted (see `PLANT_COUNTS` and `DETECTED_BY`); everything else
is clean against the starter library, so every rule failure on a generated project points at a
planted defect.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .catalog import MIN_ASSETS, REPOSITORIES, STARTER_RULES
from .defects import DefectPlanter
from .files import ProjectWriter, build_yaml
from .model import ProjectPlan
from .planner import Planner

__all__ = ["GeneratedProject", "generate_project", "starter_rules_bytes"]


@dataclass(frozen=True)
class GeneratedProject:
    """What `generate_project` wrote: paths, counts, and the planted defects by kind."""

    root: Path  # the destination folder
    project: Path  # <root>/project, the `project:` of the build file
    build_file: Path
    rules_file: Path
    counts: dict[str, int]
    types: dict[str, int]
    planted: dict[str, list[str]]


def generate_project(
    dest: str | Path, assets: int, seed: int, *, overwrite: bool = True
) -> GeneratedProject:
    """Write a project of `assets` resources (distinct GUIDs) under `dest`, deterministically."""
    if assets < MIN_ASSETS:
        raise ValueError(f"a generated project needs at least {MIN_ASSETS} assets, got {assets}")
    root = Path(dest)
    prepare_destination(root, overwrite)
    planner = Planner(assets, seed)
    planner.plan_clean()
    DefectPlanter(planner).plant_all()
    plan = planner.result()
    writer = ProjectWriter(root / "project", plan)
    writer.write()
    rules_file = root / "rules.yaml"
    rules_file.write_bytes(starter_rules_bytes())
    build_file = root / "build.yaml"
    build_file.write_text(build_yaml(plan.worlds), encoding="utf-8")
    counts = project_counts(plan, writer)
    (root / "generated.json").write_text(
        json.dumps(
            {
                "assets": assets,
                "seed": seed,
                "counts": counts,
                "types": plan.type_counts(),
                "planted": plan.planted,
            },
            indent=1,
            ensure_ascii=False,
            sort_keys=True,
        )
        + "\n",
        encoding="utf-8",
    )
    return GeneratedProject(
        root=root,
        project=root / "project",
        build_file=build_file,
        rules_file=rules_file,
        counts=counts,
        types=plan.type_counts(),
        planted={k: list(v) for k, v in plan.planted.items()},
    )


def starter_rules_bytes() -> bytes:
    """The starter rule library (configs/rules/messiah-common.yaml), as shipped in the wheel."""
    return resources.files("configs").joinpath(*STARTER_RULES).read_bytes()


def prepare_destination(root: Path, overwrite: bool) -> None:
    # Only a previous generation (marked by generated.json) is ever deleted: never user content.
    project = root / "project"
    if project.exists() and any(project.iterdir()):
        if not (overwrite and (root / "generated.json").is_file()):
            raise FileExistsError(
                f"{project} exists and is not a generated project; choose an empty destination"
            )
        shutil.rmtree(project)
    root.mkdir(parents=True, exist_ok=True)


def project_counts(plan: ProjectPlan, writer: ProjectWriter) -> dict[str, int]:
    return {
        "resources": len({r.guid for r in plan.resources}),
        "items": len(plan.resources),
        "resource_folders": sum(1 for r in plan.resources if r.has_folder),
        "repositories": len(REPOSITORIES),
        "packages": len({(r.repo, r.package) for r in plan.resources}),
        "worlds": len(plan.worlds),
        "levels": len(plan.levels),
        "levels_used": len({p for levels in plan.worlds.values() for p in levels}),
        "entities": sum(len(level.entities) for level in plan.levels.values()),
        "files": writer.files,
        "bytes": writer.bytes,
    }
