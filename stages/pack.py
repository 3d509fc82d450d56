"""Stage `pack`: assign every cooked asset to bundles (one unit; the algorithm is `packing`).

`update` cuts off an edit no placement sees, and patches the last packing when one asset joins
the cook that nothing references and that references nothing cooked, or leaves it when it
referenced nothing and nothing cooked referenced it (stages/layout/delta.py)."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from functools import partial
from typing import Any, NamedTuple

from orchestrator import (
    UNCHANGED,
    KeyedPatch,
    Plan,
    Problem,
    StageChanges,
    StageSpec,
    Unit,
    digest_value,
    record,
)
from stages.layout.delta import dangling_targets, joined, left, loose_assets
from stages.layout.options import (
    PackOptions,
    PackState,
    layout_matcher,
    options_digest,
    pack_options,
    settings_digest,
)
from stages.layout.packing import Packing, PackingInfo, pack
from stages.sources import log_problems
from stages.sources.base import Asset, PackHook

SPEC = StageSpec(
    name="pack",
    # 2: bundles and asset → bundles keyed, the rest in `packing`; 3: what no bundle may hold;
    # 4: each cooked asset's placement signature kept (`placements`), for the early cutoff;
    # 5: the state keeps what cooked assets reference outside the cook (an asset joining it
    # patches the last packing: layout/delta.py); 6: and its loose assets (one leaving the
    # cook is dropped from the last packing)
    version=6,
    inputs=("assets", "source", "cooklist", "cooked"),
    outputs=("bundles", "asset_bundles", "packing", "placements"),
    keyed=("bundles", "asset_bundles", "placements"),
    config_keys=("bundles",),
    description="bundle layout, shared dependencies, bundle dependency graph",
)

#: Up to this many assets (cooked again, or edited), whether the last run packed them is looked
#: up one by one; more, and the keys are read whole.
LOOKED_UP = 1000


def update(ctx, inputs: dict, changes: StageChanges) -> Plan | None:
    """Early cutoff: when the cook order and the options are as the last plan left them and
    every cooked asset that changed has the placement signature it had (a renamed Item the same
    layout rules name to the same bundles, an attribute edit), the packing cannot change: no
    unit, without reading the other assets. Re-cooked payloads move nothing either. When the
    options stand but the cook order or a placement moved, the one unit is planned again with
    the other assets' signatures as the last run kept them (only the edited ones signed anew);
    anything else plans from scratch."""
    known: PackState | None = changes.state
    if known is None:
        return None
    if settings_digest(ctx) != known.settings:
        return None
    if changes.inputs["source"] and options_digest(ctx, inputs) != known.options:
        return None
    cooked_ids = None
    if not _order_stands(ctx, changes):
        cooked_ids = _cooked_ids(inputs)
        if digest_value(cooked_ids) != known.order:
            patched = _patched(ctx, inputs, changes, known, cooked_ids)
            if patched is not None:
                return patched
            return _plan(ctx, inputs, cooked_ids, _kept(ctx, changes), "the cook list changed")
    edited = changes.inputs["assets"].touched
    if cooked_ids is None:  # the cook order stands: the last run signed exactly its assets
        before = ctx.previous["placements"]
        few = len(edited) <= LOOKED_UP
        cooked = {a for a in edited if a in before} if few else set(before) & edited
    else:
        cooked = set(cooked_ids) & edited
    if cooked and not _placed_as_before(ctx, inputs, cooked):
        moved = f"the placement of {min(cooked)} may have changed"
        ids = _cooked_ids(inputs) if cooked_ids is None else cooked_ids
        return _plan(ctx, inputs, ids, _kept(ctx, changes), moved)
    return Plan(units=[], state=known)


def _patched(
    ctx, inputs: dict, changes: StageChanges, known: PackState, cooked_ids: list[str]
) -> Plan | None:
    """The one unit taking the last packing patched (layout/delta.py) when one asset came into
    the cook or left it and every other stands: the cook order is the last one's but for it,
    and every other cooked asset edited signs as it did."""
    placements = ctx.previous["placements"]
    signed = set(placements)  # the keys, read at once
    cooked = set(cooked_ids)
    new = [a for a in cooked_ids if a not in signed]
    gone = sorted(signed - cooked)
    if len(new) + len(gone) != 1:
        return None
    moved = new[0] if new else gone[0]
    edited = set(changes.inputs["assets"].touched) - {moved}
    if len(edited) > LOOKED_UP or not _placed_as_before(ctx, inputs, edited & cooked):
        return None
    options, _ = pack_options(ctx, inputs)
    if new:
        if digest_value([a for a in cooked_ids if a != moved]) != known.order:
            return None
        assets = inputs["assets"]
        matcher = layout_matcher(ctx, inputs)
        found = joined(assets[moved], cooked_ids, options, matcher, known, ctx.previous, assets)
    else:
        found = left(moved, cooked_ids, options, known, ctx.previous)
    if found is None:
        return None
    key = {"placements": digest_value(list(found.placements.items())), "options": options._asdict()}
    state = PackState(
        digest_value(cooked_ids), settings_digest(ctx), known.options, found.dangling, found.loose
    )
    fresh = {moved: found.placements[moved]} if new else {}
    patch = KeyedPatch(fresh, tuple(gone))
    unit = Unit(id="bundles", payload=PatchedPacking(found.packing), key=key)
    return Plan(
        units=[unit],
        state=state,
        scratch=Signed(found.placements, sorted(signed), patch, (found.asset, found.bundle)),
        reasons={unit.id: f"{moved} {'joined' if new else 'left'} bundle {found.bundle}"},
    )


@record
class PatchedPacking(NamedTuple):
    """The unit's work when `update` patched the last packing (layout/delta.py): the packing a
    clean build computes (the unit keeps that key)."""

    packing: Packing


def _order_stands(ctx, changes: StageChanges) -> bool:
    """Whether the cooked assets in cook-list order are the last run's, told without reading
    them: the cook list is as it was, no cooked payload went, and every one cooked again was
    cooked then too (the last run kept a placement signature for each asset it packed, and for
    no other). Re-cooked payloads alone, an attribute edit's, so cost a lookup per asset
    instead of the whole cook list and every cooked key."""
    cooked = changes.inputs["cooked"]
    if changes.inputs["cooklist"] or cooked.everything or cooked.removed:
        return False
    if len(cooked.changed) > LOOKED_UP:
        return False
    before = ctx.previous["placements"]
    return all(a in before for a in cooked.changed)


def _kept(ctx, changes: StageChanges) -> Signed:
    """The signatures the last run kept of the assets not edited since (still theirs: a
    signature reads only its asset and the options, which stand), and every key it kept."""
    edited = changes.inputs["assets"].touched
    stored = ctx.previous["placements"].items()
    return Signed({a: sign for a, sign in stored if a not in edited}, [a for a, _ in stored])


def _placed_as_before(ctx, inputs: dict, cooked: set[str]) -> bool:
    """Whether each of these cooked assets signs as the last run kept it (read one by one)."""
    before, assets = ctx.previous["placements"], inputs["assets"]
    matcher = layout_matcher(ctx, inputs)
    return all(
        a in assets and a in before and matcher.signature(assets[a]) == before[a]
        for a in sorted(cooked)
    )


def _cooked_ids(inputs: dict) -> list[str]:
    """The cooked assets in cook-list order (what the packing iterates)."""
    made = set(inputs["cooked"])
    return [a for a in inputs["cooklist"].cooked if a in made]


class Signed(NamedTuple):
    """Planning's signatures for `finish` (Plan.scratch, not stored): every cooked asset's, and
    the keys the last run kept when an update planned (None after a full plan)."""

    placements: dict[str, str]
    stored: list[str] | None
    patch: KeyedPatch | None = None  # after an update: the signatures made anew, keys gone
    # after a patch (layout/delta.py): the asset that joined or left and its bundle, the only
    # entries of `bundles` and `asset_bundles` that change
    moved: tuple[str, str] | None = None


@record
class PackJob(NamedTuple):
    """The one unit's work: the cooked assets in cook-list order, packed by the options, and
    the source's refinement of the priority fill, if any."""

    assets: tuple[Asset, ...]
    options: PackOptions
    hook: PackHook | None


