"""The `pack` figure: the packing algorithm on a generated project's cooked assets, with a layout
that lists N asset paths explicitly, as Unity Addressables groups do.

The project is collected once in this process (the Messiah reader, with the build file's
`collect` section) and its cook list computed as the `dependency` stage does. A layout of N paths
picks N cooked assets spread evenly over the cook list sorted by path, names each by its first
layout path (`packing.asset_paths`: a resource's virtual path, a map's own path; glob
metacharacters escaped, so every pattern is a literal path) and deals them into rules of
`GROUP_SIZE` paths, one bundle each, as a project that lists its assets grows its groups. The
layout replaces the build file's, so the cook list is computed again with it (what a build with
that layout cooks), then `pack` runs on it in this process.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

from common import BenchError, Project

GROUP_SIZE = 250  # paths per layout rule (one Addressables group, one bundle)


@dataclass
class PackInputs:
    """What `pack` needs besides the layout, and what the cook list is computed from."""

    assets: dict[str, Any]  # asset id → Asset, the whole project
    external: tuple[str, ...]
    source_roots: dict[str, list[str]]
    cook: dict  # the build file's cook section (without `cookers`, as `dependency` reads it)
    cooked: list[Any]  # the cook list's assets under the build file's own layout, in its order
    policy: str
    collect_s: float

    @property
    def maps(self) -> list[str]:
        return list(self.cook.get("maps", []))

    @property
    def follow_soft(self) -> bool:
        return bool(self.cook.get("follow_soft_references", True))


@dataclass
class ExplicitLayout:
    rules: list[dict]  # bundles.layout: one rule of `include` paths per group
    paths: int  # literal paths listed
    asked: int  # paths wanted (more than the project has: all of its cooked assets)


def cook_list(inputs: PackInputs, layout: list[dict]) -> list[str]:
    """The cooked ids for `layout` (layout-named assets are roots, as in a build)."""
    from stages.cooklist.closure import compute_cooklist

    bundles = {"layout": layout, "assigned": {}}
    return compute_cooklist(
        inputs.assets, inputs.cook, bundles, inputs.external, inputs.source_roots
    ).cooked


def load_pack_inputs(project: Project) -> PackInputs:
    """Collect the project in this process and compute its cook list."""
    from orchestrator.core.config import load_build
    from stages.layout.options import sharing_policy
    from stages.sources.messiah.reader import collect_project

    build = load_build(project.dir / "build.yaml")
    started = time.perf_counter()
    source = collect_project(str(project.root), build.section("collect"))
    collect_s = time.perf_counter() - started
    cook = {k: v for k, v in build.section("cook").items() if k != "cookers"}
    bundles = build.section("bundles")
    inputs = PackInputs(
        assets=source.assets,
        external=tuple(source.external),
        source_roots=dict(source.roots),
        cook=cook,
        cooked=[],
        policy=sharing_policy(bundles, build.section("source")),
        collect_s=collect_s,
    )
    ids = cook_list(inputs, bundles.get("layout") or [])
    inputs.cooked = [source.assets[a] for a in ids]
    return inputs


def explicit_layout(cooked: list[Any], count: int, group_size: int = GROUP_SIZE) -> ExplicitLayout:
    """`count` cooked assets, spread evenly over them sorted by path, listed by literal path in
    rules of `group_size` paths (all of them when there are fewer)."""
    from stages.algorithms.globs import escape_glob
    from stages.layout.packing import asset_paths

    by_path = sorted((asset_paths(asset)[0], asset.id) for asset in cooked)
    if count >= len(by_path):
        chosen = [path for path, _ in by_path]
    else:
        chosen = [by_path[i * len(by_path) // count][0] for i in range(count)]
    rules = [
        {
            "name": f"group{number:04d}",
            "include": [escape_glob(path) for path in chosen[start : start + group_size]],
        }
        for number, start in enumerate(range(0, len(chosen), group_size))
    ]
    return ExplicitLayout(rules, len(chosen), count)


def time_pack(inputs: PackInputs, layout: ExplicitLayout, repeat: int) -> dict:
    """Median seconds of `pack` with `layout` over the assets a build with it cooks."""
    from stages.layout.packing import pack

    cooked = [inputs.assets[a] for a in cook_list(inputs, layout.rules)]
    values, packing = [], None
    for _ in range(max(1, repeat)):
        started = time.perf_counter()
        packing = pack(cooked, layout.rules, inputs.maps, inputs.policy, inputs.follow_soft)
        values.append(time.perf_counter() - started)
    named = {rule["name"] for rule in layout.rules}
    explicit = sum(len(b.explicit) for b in packing.bundles.values() if b.name in named)
    if explicit != layout.paths:
        raise BenchError(
            f"a layout of {layout.paths} literal paths named {explicit} assets: the paths do "
            "not pick one cooked asset each"
        )
    return {
        "median": statistics.median(values),
        "values": values,
        "paths": layout.paths,
        "asked": layout.asked,
        "rules": len(layout.rules),
        "group_size": max(len(rule["include"]) for rule in layout.rules),
        "cooked": len(cooked),
        "bundles": len(packing.bundles),
        "policy": inputs.policy,
    }
