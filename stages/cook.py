"""Stage `cook`: every cooked asset's payload, from the cooker for its Type.

Units are sized by work (stages/cooking/shards.py): assets cooked in-process by a built-in
cooker are cooked in shards of about 64, so that a cold build pays the engine's per-unit cost
(keys, action cache, build state) per shard; an asset with an external cooker or a source's
recipe has a unit of its own. A unit returns `Parts`: each asset's `CookedAsset` is stored as a
result of its own, and `cooked[id]` is its digest, which `write` reads back with `reader.blob`
and which does not depend on the shard it was cooked in. `cooked_types[id]` is its Type apart,
so that a payload edited in place reaches the bundles that hold it and not what only reads
Types (link.xml). The driver never loads payloads here, only the units' part digests.

Incrementally, the unit that read an edited file is cooked again by the engine (its other
assets cook to the same bytes, and their entries do not change); the units of an asset whose
entry changed, or that joined or left the cook list (an asset added or deleted), are planned
again here, and no other: shards are cut by content, so the others keep their members.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

from orchestrator import (
    KeyedPatch,
    Parts,
    Plan,
    ProjectError,
    StageChanges,
    StageSpec,
    Unit,
    digest_bytes,
    digest_value,
    record,
)
from stages.cooking.cookers import CookerSpec, cook_files, cooker_for
from stages.cooking.shards import SHARD_ASSETS, ShardMap
from stages.sources.base import Recipe

# The cook section is not in config_keys on purpose: each unit keys on its own cooker, so editing
# `cook.maps` (or one Type's cooker) does not re-cook every asset.
SPEC = StageSpec(
    name="cook",
    # 2: `cooked` and `cooked_types` keyed by asset. 3: units cook shards of assets (an asset
    # with an external cooker or a recipe alone) and store each payload as a part of the
    # unit's result; the entries of `cooked` keep the digests version 2 gave them.
    version=3,
    inputs=("assets", "source", "cooklist"),
    outputs=("cooked", "cooked_types"),
    keyed=("cooked", "cooked_types"),
    description="each cooked asset's payload, by the cooker of its Type",
)


@record
class CookedAsset(NamedTuple):
    """A unit's result: the payload with its size and BLAKE3 (so readers need not rehash)."""

    content: str
    size: int
    data: bytes


REASON_ASSETS = 5  # changed entries --explain names for one unit


@record
class CookJob(NamedTuple):
    asset_id: str
    folder: str  # file names inside the payload are relative to it
    files: tuple[str, ...]
    cooker: CookerSpec
    platform: str
    recipe: Recipe | None = None  # a source's recipe for an asset it made (Cocos atlas pages)


def plan(ctx, inputs: dict) -> Plan:
    """The units cooking every cooked asset: shards of cheap ones, the expensive alone."""
    cooked = inputs["cooklist"].cooked
    return Plan(
        units=_units(ctx, inputs, ShardMap(cooked), cooked), state=_settings(ctx, inputs["source"])
    )


def update(ctx, inputs: dict, changes: StageChanges) -> Plan | None:
    """The units of assets whose entry changed, or that joined or left the cook list, are
    planned again (a shard is cut by content, shards.py: only the shards those assets fall in
    move); new source or cooker settings plan everything (units whose key did not move keep
    their results)."""
    settings = _settings(ctx, inputs["source"])
    if settings != changes.state or changes.inputs["source"]:
        return None
    touched = changes.inputs["assets"]
    if not touched and not changes.inputs["cooklist"]:
        return Plan(units=[], state=settings)
    cooked = inputs["cooklist"].cooked
    members = set(cooked)
    shards = ShardMap(cooked)
    # An asset that joined or left the cook list (an asset added or deleted, a reference
    # made or dropped) moves its shard, and the shard boundaries when it draws one: the
    # shards holding its hash before and after are planned again (or removed).
    moved = CookListMove.of(ctx, members) if changes.inputs["cooklist"] else NO_MOVE
    wanted = sorted(
        {asset_id for asset_id in touched.changed if asset_id in members} | moved.joined
    )
    if not wanted and not moved.left:
        return Plan(units=[], state=settings)
    # A changed entry may move its asset between a shard and a unit of its own (its Type now
    # has an external cooker): both of its possible units are planned again, or removed.
    stale = {shards.shard_of(asset_id) for asset_id in wanted} | set(wanted)
    stale |= moved.stale_shards(shards)
    again = shards.members(cooked, stale)
    # (an asset of those shards with a unit of its own, not changed, is left as it is)
    units = [u for u in _units(ctx, inputs, shards, [*again, *wanted]) if u.id in stale]
    gone = stale - {unit.id for unit in units}
    removed = tuple(sorted(gone & set(changes.stored_ids()))) if gone else ()
    reasons = _reasons(units, sorted(touched.changed & members - moved.joined), moved, shards)
    return Plan(units=units, state=settings, removed=removed, reasons=reasons)


