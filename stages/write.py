"""Stage `write`: one unit per bundle serializes its entries (uncompressed) in entry-id order."""

from __future__ import annotations

from orchestrator.typing import Plan, StageSpec, Unit
from stages.bundlefile.format import Entry, build_bundle
from stages.sources.base import RESOURCE

SPEC = StageSpec(
    name="write",
    version=1,
    inputs=("source", "bundles", "cooked"),
    outputs=("written",),
    description="one serialized bundle file per bundle",
)


def entry_name(asset) -> str:
    """What a person reads in a listing: a resource's virtual path, a map's file name."""
    if asset.kind == RESOURCE and asset.virtual_paths:
        return asset.virtual_paths[0]
    return asset.name or asset.id.rsplit("/", 1)[-1]


def plan(ctx, inputs: dict) -> Plan:
    """Per bundle: entries (id, name, digest of the cooked payload), sorted by id."""
    assets, cooked = inputs["source"].assets, inputs["cooked"]
    units = []
    for name, bundle in inputs["bundles"].bundles.items():
        entries = tuple(
            sorted((a, entry_name(assets[a]), cooked[a]["digest"]) for a in bundle.assets)
        )
        # Keyed by the cooked payloads' digests: an unchanged bundle is a cache hit.
        units.append(
            Unit(
                id=name,
                payload=entries,
                key={"bundle": name, "entries": entries},
                blobs=tuple(sorted({d for _, _, d in entries})),
                cost=max(1, len(entries)),
            )
        )
    return Plan(units=units)


def run(payload, shared, reader) -> bytes:
    return build_bundle(
        Entry(asset_id, name, reader.blob(digest).data) for asset_id, name, digest in payload
    )


def finish(ctx, inputs: dict, results) -> dict:
    """`written`: bundle → {digest of the stored bundle bytes}."""
    return {
        "written": {name: {"digest": results.digest(name)} for name in inputs["bundles"].bundles}
    }