def plan(ctx, inputs: dict) -> Plan:
    """One unit; its key is what packing reads: each cooked asset's placement signature in
    cook-list order (stages/layout/placement.py) and the options it packs by. So an edit
    packing does not read (an attribute, a rename the same rules place alike) keeps the key a
    clean build would give, and a re-cooked asset does not re-pack."""
    return _plan(ctx, inputs, _cooked_ids(inputs), Signed({}, None))


def _plan(ctx, inputs: dict, cooked_ids: list[str], kept: Signed, why: str = "") -> Plan:
    """The one unit over `cooked_ids`, signing the assets whose signature is not `kept`."""
    assets = inputs["assets"]
    cooked = tuple(assets[a] for a in cooked_ids)
    options, hook = pack_options(ctx, inputs)
    matcher = layout_matcher(ctx, inputs)
    known = kept.placements
    placements = {asset.id: known.get(asset.id) or matcher.signature(asset) for asset in cooked}
    key = {"placements": digest_value(list(placements.items())), "options": options._asdict()}
    if hook is not None:  # what the source's refinement reads comes from the whole project
        key["hook"] = [hook.target, digest_value(hook.data)]
    ids = set(cooked_ids)
    state = PackState(
        digest_value(cooked_ids),
        settings_digest(ctx),
        digest_value([options, hook]),
        dangling_targets(cooked, ids, options.follow_soft),
        loose_assets(cooked, options.follow_soft),
    )
    job = PackJob(cooked, options, hook)
    unit = Unit(id="bundles", payload=job, key=key)
    reasons = {unit.id: why} if why else None
    scratch = Signed(placements, kept.stored)
    if kept.stored is not None:  # an update: only the signatures made anew, and the keys gone
        fresh = {a: sign for a, sign in placements.items() if a not in known}
        gone = tuple(sorted(set(kept.stored) - set(placements)))
        scratch = Signed(placements, kept.stored, KeyedPatch(fresh, gone))
    return Plan(units=[unit], state=state, scratch=scratch, reasons=reasons)


