"""Stages write/archive/hash as pure units: compression, CRC32, hashes, hashed file names."""

from __future__ import annotations

import io
import zlib
from types import SimpleNamespace

import pytest
import zstandard

from orchestrator.codec import dumps
from orchestrator.errors import ConfigError
from orchestrator.files.reads import Reader
from orchestrator.hashing import digest_bytes
from orchestrator.testing import run_stage
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
    entries = sorted(
        write.EntrySource(asset_id, f"name of {asset_id}", digest)
        for asset_id, digest in zip(PAYLOADS, digests)
    )
    return write.run(write.BundleJob("b", tuple(entries)), None, reader)


@pytest.mark.parametrize(
    "codec,level", [("none", 0), ("lz4", 0), ("lz4", 9), ("zstd", 1), ("zstd", 19)]
)
def test_archive_compresses_per_entry_and_takes_crc32(codec, level):
    """The archived bundle has the codec in its header, every entry readable, and its CRC32."""
    written = _written()
    reader, (digest,) = _blob_reader(written)
    archived = archive.run(archive.ArchiveJob(digest, codec, level), None, reader)
    assert archived.crc32 == zlib.crc32(archived.data) & 0xFFFFFFFF
    header, _ = read_toc(archived.data)
    assert (header.codec, header.level) == (codec, level if codec != "none" else 0)
    bundle = BundleReader(io.BytesIO(archived.data))
    assert {row.id: bundle.read(row.id) for row in bundle.entries} == PAYLOADS
    if codec != "none":
        assert len(archived.data) < len(written)
    assert (
        archive.run(archive.ArchiveJob(digest, codec, level), None, reader) == archived
    )  # deterministic


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
    archived = archive.run(archive.ArchiveJob(digest, "zstd", 3), None, reader)
    reader, (adigest,) = _blob_reader(archived)
    record = hash_stage.run(hash_stage.HashJob("maps/Town", adigest, append), None, reader)
    assert record.raw_hash == digest_bytes(archived.data)
    assert record.size == len(archived.data) and record.crc32 == archived.crc32
    assert record.file == (f"maps/Town_{record.content_hash[:32]}" if append else "maps/Town")
    # The same entries compressed differently keep the content hash (and so the file name).
    reader, (other,) = _blob_reader(
        archive.run(archive.ArchiveJob(digest, "lz4", 1), None, _blob_reader(_written())[0])
    )
    assert (
        hash_stage.run(hash_stage.HashJob("maps/Town", other, append), None, reader).content_hash
        == record.content_hash
    )


def _write_inputs(digest: str) -> dict:
    asset = SimpleNamespace(kind="resource", virtual_paths=("UI/Icon",), name="Icon", id="g")
    return {
        "assets": {"g": asset},
        "bundles": {"ui": SimpleNamespace(assets=("g",))},
        "asset_bundles": {"g": ("ui",)},
        "cooked": {"g": digest},
    }


def test_write_keys_on_cooked_digests_only():
    """The write unit's key is the entries (id, name, cooked digest): same cook, same key."""
    plan1, plan2, plan3 = (write.plan(None, _write_inputs(d)) for d in ("d1", "d1", "d2"))
    assert plan1.units[0].key == plan2.units[0].key != plan3.units[0].key
    assert plan1.units[0].blobs == ("d1",)
    job = plan1.units[0].payload
    assert (job.bundle, job.entries) == ("ui", (write.EntrySource("g", "UI/Icon", "d1"),))
    assert plan1.units[0].key == {"bundle": "ui", "entries": job.entries}


def test_write_update_rewrites_the_bundles_holding_an_asset_cooked_again():
    """An asset cooked again reaches exactly the bundles `asset_bundles` says hold it."""
    from orchestrator.keyed import Changes
    from orchestrator.typing import StageChanges

    inputs = _write_inputs("d2")
    inputs["bundles"]["other"] = SimpleNamespace(assets=())
    nothing = Changes(frozenset(), frozenset())
    changes = StageChanges(
        {
            "bundles": nothing,
            "assets": nothing,
            "asset_bundles": nothing,
            "cooked": Changes(frozenset({"g"}), frozenset()),
        },
        [],
        None,
    )
    plan = write.update(None, inputs, changes)
    assert [unit.id for unit in plan.units] == ["ui"] and plan.reasons["ui"] == "cooked[g] changed"


def test_archive_stage_keys_each_bundle_on_its_bytes_and_codec():
    """The archive stage on its own: one unit per written bundle, keyed on the written digest
    and the codec, its output naming the stored archived bundle."""
    written = _written()
    digest = digest_bytes(dumps(written))
    run = run_stage(
        archive,
        inputs={"written": {"ui": digest}},
        blobs={digest: written},
        settings={"archive": {"compression": "lz4"}},
    )
    (unit,) = run.plan.units
    assert unit.key == {"written": digest, "compression": "lz4", "level": 3}
    archived = run.context.stored[run.outputs["archived"]["ui"]]
    assert read_toc(archived.data)[0].codec == "lz4"
    assert {
        row.id: BundleReader(io.BytesIO(archived.data)).read(row.id)
        for row in BundleReader(io.BytesIO(archived.data)).entries
    } == PAYLOADS


def test_hash_stage_names_files_by_content_with_append_hash():
    """The hash stage on its own: `hash.append_hash` names each bundle file after its content."""
    written = _written()
    archived = archive.run(
        archive.ArchiveJob(digest_bytes(dumps(written)), "zstd", 3), None, _blob_reader(written)[0]
    )
    digest = digest_bytes(dumps(archived))
    run = run_stage(
        hash_stage,
        inputs={"archived": {"chars/Hero": digest}},
        blobs={digest: archived},
        settings={"hash": {"append_hash": True}},
    )
    record = run.outputs["bundle_files"]["chars/Hero"]
    assert record.file == f"chars/Hero_{record.content_hash[:32]}"
    assert record.raw_hash == digest_bytes(archived.data) and record.blob == digest
