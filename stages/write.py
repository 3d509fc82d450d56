"""Stage `write`: one unit per bundle serializes its entries (uncompressed) in entry-id order.

Incrementally, a bundle is written again when it changed, or when one of its assets was cooked
again or renamed (found through `asset_bundles`).
"""

from __future__ import annotations

from orchestrator import Plan, StageChanges, StageSpec, Unit, map_finish
from stages.bundlefile.format import Entry, build_bundle
from stages.sources.base import RESOURCE

SPEC = StageSpec(
    name="write",
    version=2,  # 2: keyed by bundle
    inputs=("assets", "bundles", "asset_bundles", "cooked"),
    outputs=("written",),
    keyed=("written",),
    description="one serialized bundle file per bundle",
)


def entry_name(asset) -> str:
    """What a person reads in a listing: a resource's virtual path, a map's file name."""
    if asset.kind == RESOURCE and asset.virtual_paths:
        return asset.virtual_paths[0]
    return asset.name or asset.id.rsplit("/", 1)[-1]


def plan(ctx, inputs: dict) -> Plan:
    """Per bundle: entries (id, name, digest of the cooked payload), sorted by id."""
    return Plan(units=_units(inputs, list(inputs["bundles"])))


def update(ctx, inputs: dict, changes: StageChanges) -> Plan:
    """The bundles that changed, and those holding an asset cooked again or renamed."""
    touched = set(changes.inputs["bundles"].changed)
    reasons = {name: f"bundles[{name}] changed" for name in touched}
    holders = inputs["asset_bundles"]
    for value in ("cooked", "assets", "asset_bundles"):
        for asset_id in sorted(changes.inputs[value].changed):
            for name in holders.get(asset_id, ()):
                if name not in touched:
                    touched.add(name)
                    reasons[name] = f"{value}[{asset_id}] changed"
    names = sorted(name for name in touched if name in inputs["bundles"])
    return Plan(
        units=_units(inputs, names),
        removed=tuple(sorted(changes.inputs["bundles"].removed)),
        reasons=reasons,
    )


def _units(inputs: dict, names: list[str]) -> list[Unit]:
    assets, cooked, bundles = inputs["assets"], inputs["cooked"], inputs["bundles"]
    units = []
    for name in names:
        bundle = bundles[name]
        entries = tuple(sorted((a, entry_name(assets[a]), cooked[a]) for a in bundle.assets))
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
    return units


def run(payload, shared, reader) -> bytes:
    return build_bundle(
        Entry(asset_id, name, reader.blob(digest).data) for asset_id, name, digest in payload
    )


def finish(ctx, inputs: dict, results) -> dict:
    """`written`: bundle → the digest of the stored bundle bytes."""
    return {"written": map_finish(results, results, results.digest)}
