"""Stage `pack`: assign every cooked asset to bundles (one unit; the algorithm is `packing`)."""

from __future__ import annotations

from orchestrator.hashing import digest_value
from orchestrator.typing import Plan, StageSpec, Unit
from stages.layout.packing import Packing, pack, source_bundles

SPEC = StageSpec(
    name="pack",
    version=1,
    inputs=("source", "cooklist", "cooked"),
    outputs=("bundles",),
    config_keys=("bundles",),
    description="bundle layout, shared dependencies, bundle dependency graph",
)


def plan(ctx, inputs: dict) -> Plan:
    """One unit; its key covers the cooked assets' graph and the options it packs by."""
    assets = inputs["source"].assets
    cooked_ids = [a for a in inputs["cooklist"].cooked if a in inputs["cooked"]]
    cooked = tuple(assets[a] for a in cooked_ids)
    cook = ctx.section("cook")
    bundles = ctx.section("bundles")
    options = {
        "layout": bundles.get("layout", []),
        "policy": bundles.get("shared_dependencies", "extract"),
        "maps": list(cook.get("maps", [])),
        "follow_soft": bool(cook.get("follow_soft_references", True)),
        "assigned": (
            source_bundles(inputs["source"], ctx.section("source"))
            if bundles.get("from_meta")
            else {}
        ),
    }
    # Payload digests do not shape the packing, only which assets are cooked and how they refer
    # to each other: a re-cooked asset does not re-pack. The assets are frozen dataclasses, which
    # the key's JSON encoder writes field by field itself (no list per asset and reference).
    key = {"graph": digest_value(["assets", cooked]), "options": options}
    return Plan(units=[Unit(id="bundles", payload=(cooked, options), key=key)])


def run(payload, shared, reader) -> Packing:
    cooked, options = payload
    return pack(
        cooked,
        options["layout"],
        options["maps"],
        options["policy"],
        options["follow_soft"],
        options["assigned"],
    )


def finish(ctx, inputs: dict, results) -> dict:
    packing: Packing = results["bundles"]
    if packing.cycles and getattr(ctx, "log", None) is not None:
        for cycle in packing.cycles:
            ctx.log.warning("pack.bundle_cycle", bundles=list(cycle))
    return {"bundles": packing}
