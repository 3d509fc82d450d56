"""Stage `manifest`: `manifest.json` and `staging.json`; its `publish` writes the whole output.

The manifest lists every bundle (file, size, CRC32, hashes, assets, dependencies both ways),
asset → bundles, the cook list and the build's metadata (platform, stage versions, tool version).
The staging manifest splits what ships inside bundles (UFS, in Unreal's terms) from the loose
files staged as they are (NonUFS). Neither holds time stamps or absolute paths.
"""

from __future__ import annotations

from typing import NamedTuple

import orjson

from orchestrator import Plan, StageChanges, StageSpec, Unit, digest_bytes, record
from stages.publishing.manifests import (
    LINK_XML,
    MANIFEST,
    STAGING,
    asset_entry,
    build_fields,
    bundle_entry,
    cook_fields,
    manifest_document,
    patch_bundle_files,
    patched_document,
    staging_document,
    staging_entry,
    to_json_bytes,
)
from stages.publishing.output import publish_build

SPEC = StageSpec(
    name="manifest",
    # 3: patches the last manifest's bytes; 4: its output keeps bundle files as rows; 5: and
    # names the documents by the digest of the unit's result instead of holding their bytes
    version=5,
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


@record
class BuildOutput(NamedTuple):
    """Everything `publish` puts in the output folder: the bundles' and the documents' bytes by
    the digests of the results holding them (a manifest is 24 MB at 100,000 assets: held here
    too, every edit encoded, hashed and wrote it again, and read the last one back to say what
    changed)."""

    # [name, file, size, raw_hash] per bundle, sorted by name: lists, which msgpack encodes and
    # decodes in C (a record each costs a Python call: 0.1 s per run at 6,555 bundles)
    bundle_files: list
    archived: dict  # bundle name → digest of its stored ArchivedBundle (loaded on demand)
    link_xml: bytes
    documents: str  # digest of the unit's stored Documents (manifest.json, staging.json)


@record
class Documents(NamedTuple):
    """The manifest's and the staging manifest's bytes: the unit's payload, made in the driver
    (the patch needs the last ones), and its result as it is."""

    manifest: bytes
    staging: bytes


@record
class PatchedBundles(NamedTuple):
    """The state of a plan `update` made by patching the last manifest: the bundles whose files
    changed, which `finish` patches in the last output the same way."""

    names: list[str]  # sorted


class PublishedBundle(NamedTuple):
    """A bundle as `publish_build` sees it."""

    name: str
    file: str
    size: int
    raw_hash: str


def published_row(bundle_file) -> list:
    """A BundleFile as BuildOutput keeps it."""
    return [bundle_file.name, bundle_file.file, bundle_file.size, bundle_file.raw_hash]


def stage_versions() -> dict[str, int]:
    from orchestrator import registered_stages

    return {stage.name: stage.spec.version for stage in registered_stages()}


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
    """When only bundle files changed (an asset cooked again), the last manifest's bytes are
    patched where they name those files, and the staging document made from the last one;
    when a few bundles and assets changed, the last document is patched by entry
    (`_entries_patched`); anything else plans the documents again."""
    files = changes.inputs["bundle_files"]
    others = ("cooklist", "cooked_types", "bundles", "asset_bundles", "packing")
    if files.removed or any(changes.inputs[name] for name in others):
        return _entries_patched(ctx, inputs, changes)
    last: Documents = ctx.load_result(ctx.previous["manifest"].documents)
    changed = {name: inputs["bundle_files"][name] for name in sorted(files.changed)}
    manifest = patch_bundle_files(last.manifest, changed)
    if manifest is None:
        return None
    staging = orjson.loads(last.staging)
    ufs = {entry["bundle"]: entry for entry in staging["ufs"]}
    ufs.update((name, staging_entry(bundle_file)) for name, bundle_file in changed.items())
    staging["ufs"] = sorted(ufs.values(), key=lambda entry: entry["file"])
    return _plan(manifest, staging, PatchedBundles(sorted(changed)))


#: More entries changed than this (bundles and assets) and the manifest is made again.
PATCHED_ENTRIES = 1000


def _entries_patched(ctx, inputs: dict, changes: StageChanges) -> Plan | None:
    """When a few bundles and assets changed (an asset added to a bundle or gone from one),
    the last manifest parsed back with their entries made again and the fields read of the
    whole cook list set anew, rather than every entry read and made again (an asset added at
    100,000: 0.2 s instead of 0.6 s)."""
    keyed = ("bundles", "bundle_files", "asset_bundles", "cooked_types")
    if any(changes.inputs[name].everything for name in keyed):
        return None
    named = set(changes.inputs["bundles"].touched) | set(changes.inputs["bundle_files"].touched)
    ids = set(changes.inputs["asset_bundles"].touched) | set(changes.inputs["cooked_types"].touched)
    if len(named) + len(ids) > PATCHED_ENTRIES:
        return None
    bundles, files = inputs["bundles"], inputs["bundle_files"]
    held, types = inputs["asset_bundles"], inputs["cooked_types"]
    if any(name in bundles and name not in files for name in named):
        return None  # made afresh, the document fails as it does
    if any(a in held and a not in types for a in ids):
        return None
    last: Documents = ctx.load_result(ctx.previous["manifest"].documents)
    info = inputs["packing"]
    document = patched_document(
        last.manifest,
        {n: bundle_entry(bundles[n], files[n]) if n in bundles else None for n in sorted(named)},
        {a: asset_entry(types[a], held[a]) if a in held else None for a in sorted(ids)},
        {
            "build": build_fields(info, ctx.section("platform"), stage_versions()),
            **cook_fields(inputs["cooklist"], set(types), info),
        },
    )
    if document is None:
        return None
    return _plan(document, staging_document(files))


def _plan(manifest: dict | bytes, staging: dict, state: PatchedBundles | None = None) -> Plan:
    """One unit holding the documents' bytes, keyed by them: a patched manifest and one made
    afresh with the same content are the same unit."""
    documents = Documents(
        manifest if isinstance(manifest, bytes) else to_json_bytes(manifest),
        to_json_bytes(staging),
    )
    key = {"manifest": digest_bytes(documents.manifest), "staging": digest_bytes(documents.staging)}
    return Plan(units=[Unit(id="manifest", payload=documents, key=key)], state=state)


def run(documents: Documents, shared, reader) -> Documents:
    """The documents' bytes, as planned."""
    return documents


def finish(ctx, inputs: dict, results) -> dict:
    patched = results.plan.state
    if isinstance(patched, PatchedBundles):  # only these bundles' files changed since the last
        previous: BuildOutput = ctx.previous["manifest"]
        rows = {row[0]: row for row in previous.bundle_files}
        archived = dict(previous.archived)
        for name in patched.names:
            rows[name] = published_row(inputs["bundle_files"][name])
            archived[name] = inputs["archived"][name]
        files = [rows[name] for name in sorted(rows)]
    else:
        files = [published_row(record) for _, record in sorted(inputs["bundle_files"].items())]
        archived = dict(inputs["archived"].items())
    documents = results.digest("manifest")
    return {"manifest": BuildOutput(files, archived, inputs["link_xml"], documents)}


def publish(ctx, outputs: dict) -> None:
    """Bundles first, then link.xml and staging.json, the manifest last, then stale removal."""
    out: BuildOutput = outputs["manifest"]
    documents: Documents = ctx.load_result(out.documents)
    done = publish_build(
        ctx,
        [PublishedBundle(*row) for row in out.bundle_files],
        lambda name: ctx.load_result(out.archived[name]).data,
        {LINK_XML: out.link_xml, STAGING: documents.staging},
        documents.manifest,
    )
    if getattr(ctx, "log", None) is not None:
        ctx.log.info("manifest.published", written=len(done.written), removed=len(done.removed))


def summary(build, outputs) -> list[str]:
    manifest = build.output_dir / MANIFEST
    return [f"manifest: {manifest}"] if manifest.exists() else []
