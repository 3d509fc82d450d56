"""Stage `dependency`: the cook list — roots from the build file, closure, and its reports.

The closure is fast (linear in assets and references), so it is one unit keyed on the
digest of what the cook list sees of each asset (stages/cooklist/patching.py); it runs again
only when that, the source's roots or the build file's cook section change. `update` proves an
edit of the assets leaves it as it was from the changed entries alone (a renamed Item), and
then runs nothing; an asset added or removed where only an include rule of the layout names it
patches the last cook list (stages/cooklist/delta.py), the unit keeping its key, and reads no
other asset when the removed one named nothing and nothing named it (ClosureState). `publish` writes
`reports/cooklist.json`. With `cook.fail_on_missing` and something missing, the cook list's
`failure` is set so the CLI exits 1 after publishing.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import orjson

from orchestrator import UNCHANGED, Plan, StageChanges, StageSpec, Unit, digest_value, record
from stages.cooklist.closure import compute_cooklist
from stages.cooklist.delta import patched_cooklist
from stages.cooklist.patching import (
    ClosureState,
    CookFacts,
    added_ids,
    closure_state,
    facts_digest,
    patched_references,
    patched_state,
    references,
    same_facts,
)
from stages.layout.packing import source_bundles
from stages.sources.base import Asset, CookList

SPEC = StageSpec(
    name="dependency",
    # 2: the cook list carries its findings by parts (CookList.findings); 3: assets keyed;
    # 4: the plan leaves each asset's cook-relevant facts for `update` (ClosureState); 5: and
    # what the references name (an asset deleted that none names patches without reading all)
    version=5,
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
    job = _closure_job(ctx, inputs["source"])
    every = inputs["assets"].as_dict()
    facts = CookFacts(job.cook, job.bundles)
    state = closure_state(facts, every, digest_value(ctx.section("source")))
    return _closure_plan(inputs, job, every, state)


def update(ctx, inputs: dict, changes: StageChanges) -> Plan | None:
    """An edit of the assets that leaves their facts as they were (patching.py) runs nothing
    and decodes only the changed entries; any other runs the closure on facts patched from
    them. A change of the source, or a unit the engine re-runs, plans again."""
    state, edit = changes.state, changes.inputs["assets"]
    if (
        not isinstance(state, ClosureState)
        or changes.rerun
        or changes.inputs["source"]
        or edit.everything
        or state.source_section != digest_value(ctx.section("source"))
    ):
        return None
    job = _closure_job(ctx, inputs["source"])
    facts = CookFacts(job.cook, job.bundles)
    if same_facts(facts, state, inputs["assets"], edit):
        return Plan(units=[], state=state)
    assets = inputs["assets"]
    named = patched_references(facts, state, assets, edit)
    added = added_ids(facts, state, assets, edit)
    # Every asset is decoded (in one pass) only when the closure runs from scratch, when an
    # asset gone named something (what only it named is read again), or when some reference
    # names one (whether a cooked asset follows it is read); assets added read only themselves
    # and a few the layout lists.
    unnamed = state.unnamed(edit.removed)
    patchable = added is not None and ctx.previous is not None
    every = None
    if not patchable or named is None or len(unnamed) < len(edit.removed):
        every = assets.as_dict()
    cooklist = None
    if patchable:
        cooklist = patched_cooklist(
            ctx.previous["cooklist"],
            assets if every is None else every,
            job.cook,
            job.bundles,
            added or (),
            edit.removed,
            unnamed,
        )
    if named is None:
        named = references(assets.as_dict() if every is None else every)
    patched = patched_state(facts, state, assets, edit, named)
    if cooklist is None:
        return _closure_plan(inputs, job, assets.as_dict() if every is None else every, patched)
    moved = ", ".join(
        [*(f"{a} added" for a in added or ()), *(f"{a} removed" for a in sorted(edit.removed))]
    )
    why = f"the cook list patched ({moved})"
    return _closure_plan(inputs, job, {}, patched, PatchedCookList(cooklist, why))


@record
class PatchedCookList(NamedTuple):
    """The unit's work when `update` patched the last cook list (cooklist/delta.py): its result
    is that cook list, the one the closure computes from scratch (the unit keeps that key)."""

    cooklist: CookList
    why: str  # for --explain


def _closure_plan(
    inputs: dict,
    job: ClosureJob,
    every: dict,
    state: ClosureState,
    patched: PatchedCookList | None = None,
) -> Plan:
    """The one unit: the closure from scratch over `every` asset, or (`patched`) the cook list
    `update` made (`every` is then not read)."""
    source = inputs["source"]
    unit = Unit(
        id="closure",
        payload=job if patched is None else patched,
        key={
            # Not the assets' digests: only what the cook list sees of them (patching.py), so
            # an Item renamed where no root specification looks keeps the key.
            "facts": facts_digest(state),
            "external": sorted(source.external),
            "source_roots": source.roots,
            # Assets the project's files assign to bundles are roots: a `.meta` naming a bundle
            # changes the cook list without changing any asset entry.
            "assigned": digest_value(job.bundles["assigned"]),
        },
        cost=max(1, len(every)) if patched is None else 1,
    )
    shared = ClosureShared(every, tuple(source.external), source.roots)
    reasons = None if patched is None else {unit.id: patched.why}
    return Plan(units=[unit], shared=shared, state=state, reasons=reasons)


def _closure_job(ctx, source) -> ClosureJob:
    cook = {k: v for k, v in ctx.section("cook").items() if k != "cookers"}
    bundles = ctx.section("bundles")
    # Assets the project assigns to bundles are roots, as layout-named ones are.
    assigned = source_bundles(source, ctx.section("source")) if bundles.get("from_meta") else {}
    return ClosureJob(cook, {"layout": bundles.get("layout") or [], "assigned": assigned})


def run(job: ClosureJob | PatchedCookList, shared: ClosureShared, reader):
    if isinstance(job, PatchedCookList):
        return job.cooklist
    return compute_cooklist(
        shared.assets, job.cook, job.bundles, shared.external, shared.source_roots
    )


def finish(ctx, inputs: dict, results) -> dict:
    if results.changed is not None and not results.changed:  # `update` proved it unchanged
        return {"cooklist": UNCHANGED, "cook_summary": UNCHANGED}
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
    """The report, rendered again only when the cook list changed or the file is not as it
    was published (deleted or edited since)."""
    cooklist = outputs["cooklist"]
    if cooklist is UNCHANGED:
        if ctx.mark_published(REPORT):
            return
        cooklist = ctx.previous["cooklist"]
    document = cooklist.to_json()
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
