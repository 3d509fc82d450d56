"""Stage `cook`: one unit per cooked asset; its payload comes from the cooker for its Type.

The payload flows on by digest: `cooked[id]` names the stored `CookedAsset`, which `write` reads
back with `reader.blob`; `cooked_types[id]` is its Type apart, so that a payload edited in place
reaches the bundles that hold it and not what only reads Types (link.xml). The driver never loads
payloads here. Incrementally, an asset whose files changed is cooked again by the engine (its
unit read them); an asset entry that changed is planned again here.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

from orchestrator.codec import record
from orchestrator.errors import ProjectError
from orchestrator.hashing import digest_bytes, digest_value
from orchestrator.keyed import KeyedPatch
from orchestrator.typing import Plan, StageChanges, StageSpec, Unit
from stages.cooking.cookers import CookerSpec, cook_files, cooker_for
from stages.sources.base import Recipe

# The cook section is not in config_keys on purpose: each unit keys on its own cooker, so editing
# `cook.maps` (or one Type's cooker) does not re-cook every asset.
SPEC = StageSpec(
    name="cook",
    version=2,  # 2: `cooked` and `cooked_types` keyed by asset
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


@record
class CookJob(NamedTuple):
    asset_id: str
    folder: str  # file names inside the payload are relative to it
    files: tuple[str, ...]
    cooker: CookerSpec
    platform: str
    recipe: Recipe | None = None  # a source's recipe for an asset it made (Cocos atlas pages)


def plan(ctx, inputs: dict) -> Plan:
    """One unit per cooked asset that the source knows, in cook-list order."""
    return Plan(
        units=_units(ctx, inputs, inputs["cooklist"].cooked), state=_settings(ctx, inputs["source"])
    )


def update(ctx, inputs: dict, changes: StageChanges) -> Plan | None:
    """Assets whose entry changed are planned again; a new cook list, source or cooker
    settings plan everything (units whose key did not move keep their results)."""
    settings = _settings(ctx, inputs["source"])
    if settings != changes.state or changes.inputs["cooklist"] or changes.inputs["source"]:
        return None
    touched = changes.inputs["assets"]
    if not touched:
        return Plan(units=[], state=settings)
    if touched.removed:
        return None
    cooked = set(inputs["cooklist"].cooked)
    wanted = [asset_id for asset_id in sorted(touched.changed) if asset_id in cooked]
    return Plan(
        units=_units(ctx, inputs, wanted),
        state=settings,
        reasons={asset_id: f"assets[{asset_id}] changed" for asset_id in wanted},
    )


def _settings(ctx, source) -> str:
    """What every unit's cooker depends on besides its asset: the cookers, the platform."""
    return digest_value(
        [
            ctx.section("cook").get("cookers", {}),
            ctx.section("platform"),
            getattr(source, "default_cooker", ""),
        ]
    )


def _units(ctx, inputs: dict, asset_ids) -> list[Unit]:
    assets = inputs["assets"]
    default = getattr(inputs["source"], "default_cooker", "")
    cookers = ctx.section("cook").get("cookers", {})
    platform = ctx.section("platform")
    # Type → (its cooker, that cooker's key material): looked up once per Type, not per asset.
    cookers_of: dict[str, tuple[CookerSpec, dict]] = {}
    recipes = getattr(inputs["source"], "recipes", None) or {}
    units = []
    for asset_id in asset_ids:
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
        units.append(Unit(id=asset_id, payload=job, key=key, files=files, cost=max(1, len(files))))
    return units


def run(payload: CookJob, shared, reader) -> CookedAsset:
    """Read the asset's files through the reader and cook them."""
    files = {}
    for relpath in payload.files:
        try:
            data = reader.read_bytes(relpath)
        except FileNotFoundError:
            raise ProjectError(
                f"file of asset {payload.asset_id} vanished during the build", file=relpath
            ) from None
        files[_inner_name(relpath, payload.folder)] = data
    if payload.recipe is not None:
        module, _, name = payload.recipe.cooker.partition(":")
        cooker = getattr(importlib.import_module(module), name)
        data = cooker(payload.asset_id, files, payload.recipe.data)
    else:
        data = cook_files(payload.asset_id, files, payload.cooker, payload.platform)
    return CookedAsset(digest_bytes(data), len(data), data)


def _inner_name(relpath: str, folder: str) -> str:
    prefix = folder.rstrip("/") + "/" if folder else ""
    return relpath[len(prefix) :] if prefix and relpath.startswith(prefix) else relpath


def finish(ctx, inputs: dict, results) -> dict:
    """`cooked`: asset id → digest of its stored CookedAsset; `cooked_types`: → its Type."""
    assets = inputs["assets"]
    if results.changed is None:
        ids = inputs["cooklist"].cooked
        return {
            "cooked": {asset_id: results.digest(asset_id) for asset_id in ids},
            "cooked_types": {asset_id: assets[asset_id].type for asset_id in ids},
        }
    changed = sorted(results.changed)
    removed = tuple(sorted(results.removed or ()))
    # A Type is read from the asset entry, not cooked: an asset whose entry changed keeps its
    # unit (and payload) when its cooker did not change, but its Type may have.
    replanned = sorted(results.changed | {unit.id for unit in results.plan.units})
    return {
        "cooked": KeyedPatch({a: results.digest(a) for a in changed}, removed),
        "cooked_types": KeyedPatch({a: assets[a].type for a in replanned}, removed),
    }
