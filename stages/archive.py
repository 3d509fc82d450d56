"""Stage `archive`: per bundle, compress every entry (none | lz4 | zstd) and take the CRC32.

Compression is per entry, so an archived bundle is still readable at random; the codec and level
are recorded in the header. Incrementally, only the bundles written again are archived again.
"""

from __future__ import annotations

from typing import NamedTuple

from orchestrator import (
    ConfigError,
    Plan,
    StageChanges,
    StageSpec,
    Unit,
    map_finish,
    map_update,
    record,
)
from stages.bundlefile.format import CODECS, crc32, recompress

SPEC = StageSpec(
    name="archive",
    version=2,  # 2: keyed by bundle
    inputs=("written",),
    outputs=("archived",),
    keyed=("archived",),
    config_keys=("archive",),
    description="compressed bundles and their CRC32",
)


@record
class ArchiveJob(NamedTuple):
    """One unit's work: a written bundle (the digest of its stored bytes), recompressed. Its
    fields are also the unit's key."""

    written: str
    compression: str  # none | lz4 | zstd
    level: int


@record
class ArchivedBundle(NamedTuple):
    data: bytes
    crc32: int


def plan(ctx, inputs: dict) -> Plan:
    return Plan(units=_units(ctx, inputs["written"], list(inputs["written"])))


def update(ctx, inputs: dict, changes: StageChanges) -> Plan:
    return map_update(
        changes.inputs["written"],
        lambda names: _units(ctx, inputs["written"], names),
        "written[{key}] changed",
    )


def _units(ctx, written, names: list[str]) -> list[Unit]:
    options = ctx.section("archive")
    codec, level = options.get("compression", "zstd"), int(options.get("level", 3))
    if codec not in CODECS:
        raise ConfigError(
            f"unknown compression {codec!r} (none | lz4 | zstd)", key="archive.compression"
        )
    jobs = {name: ArchiveJob(written[name], codec, level) for name in names}
    return [
        Unit(id=name, payload=job, key=job._asdict(), blobs=(job.written,))
        for name, job in jobs.items()
    ]


def run(job: ArchiveJob, shared, reader) -> ArchivedBundle:
    data = recompress(reader.blob(job.written), job.compression, job.level)
    return ArchivedBundle(data, crc32(data))


def finish(ctx, inputs: dict, results) -> dict:
    """`archived`: bundle → the digest of its stored ArchivedBundle.

    Only the digest travels: publishing loads (`ctx.load_result`) just the bundles whose file
    changed.
    """
    return {"archived": map_finish(results, results, results.digest)}
