"""Stage `dependency`: the cook list — roots from the build file, closure, and its reports.

The closure is fast (linear in assets and references), so it is one unit keyed on the
fingerprint of the assets (the digests of their entries); it runs again only when an asset
entry, the source's roots or the build file's cook section change. `publish` writes
`reports/cooklist.json`. With `cook.fail_on_missing` and something missing, the cook list's
`failure` is set so the CLI exits 1 after publishing.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import orjson

from orchestrator import Plan, StageSpec, Unit, digest_value, record
from stages.cooklist.closure import compute_cooklist
from stages.layout.packing import source_bundles
from stages.sources.base import Asset

SPEC = StageSpec(
    name="dependency",
    # 2: the cook list carries its findings by parts (CookList.findings); 3: assets keyed
    version=3,
    inputs=("assets", "source"),
    outputs=("cooklist", "cook_summary"),
    config_keys=("cook", "bundles"),
    description="cook roots and the dependency closure",
)

REPORT = "reports/cooklist.json"


@record
class ClosureJob(NamedTuple):
    """The one unit's work: the cook list for the build file's `cook` section (its cookers
    aside) and the bundles that name roots (`layout`, and `assigned` by the project's files)."""

    cook: dict
    bundles: dict  # shaped as the build file's `bundles` section: layout, assigned


@record
class CookSummary(NamedTuple):
    """What the end of a run reports and gates on (the `cook_summary` value): small enough to
    load on a no-op rerun, where the whole cook list is not."""

    cooked: int  # assets in the cook list
    missing: dict[str, str]  # referenced id → reason
    ambiguous: int  # names that denote more than one asset
    cycles: int  # dependency cycles among cooked assets


class ClosureShared(NamedTuple):
    """What the unit reads of the project: every asset by id, and the source's own facts."""

    assets: dict[str, Asset]
    external: tuple[str, ...]  # ids the source knows are outside the project
    source_roots: dict[str, list[str]]  # roots the source names, by kind


def plan(ctx, inputs: dict) -> Plan:
    source, assets = inputs["source"], inputs["assets"]
    job = _closure_job(ctx, source)
    unit = Unit(
        id="closure",
        payload=job,
        key={
            "assets": assets.fingerprint(),
            "external": sorted(source.external),
            "source_roots": source.roots,
            # Assets the project's files assign to bundles are roots: a `.meta` naming a bundle
            # changes the cook list without changing any asset entry.
            "assigned": digest_value(job.bundles["assigned"]),
        },
        cost=max(1, len(assets)),
    )
    shared = ClosureShared(assets.as_dict(), tuple(source.external), source.roots)
    return Plan(units=[unit], shared=shared)


def _closure_job(ctx, source) -> ClosureJob:
    cook = {k: v for k, v in ctx.section("cook").items() if k != "cookers"}
    bundles = ctx.section("bundles")
    # Assets the project assigns to bundles are roots, as layout-named ones are.
    assigned = source_bundles(source, ctx.section("source")) if bundles.get("from_meta") else {}
    return ClosureJob(cook, {"layout": bundles.get("layout") or [], "assigned": assigned})


def run(job: ClosureJob, shared: ClosureShared, reader):
    return compute_cooklist(
        shared.assets, job.cook, job.bundles, shared.external, shared.source_roots
    )


def finish(ctx, inputs: dict, results) -> dict:
    cooklist = results["closure"]
    if cooklist.missing:
        ctx.log.warning(
            "dependency.missing", count=len(cooklist.missing), fail=bool(cooklist.failure)
        )
    return {"cooklist": cooklist, "cook_summary": summarize(cooklist)}


def summarize(cooklist) -> CookSummary:
    return CookSummary(
        len(cooklist.cooked), dict(cooklist.missing), len(cooklist.ambiguous), len(cooklist.cycles)
    )


def publish(ctx, outputs: dict) -> None:
    document = outputs["cooklist"].to_json()
    try:  # the bytes of json.dumps(indent=2, ensure_ascii=False): str keys, no floats
        data = orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n"
    except orjson.JSONEncodeError:
        data = (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    ctx.publish_bytes(REPORT, data)


def verdict(build, outputs) -> list[str]:
    """Missing references fail the build when `cook.fail_on_missing` says so."""
    missing = outputs["cook_summary"].missing
    if build.section("cook")["fail_on_missing"] and missing:
        return [f"{len(missing)} missing reference(s) and cook.fail_on_missing is true"]
    return []


def summary(build, outputs) -> list[str]:
    cooked: CookSummary = outputs["cook_summary"]
    return [
        f"cook list: {cooked.cooked} assets, {len(cooked.missing)} missing, "
        f"{cooked.ambiguous} ambiguous, {cooked.cycles} cycles"
    ]