class CookListMove(NamedTuple):
    """The assets that joined the cook list since the last run and those that left it, told
    from the keys of the `cooked` value it stored (one per asset it cooked)."""

    joined: set[str]
    left: set[str]
    before: list[str]  # the last run's cooked assets

    @classmethod
    def of(cls, ctx, members: set[str]) -> CookListMove:
        before = list(ctx.previous["cooked"])
        known = set(before)
        return cls(members - known, known - members, before)

    def stale_shards(self, shards: ShardMap) -> set[str]:
        """The shards, in this run's map and in the last run's, holding a moved asset's hash:
        the only ones whose members differ (an asset drawing a boundary splits or joins the
        shard it falls in, and no other)."""
        if not self.joined and not self.left:
            return set()
        old = ShardMap(self.before)
        moved = self.joined | self.left
        return {shards.shard_of(a) for a in moved} | {old.shard_of(a) for a in moved} | moved


NO_MOVE = CookListMove(set(), set(), [])


def _reasons(
    units: list[Unit], changed: list[str], moved: CookListMove, shards: ShardMap
) -> dict[str, str]:
    """Each re-planned unit's changed asset entries, and the assets that joined or left the
    cook list in it (for --explain)."""
    reasons = {}
    changed_ids = set(changed)
    for unit in units:
        mine = {job.asset_id for job in unit.payload}
        said = []
        entries = sorted(mine & changed_ids)
        if entries:
            named = ", ".join(f"assets[{asset_id}]" for asset_id in entries[:REASON_ASSETS])
            more = (
                f" and {len(entries) - REASON_ASSETS} more" if len(entries) > REASON_ASSETS else ""
            )
            said.append(f"{named}{more} changed")
        for verb, ids in (("joined", mine & moved.joined), ("left", moved.left)):
            here = sorted(a for a in ids if a == unit.id or shards.shard_of(a) == unit.id)
            if here:
                more = f" and {len(here) - 1} more" if len(here) > 1 else ""
                said.append(f"{here[0]}{more} {verb} the cook list")
        reasons[unit.id] = "; ".join(said) or "its shard's boundaries moved"
    return reasons


def _settings(ctx, source) -> str:
    """What every unit's cooker depends on besides its asset: the cookers, the platform."""
    return digest_value(
        [
            ctx.section("cook").get("cookers", {}),
            ctx.section("platform"),
            getattr(source, "default_cooker", ""),
        ]
    )


class AssetWork(NamedTuple):
    """One asset's share of a unit: its job and its key material."""

    job: CookJob
    key: dict


def _units(ctx, inputs: dict, shards: ShardMap, asset_ids) -> list[Unit]:
    """The units cooking `asset_ids` (and only those): an asset with an external cooker or a
    recipe alone, the others in their shards; heaviest first, as executors hand them out."""
    assets = inputs["assets"]
    default = getattr(inputs["source"], "default_cooker", "")
    cookers = ctx.section("cook").get("cookers", {})
    platform = ctx.section("platform")
    # Type → (its cooker, that cooker's key material): looked up once per Type, not per asset.
    cookers_of: dict[str, tuple[CookerSpec, dict]] = {}
    recipes = getattr(inputs["source"], "recipes", None) or {}
    alone: list[Unit] = []
    by_shard: dict[str, list[AssetWork]] = {}
    for asset_id in dict.fromkeys(asset_ids):
        asset = assets[asset_id]
        known = cookers_of.get(asset.type)
        if known is None:
            spec = cooker_for(asset.type, cookers, default)
            known = cookers_of[asset.type] = (spec, spec.key(platform))
        spec, cooker_key = known
        folder = asset.folders[0] if asset.folders else ""
        files = tuple(asset.files)
        recipe = recipes.get(asset_id)
        job = CookJob(asset_id, folder, files, spec, platform, recipe)
        # `files` as a tuple: the key's JSON is that of the list it was before.
        key = {"asset": asset_id, "folder": folder, "files": files, "cooker": cooker_key}
        if recipe is not None:  # the source's cooker, not the Type's
            key["cooker"] = {
                "recipe": recipe.cooker,
                "version": recipe.version,
                "data": recipe.data,
            }
        if recipe is None and spec.kind != "external":
            by_shard.setdefault(shards.shard_of(asset_id), []).append(AssetWork(job, key))
        else:
            # A process (or a page of an atlas) outweighs a shard of in-process cooks.
            alone.append(_unit(asset_id, [AssetWork(job, key)], weight=SHARD_ASSETS))
    units = alone + [_unit(name, works) for name, works in by_shard.items()]
    units.sort(key=lambda unit: (-unit.cost, unit.id))
    return units


