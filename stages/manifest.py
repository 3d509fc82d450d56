"""Stage `manifest`: `manifest.json` and `staging.json`; its `publish` writes the whole output.

The manifest lists every bundle (file, size, CRC32, hashes, assets, dependencies both ways),
asset → bundles, the cook list and the build's metadata (platform, stage versions, tool version).
The staging manifest splits what ships inside bundles (UFS, in Unreal's terms) from the loose
files staged as they are (NonUFS). Neither holds time stamps or absolute paths.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import orjson

import orchestrator
from orchestrator.codec import record
from orchestrator.hashing import digest_value
from orchestrator.typing import Plan, StageChanges, StageSpec, Unit
from stages.publishing.output import LINK_XML, MANIFEST, STAGING, publish_build

SPEC = StageSpec(
    name="manifest",
    version=2,  # 2: reads the keyed bundle values; patches the last document when it can
    inputs=(
        "cooklist",
        "cooked_types",
        "bundles",
        "asset_bundles",
        "packing",
        "archived",
        "bundle_files",
        "link_xml",
    ),
    outputs=("manifest",),
    config_keys=("platform",),
    description="the build manifest and the staging manifest",
)

FORMAT = 1


@record
class BuildOutput(NamedTuple):
    """Everything `publish` puts in the output folder, in memory except the bundles' bytes."""

    bundle_files: tuple  # hash.BundleFile records, sorted by bundle name
    archived: dict  # bundle name → digest of its stored ArchivedBundle (loaded on demand)
    loose: dict  # relpath → bytes (link.xml, staging.json)
    manifest: bytes


def stage_versions() -> dict[str, int]:
    from orchestrator.registry import registered_stages

    return {stage.name: stage.spec.version for stage in registered_stages()}


def manifest_document(
    bundles,
    asset_bundles,
    info,
    bundle_files,
    cooklist,
    cooked_types,
    platform: str,
    versions: dict[str, int],
) -> dict:
    """The manifest as JSON-able data (deterministic: sorted keys, cook-list order)."""
    entries = {}
    for name, bundle in sorted(bundles.items()):
        record = bundle_files[name]
        entries[name] = {
            **file_fields(record),
            "kind": bundle.kind,
            "assets": list(bundle.assets),
            "explicit": list(bundle.explicit),
            "implicit": list(bundle.implicit),
            "dependencies": list(bundle.dependencies),
            "reverse_dependencies": list(bundle.reverse_dependencies),
            "used_by": list(bundle.used_by),
        }
        if bundle.priority is not None:  # `shared_dependencies: priority`
            entries[name]["priority"] = bundle.priority
            entries[name]["redirects"] = {r.asset: r.bundle for r in bundle.redirects}
            entries[name].update(bundle.source_fields)  # e.g. Cocos `paths`, `scenes`
    types = dict(cooked_types.items())
    return {
        "format": FORMAT,
        "build": {
            "platform": platform,
            "tool_version": orchestrator.__version__,
            "stage_versions": dict(sorted(versions.items())),
            "shared_dependencies": info.policy,
        },
        "bundles": entries,
        "assets": {
            a: {"type": types[a], "bundles": list(names)}
            for a, names in sorted(asset_bundles.items())
        },
        "cooklist": [a for a in cooklist.cooked if a in types],
        "missing": sorted(cooklist.missing),
        "bundle_cycles": [list(c) for c in info.cycles],
        "loose_files": [LINK_XML, STAGING],
    }


def file_fields(record) -> dict:
    """What the manifest says of a bundle's file (its BundleFile)."""
    return {
        "file": record.file,
        "size": record.size,
        "crc32": record.crc32,
        "content_hash": record.content_hash,
        "raw_hash": record.raw_hash,
    }


def staging_entry(record) -> dict:
    return {
        "file": record.file,
        "bundle": record.name,
        "size": record.size,
        "raw_hash": record.raw_hash,
    }


def staging_document(bundle_files) -> dict:
    """UFS: the bundle files (and the bundle each is); NonUFS: loose files staged as they are."""
    return {
        "format": FORMAT,
        "ufs": [staging_entry(r) for r in sorted(bundle_files.values(), key=lambda r: r.file)],
        "non_ufs": sorted([LINK_XML, MANIFEST, STAGING]),
    }


def to_json_bytes(document: dict) -> bytes:
    """`json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)` and a newline, UTF-8.

    orjson writes the same bytes for these documents (str keys, ints, no floats: its float
    spelling would differ) ten times faster; what it refuses (ints past 64 bits, lone
    surrogates) goes the slow way and fails or not exactly as before.
    """
    try:
        return orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    except orjson.JSONEncodeError:
        return (json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def plan(ctx, inputs: dict) -> Plan:
    document = manifest_document(
        inputs["bundles"],
        inputs["asset_bundles"],
        inputs["packing"],
        inputs["bundle_files"],
        inputs["cooklist"],
        inputs["cooked_types"],
        ctx.section("platform"),
        stage_versions(),
    )
    return _plan(document, staging_document(inputs["bundle_files"]))


def update(ctx, inputs: dict, changes: StageChanges) -> Plan | None:
    """When only bundle files changed (an asset cooked again), the last documents are patched
    where they name those files; anything else plans the documents again."""
    files = changes.inputs["bundle_files"]
    others = ("cooklist", "cooked_types", "bundles", "asset_bundles", "packing")
    if files.removed or any(changes.inputs[name] for name in others):
        return None
    previous: BuildOutput = ctx.previous["manifest"]
    document = orjson.loads(previous.manifest)
    staging = orjson.loads(previous.loose[STAGING])
    changed = {name: inputs["bundle_files"][name] for name in sorted(files.changed)}
    for name, bundle_file in changed.items():
        document["bundles"][name].update(file_fields(bundle_file))
    ufs = {entry["bundle"]: entry for entry in staging["ufs"]}
    ufs.update((name, staging_entry(bundle_file)) for name, bundle_file in changed.items())
    staging["ufs"] = sorted(ufs.values(), key=lambda entry: entry["file"])
    return _plan(document, staging)


def _plan(document: dict, staging: dict) -> Plan:
    return Plan(
        units=[
            Unit(
                id="manifest",
                payload=(document, staging),
                key={"manifest": digest_value([document, staging])},
            )
        ]
    )


def run(payload, shared, reader) -> tuple[bytes, bytes]:
    document, staging = payload
    return to_json_bytes(document), to_json_bytes(staging)


def finish(ctx, inputs: dict, results) -> dict:
    manifest, staging = results["manifest"]
    files = tuple(record for _, record in sorted(inputs["bundle_files"].items()))
    archived = dict(inputs["archived"].items())
    return {
        "manifest": BuildOutput(
            files, archived, {LINK_XML: inputs["link_xml"], STAGING: staging}, manifest
        )
    }


def publish(ctx, outputs: dict) -> None:
    """Bundles first, then link.xml and staging.json, the manifest last, then stale removal."""
    out: BuildOutput = outputs["manifest"]
    done = publish_build(
        ctx,
        out.bundle_files,
        lambda name: ctx.load_result(out.archived[name]).data,
        out.loose,
        out.manifest,
    )
    if getattr(ctx, "log", None) is not None:
        ctx.log.info(
            "manifest.published", written=len(done["written"]), removed=len(done["removed"])
        )


def summary(build, outputs) -> list[str]:
    manifest = build.output_dir / MANIFEST
    return [f"manifest: {manifest}"] if manifest.exists() else []
