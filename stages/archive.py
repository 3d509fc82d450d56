"""Stage `archive`: per bundle, compress every entry (none | lz4 | zstd) and take the CRC32.

Compression is per entry, so an archived bundle is still readable at random; the codec and level
are recorded in the header.
"""

from __future__ import annotations

from typing import NamedTuple

from orchestrator.errors import ConfigError
from orchestrator.typing import Plan, StageSpec, Unit
from stages.bundlefile.format import CODECS, crc32, recompress

SPEC = StageSpec(
    name="archive",
    version=1,
    inputs=("written",),
    outputs=("archived",),
    config_keys=("archive",),
    description="compressed bundles and their CRC32",
)


class ArchivedBundle(NamedTuple):
    data: bytes
    crc32: int


def plan(ctx, inputs: dict) -> Plan:
    options = ctx.section("archive")
    codec, level = options.get("compression", "zstd"), int(options.get("level", 3))
    if codec not in CODECS:
        raise ConfigError(
            f"unknown compression {codec!r} (none | lz4 | zstd)", key="archive.compression"
        )
    units = [
        Unit(
            id=name,
            payload=(written["digest"], codec, level),
            key={"written": written["digest"], "compression": codec, "level": level},
            blobs=(written["digest"],),
        )
        for name, written in inputs["written"].items()
    ]
    return Plan(units=units)


def run(payload, shared, reader) -> ArchivedBundle:
    digest, codec, level = payload
    data = recompress(reader.blob(digest), codec, level)
    return ArchivedBundle(data, crc32(data))


def finish(ctx, inputs: dict, results) -> dict:
    """`archived`: bundle → {"digest": of the stored ArchivedBundle}.

    Only the digest travels: publishing loads (`ctx.load_result`) just the bundles whose file
    changed.
    """
    return {"archived": {name: {"digest": results.digest(name)} for name in inputs["written"]}}