def _unit(unit_id: str, works: list[AssetWork], weight: int = 1) -> Unit:
    """One unit cooking the assets of `works`, in asset-id order."""
    works = sorted(works, key=lambda work: work.job.asset_id)
    files = tuple(path for work in works for path in work.job.files)
    return Unit(
        id=unit_id,
        payload=tuple(work.job for work in works),
        key={"assets": [work.key for work in works]},
        files=files,
        cost=max(1, len(files)) * weight,
    )


def run(payload: tuple[CookJob, ...], shared, reader) -> Parts:
    """Every asset of the unit cooked, each a stored result of its own (`cooked[id]`)."""
    return Parts({job.asset_id: cook_asset(job, reader) for job in payload})


def cook_asset(job: CookJob, reader) -> CookedAsset:
    """Read one asset's files through the reader and cook them."""
    files = {}
    for relpath in job.files:
        try:
            data = reader.read_bytes(relpath)
        except FileNotFoundError:
            raise ProjectError(
                f"file of asset {job.asset_id} vanished during the build", file=relpath
            ) from None
        files[_inner_name(relpath, job.folder)] = data
    if job.recipe is not None:
        module, _, name = job.recipe.cooker.partition(":")
        cooker = getattr(importlib.import_module(module), name)
        data = cooker(job.asset_id, files, job.recipe.data)
    else:
        data = cook_files(job.asset_id, files, job.cooker, job.platform)
    return CookedAsset(digest_bytes(data), len(data), data)


def _inner_name(relpath: str, folder: str) -> str:
    prefix = folder.rstrip("/") + "/" if folder else ""
    return relpath[len(prefix) :] if prefix and relpath.startswith(prefix) else relpath


def finish(ctx, inputs: dict, results) -> dict:
    """`cooked`: asset id → digest of its stored CookedAsset (a part of its unit's result);
    `cooked_types`: → its Type."""
    assets = inputs["assets"]
    if results.changed is None:
        ids = inputs["cooklist"].cooked
        made: dict[str, str] = {}
        for unit_id in results:
            made.update(results[unit_id].digests)
        return {
            "cooked": {asset_id: made[asset_id] for asset_id in ids},
            "cooked_types": {asset_id: assets[asset_id].type for asset_id in ids},
        }
    # Of a unit whose result changed, only the assets whose payload changed (the others of
    # its shard cooked to the same bytes) or that joined it; those that left it (and the
    # removed units') are gone unless another unit cooks them now.
    cooked = {}
    gone: set[str] = set()
    for unit_id in sorted(results.changed):
        was = results.before.get(unit_id)
        known = ctx.load_result(was).digests if was is not None else {}
        now = results[unit_id].digests
        for asset_id, digest in now.items():
            if known.get(asset_id) != digest:
                cooked[asset_id] = digest
        gone.update(asset_id for asset_id in known if asset_id not in now)
    for unit_id in sorted(results.removed or ()):
        gone.update(ctx.load_result(results.before[unit_id]).digests)
    removed = tuple(sorted(gone - set(cooked)))
    # A Type is read from the asset entry, not cooked: an asset whose entry changed keeps its
    # payload when its cooker did not change, but its Type may have.
    retyped = set(cooked) | {job.asset_id for unit in results.plan.units for job in unit.payload}
    return {
        "cooked": KeyedPatch({a: cooked[a] for a in sorted(cooked)}, removed),
        "cooked_types": KeyedPatch({a: assets[a].type for a in sorted(retyped)}, removed),
    }
