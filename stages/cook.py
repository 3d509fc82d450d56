"""Stage `cook`: one unit per cooked asset; its payload comes from the cooker for its Type.

The payload flows on by digest: `cooked[id]["digest"]` names the stored `CookedAsset`, which
`write` reads back with `reader.blob`. The driver never loads payloads here.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

from orchestrator.errors import ProjectError
from orchestrator.hashing import digest_bytes
from orchestrator.typing import Plan, StageSpec, Unit
from stages.cooking.cookers import CookerSpec, cook_files, cooker_for
from stages.sources.base import Recipe

# The cook section is not in config_keys on purpose: each unit keys on its own cooker, so editing
# `cook.maps` (or one Type's cooker) does not re-cook every asset.
SPEC = StageSpec(
    name="cook",
    version=1,
    inputs=("source", "cooklist"),
    outputs=("cooked",),
    description="each cooked asset's payload, by the cooker of its Type",
)


class CookedAsset(NamedTuple):
    """A unit's result: the payload with its size and BLAKE3 (so readers need not rehash)."""

    content: str
    size: int
    data: bytes


class CookJob(NamedTuple):
    asset_id: str
    folder: str  # file names inside the payload are relative to it
    files: tuple[str, ...]
    cooker: CookerSpec
    platform: str
    recipe: Recipe | None = None  # a source's recipe for an asset it made (Cocos atlas pages)


def plan(ctx, inputs: dict) -> Plan:
    """One unit per cooked asset that the source knows, in cook-list order."""
    assets = inputs["source"].assets
    default = getattr(inputs["source"], "default_cooker", "")
    cookers = ctx.section("cook").get("cookers", {})
    platform = ctx.section("platform")
    # Type → (its cooker, that cooker's key material): looked up once per Type, not per asset.
    cookers_of: dict[str, tuple[CookerSpec, dict]] = {}
    recipes = getattr(inputs["source"], "recipes", None) or {}
    units = []
    for asset_id in inputs["cooklist"].cooked:
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
    return Plan(units=units)


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
    """`cooked`: asset id → {digest of the stored CookedAsset, Type}, in cook-list order."""
    assets = inputs["source"].assets
    return {
        "cooked": {
            asset_id: {"digest": results.digest(asset_id), "type": assets[asset_id].type}
            for asset_id in inputs["cooklist"].cooked
        }
    }
