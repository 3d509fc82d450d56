"""Stage `pack`: assign every cooked asset to bundles (one unit; the algorithm is `packing`)."""

from __future__ import annotations

import importlib
from functools import partial
from typing import NamedTuple

from orchestrator import (
    UNCHANGED,
    Plan,
    Problem,
    StageChanges,
    StageSpec,
    Unit,
    digest_value,
    record,
)
from stages.algorithms.priority import PRIORITY
from stages.layout.packing import Packing, PackingInfo, pack, source_bundles
from stages.sources import get_source, log_problems
from stages.sources.base import Asset, PackHook

DEFAULT_POLICY = "extract"

SPEC = StageSpec(
    name="pack",
    # 2: bundles and asset → bundles keyed, the rest in `packing`; 3: what no bundle may hold
    version=3,
    inputs=("assets", "source", "cooklist", "cooked"),
    outputs=("bundles", "asset_bundles", "packing"),
    keyed=("bundles", "asset_bundles"),
    config_keys=("bundles",),
    description="bundle layout, shared dependencies, bundle dependency graph",
)


def sharing_policy(bundles: dict, source_name: str) -> str:
    """`bundles.shared_dependencies`, or when the build file names none the source's own policy
    (`source: cocos` shares by priority, as Creator does), else `extract`."""
    given = bundles.get("shared_dependencies")
    if given:
        return given
    return getattr(get_source(source_name), "shared_dependencies", DEFAULT_POLICY)


def update(ctx, inputs: dict, changes: StageChanges) -> Plan | None:
    """Payloads cooked again do not move anything between bundles: only which assets are
    cooked and how they refer to each other does."""
    if (
        any(changes.inputs[name] for name in ("assets", "source", "cooklist"))
        or changes.inputs["cooked"].removed
    ):
        return None
    return Plan(units=[])


@record
class PackOptions(NamedTuple):
    """What the packing follows besides the assets (the build file's `bundles` and `cook`, and
    what the source says); its fields are also the unit's key."""

    layout: list
    policy: str  # bundles.shared_dependencies
    maps: list[str]
    follow_soft: bool
    assigned: dict[str, list[str]] | None  # bundles the project assigns (None: from_meta off)
    not_bundled: dict[str, str]  # assets no bundle may hold → why
    priorities: dict[str, int]


@record
class PackJob(NamedTuple):
    """The one unit's work: the cooked assets in cook-list order, packed by the options, and
    the source's refinement of the priority fill, if any."""

    assets: tuple[Asset, ...]
    options: PackOptions
    hook: PackHook | None


def plan(ctx, inputs: dict) -> Plan:
    """One unit; its key covers the cooked assets' graph and the options it packs by."""
    assets = inputs["assets"]
    made = set(inputs["cooked"])
    cooked_ids = [a for a in inputs["cooklist"].cooked if a in made]
    cooked = tuple(assets[a] for a in cooked_ids)
    cook = ctx.section("cook")
    bundles = ctx.section("bundles")
    source = inputs["source"]
    options = PackOptions(
        layout=bundles.get("layout", []),
        policy=sharing_policy(bundles, ctx.section("source")),
        maps=list(cook.get("maps", [])),
        follow_soft=bool(cook.get("follow_soft_references", True)),
        assigned=(
            source_bundles(source, ctx.section("source")) if bundles.get("from_meta") else None
        ),
        not_bundled=dict(getattr(source, "not_bundled", None) or {}),
        priorities=dict(getattr(source, "bundle_priorities", None) or {}),
    )
    hook = getattr(source, "pack_hook", None) if options.policy == PRIORITY else None
    # Payload digests do not shape the packing, only which assets are cooked and how they refer
    # to each other: a re-cooked asset does not re-pack. The assets are frozen dataclasses, which
    # the key's JSON encoder writes field by field itself (no list per asset and reference).
    key = {"graph": digest_value(["assets", cooked]), "options": options._asdict()}
    if hook is not None:  # what the source's refinement reads comes from the whole project
        key["hook"] = [hook.target, digest_value(hook.data)]
    return Plan(units=[Unit(id="bundles", payload=PackJob(cooked, options, hook), key=key)])


def run(job: PackJob, shared, reader) -> Packing:
    refine = None
    if job.hook is not None:
        module, _, name = job.hook.target.partition(":")
        refine = partial(getattr(importlib.import_module(module), name), data=job.hook.data)
    options = job.options
    return pack(
        job.assets,
        options.layout,
        options.maps,
        options.policy,
        options.follow_soft,
        options.assigned,
        options.priorities,
        refine,
        options.not_bundled,
    )


def finish(ctx, inputs: dict, results) -> dict:
    if results.changed is not None and not results.changed:
        return {"bundles": UNCHANGED, "asset_bundles": UNCHANGED, "packing": UNCHANGED}
    packing: Packing = results["bundles"]
    if getattr(ctx, "log", None) is not None:
        log_problems(ctx.log, "pack.problem", packing.problems)
    return {
        "bundles": packing.bundles,
        "asset_bundles": packing.asset_bundles,
        "packing": PackingInfo(list(packing.cycles), packing.policy, list(packing.problems)),
    }


def problems(build, outputs) -> list[Problem]:
    """What packing noticed (assets no bundle may hold, `from_meta` assigning nothing) and
    bundles that depend on each other in a cycle (a loader cannot order them), every run."""
    packing = outputs["packing"]
    return list(packing.problems) + [
        Problem(
            kind="bundle_cycle",
            file="",
            message=f"{len(cycle)} bundles depend on each other in a cycle: {', '.join(cycle)}",
        )
        for cycle in packing.cycles
    ]