def run(job: PackJob | PatchedPacking, shared, reader) -> Packing:
    if isinstance(job, PatchedPacking):
        return job.packing
    refine = None
    if job.hook is not None:
        module, _, name = job.hook.target.partition(":")
        refine = partial(getattr(importlib.import_module(module), name), data=job.hook.data)
    return pack_with(job.assets, job.options, refine)


def pack_with(assets: Sequence[Asset], options: PackOptions, refine=None) -> Packing:
    """`assets` packed under the stage's options (what a unit and a clean plan compute)."""
    return pack(
        assets,
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
    placements = _placements(results.plan.scratch)
    if results.changed is not None and not results.changed:  # the same packing
        return dict.fromkeys(SPEC.outputs, UNCHANGED) | {"placements": placements}
    packing: Packing = results["bundles"]
    if getattr(ctx, "log", None) is not None:
        log_problems(ctx.log, "pack.problem", packing.problems)
    moved = getattr(results.plan.scratch, "moved", None)
    if moved is not None and results.changed is not None:  # one asset joined or left a bundle
        return {
            "bundles": _entry(packing.bundles, moved[1]),
            "asset_bundles": _entry(packing.asset_bundles, moved[0]),
            "packing": UNCHANGED,
            "placements": placements,
        }
    return {
        "bundles": packing.bundles,
        "asset_bundles": packing.asset_bundles,
        "packing": PackingInfo(list(packing.cycles), packing.policy, list(packing.problems)),
        "placements": placements,
    }


def _entry(value: dict, key: str) -> KeyedPatch:
    """The patch setting `value`'s entry at `key`, or removing it when it has none."""
    return KeyedPatch({key: value[key]}) if key in value else KeyedPatch({}, (key,))


def _placements(signed: Signed | None) -> Any:
    """The `placements` output: UNCHANGED when no unit was planned; after an update, a patch of
    the signatures made anew and the keys gone; else every signature."""
    if signed is None:
        return UNCHANGED
    return signed.placements if signed.patch is None else signed.patch


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
