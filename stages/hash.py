"""Stage `hash`: per bundle, the content hash (entries), the raw hash (file) and the file name.

Both hashes are hex BLAKE3 (`orchestrator.hashing`). With `hash.append_hash: true` the file is
named `<bundle>_<first 32 hex of the content hash>` (SBP's AppendBundleHash).
"""

from __future__ import annotations

from typing import NamedTuple

from orchestrator import (
    Plan,
    StageChanges,
    StageSpec,
    Unit,
    digest_bytes,
    map_finish,
    map_update,
    record,
)
from stages.bundlefile.format import content_hash, read_toc

SPEC = StageSpec(
    name="hash",
    version=2,  # 2: keyed by bundle
    inputs=("archived",),
    outputs=("bundle_files",),
    keyed=("bundle_files",),
    config_keys=("hash",),
    description="content and raw hashes; hashed file names",
)

HASH_SUFFIX_LEN = 32


@record
class HashJob(NamedTuple):
    """One unit's work: an archived bundle (the digest of its stored ArchivedBundle), hashed
    and named. Its fields are also the unit's key."""

    bundle: str
    archived: str
    append_hash: bool


@record
class BundleFile(NamedTuple):
    """What the manifest says about one bundle's file; `blob` is the stored ArchivedBundle."""

    name: str
    file: str  # relative to the output folder, `/`-separated
    size: int
    crc32: int
    content_hash: str
    raw_hash: str
    entries: int
    blob: str


def bundle_file_name(bundle: str, content: str, append_hash: bool) -> str:
    return f"{bundle}_{content[:HASH_SUFFIX_LEN]}" if append_hash else bundle


def plan(ctx, inputs: dict) -> Plan:
    return Plan(units=_units(ctx, inputs["archived"], list(inputs["archived"])))


def update(ctx, inputs: dict, changes: StageChanges) -> Plan:
    return map_update(
        changes.inputs["archived"],
        lambda names: _units(ctx, inputs["archived"], names),
        "archived[{key}] changed",
    )


def _units(ctx, archived, names: list[str]) -> list[Unit]:
    append = bool(ctx.section("hash").get("append_hash", False))
    jobs = [HashJob(name, archived[name], append) for name in names]
    return [
        Unit(id=job.bundle, payload=job, key=job._asdict(), blobs=(job.archived,)) for job in jobs
    ]


def run(job: HashJob, shared, reader) -> BundleFile:
    archived = reader.blob(job.archived)
    toc = read_toc(archived.data).entries
    content = content_hash(toc)
    return BundleFile(
        job.bundle,
        bundle_file_name(job.bundle, content, job.append_hash),
        len(archived.data),
        archived.crc32,
        content,
        digest_bytes(archived.data),
        len(toc),
        job.archived,
    )


def finish(ctx, inputs: dict, results) -> dict:
    """`bundle_files`: bundle → BundleFile (small records; the bytes stay in the store)."""
    return {"bundle_files": map_finish(results, results, results.__getitem__)}
