"""Stages write/archive/hash as pure units: compression, CRC32, hashes, hashed file names."""

from __future__ import annotations

import io
import zlib
from types import SimpleNamespace

import pytest
import zstandard

from orchestrator.errors import ConfigError
from orchestrator.hashing import digest_bytes, dumps
from orchestrator.reads import Reader
from stages import archive, write
from stages import hash as hash_stage
from stages.bundlefile.format import BundleReader, compress, read_toc
from stages.cook import CookedAsset

PAYLOADS = {"b-guid": b"texture " * 500, "a-guid": b"material", "Worlds/W.iworld": b"<World/>"}


def _blob_reader(*values):
    blobs = {digest_bytes(dumps(v)): v for v in values}
    return Reader("/nonexistent", disk=False, blobs=blobs), list(blobs)


def _written():
    cooked = [CookedAsset(digest_bytes(p), len(p), p) for p in PAYLOADS.values()]
    reader, digests = _blob_reader(*cooked)
    entries = tuple(
        sorted(
            (asset_id, f"name of {asset_id}", digest) for asset_id, digest in zip(PAYLOADS, digests)
        )
    )
    return write.run(entries, None, reader)


@pytest.mark.parametrize(
    "codec,level", [("none", 0), ("lz4", 0), ("lz4", 9), ("zstd", 1), ("zstd", 19)]
)
def test_archive_compresses_per_entry_and_takes_crc32(codec, level):
    """The archived bundle has the codec in its header, every entry readable, and its CRC32."""
    written = _written()
    reader, (digest,) = _blob_reader(written)
    archived = archive.run((digest, codec, level), None, reader)
    assert archived.crc32 == zlib.crc32(archived.data) & 0xFFFFFFFF
    header, _ = read_toc(archived.data)
    assert (header.codec, header.level) == (codec, level if codec != "none" else 0)
    bundle = BundleReader(io.BytesIO(archived.data))
    assert {row.id: bundle.read(row.id) for row in bundle.entries} == PAYLOADS
    if codec != "none":
        assert len(archived.data) < len(written)
    assert archive.run((digest, codec, level), None, reader) == archived  # deterministic


def test_zstd_frames_carry_their_content_size():
    """Fixed zstd parameters: the content size is always in the frame, no checksum."""
    frame = compress(b"x" * 10000, "zstd", 3)
    params = zstandard.get_frame_parameters(frame)
    assert params.content_size == 10000 and not params.has_checksum


def test_archive_plan_refuses_unknown_compression():
    ctx = SimpleNamespace(section=lambda name: {"compression": "brotli", "level": 3})
    with pytest.raises(ConfigError, match="brotli"):
        archive.plan(ctx, {"written": {"ui": {"digest": "0" * 64}}})


@pytest.mark.parametrize("append", [False, True])
def test_hash_names_the_file_after_the_content_hash(append):
    """Raw hash covers the file, content hash the entries; append_hash suffixes 32 hex."""
    reader, (digest,) = _blob_reader(_written())
    archived = archive.run((digest, "zstd", 3), None, reader)
    reader, (adigest,) = _blob_reader(archived)
    record = hash_stage.run(("maps/Town", adigest, append), None, reader)
    assert record.raw_hash == digest_bytes(archived.data)
    assert record.size == len(archived.data) and record.crc32 == archived.crc32
    assert record.file == (f"maps/Town_{record.content_hash[:32]}" if append else "maps/Town")
    # The same entries compressed differently keep the content hash (and so the file name).
    reader, (other,) = _blob_reader(
        archive.run((digest, "lz4", 1), None, _blob_reader(_written())[0])
    )
    assert (
        hash_stage.run(("maps/Town", other, append), None, reader).content_hash
        == record.content_hash
    )


def test_write_keys_on_cooked_digests_only():
    """The write unit's key is the entries (id, name, cooked digest): same cook, same key."""
    source = SimpleNamespace(
        assets={
            "g": SimpleNamespace(kind="resource", virtual_paths=("UI/Icon",), name="Icon", id="g")
        }
    )
    bundles = SimpleNamespace(bundles={"ui": SimpleNamespace(assets=("g",))})
    plan1 = write.plan(
        None, {"source": source, "bundles": bundles, "cooked": {"g": {"digest": "d1"}}}
    )
    plan2 = write.plan(
        None, {"source": source, "bundles": bundles, "cooked": {"g": {"digest": "d1"}}}
    )
    plan3 = write.plan(
        None, {"source": source, "bundles": bundles, "cooked": {"g": {"digest": "d2"}}}
    )
    assert plan1.units[0].key == plan2.units[0].key != plan3.units[0].key
    assert plan1.units[0].blobs == ("d1",)
    assert plan1.units[0].payload == (("g", "UI/Icon", "d1"),)
