"""Stage `write`: one unit per bundle serializes its entries (uncompressed) in entry-id order.

Incrementally, a bundle is written again when it changed, or when one of its assets was cooked
again or renamed (found through `asset_bundles`).
"""

from __future__ import annotations

from typing import NamedTuple

from orchestrator import Plan, StageChanges, StageSpec, Unit, map_finish, record
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


@record
class EntrySource(NamedTuple):
    """An entry of a bundle to write: its asset, the name a listing shows, and the digest of
    the asset's stored CookedAsset."""

    asset_id: str
    name: str
    cooked: str


@record
class BundleJob(NamedTuple):
    """One unit's work: a bundle's entries, in asset-id order. Its fields are also the unit's
    key: the cooked payloads' digests, so an unchanged bundle is a cache hit."""

    bundle: str
    entries: tuple[EntrySource, ...]


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
        entries = sorted(
            EntrySource(a, entry_name(assets[a]), cooked[a]) for a in bundles[name].assets
        )
        job = BundleJob(name, tuple(entries))
        units.append(
            Unit(
                id=name,
                payload=job,
                key=job._asdict(),
                blobs=tuple(sorted({entry.cooked for entry in entries})),
                cost=max(1, len(entries)),
            )
        )
    return units


def run(job: BundleJob, shared, reader) -> bytes:
    return build_bundle(
        Entry(entry.asset_id, entry.name, reader.blob(entry.cooked).data) for entry in job.entries
    )


def finish(ctx, inputs: dict, results) -> dict:
    """`written`: bundle → the digest of the stored bundle bytes."""
    return {"written": map_finish(results, results, results.digest)}
