"""The bundle file: layout, determinism, random access, hashes, inspect."""

from __future__ import annotations

import io
import struct

import pytest

from orchestrator.errors import ConfigError, ProjectError
from orchestrator.hashing import digest_bytes
from stages.bundlefile.format import (
    HEADER_SIZE,
    MAGIC,
    BundleFormatError,
    BundleReader,
    Entry,
    build_bundle,
    content_hash,
    iter_entries,
    read_toc,
    recompress,
)
from stages.bundlefile.inspect import extract_entry, format_listing, inspect_bundle

ENTRIES = [
    Entry("e5ce0940-f689-404d-968f-775317804069", "Test/Wall", b"wall " * 200),
    Entry("Worlds/Town.iworld", "Town.iworld", b"<World/>"),
    Entry("14fa3a0-empty", "Test/Empty", b""),
    Entry("9dc97d9a-64b5-49fb-acfa-c1704ebc2ef2", "Common/Hole_tex", bytes(range(256)) * 8),
]


@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
def test_round_trip_every_codec(codec):
    """Every entry comes back byte for byte, whatever the codec."""
    data = build_bundle(ENTRIES, codec, 3)
    assert {e.id: e.payload for e in iter_entries(data)} == {e.id: e.payload for e in ENTRIES}


def test_header_and_entry_id_order():
    """Magic and version lead the file; the TOC and the payloads are in entry-id order."""
    data = build_bundle(ENTRIES)
    assert data[:8] == MAGIC and struct.unpack_from("<I", data, 8)[0] == 1
    header, toc = read_toc(data)
    assert [row.id for row in toc] == sorted(e.id for e in ENTRIES)
    assert [row.offset for row in toc] == sorted(row.offset for row in toc)
    assert header.data_offset == HEADER_SIZE + header.toc_size
    wall = next(row for row in toc if row.name == "Test/Wall")
    assert wall.size == 1000 and wall.hash == digest_bytes(b"wall " * 200)


@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
def test_bytes_do_not_depend_on_input_order(codec):
    """The same entries in any order (and at any time) give identical bytes."""
    assert build_bundle(ENTRIES, codec, 5) == build_bundle(list(reversed(ENTRIES)), codec, 5)


def test_random_access_reads_only_the_entry_asked_for():
    """An entry is readable after another entry's bytes were destroyed: reads are per entry."""
    data = bytearray(build_bundle(ENTRIES, "zstd", 3))
    header, toc = read_toc(bytes(data))
    wall = next(row for row in toc if row.name == "Test/Wall")
    start = header.data_offset + wall.offset
    data[start : start + wall.stored_size] = b"\xff" * wall.stored_size
    reader = BundleReader(io.BytesIO(bytes(data)))
    assert reader.read("Worlds/Town.iworld") == b"<World/>"
    assert reader.read("Common/Hole_tex") == bytes(range(256)) * 8  # found by name
    with pytest.raises(BundleFormatError):
        reader.read("Test/Wall")


def test_content_hash_ignores_codec_but_not_payloads():
    """Recompressing keeps the content hash; changing one payload changes it."""
    plain = build_bundle(ENTRIES)
    hashes = {
        content_hash(read_toc(recompress(plain, codec, 3))[1]) for codec in ("none", "lz4", "zstd")
    }
    assert len(hashes) == 1
    changed = build_bundle(ENTRIES[:-1] + [Entry(ENTRIES[-1].id, ENTRIES[-1].name, b"other")])
    assert content_hash(read_toc(changed)[1]) not in hashes


def test_recompress_none_is_identity():
    """Archiving with compression none leaves the written bundle byte-identical."""
    plain = build_bundle(ENTRIES)
    assert recompress(plain, "none", 9) == plain


@pytest.mark.parametrize("damage", ["magic", "version", "truncate"])
def test_damaged_bundles_are_refused(damage):
    data = bytearray(build_bundle(ENTRIES, "lz4", 1))
    if damage == "magic":
        data[0:8] = b"NOTABNDL"
    elif damage == "version":
        data[8:12] = struct.pack("<I", 99)
    else:
        data = data[: HEADER_SIZE + 10]
    with pytest.raises(BundleFormatError):
        read_toc(bytes(data))


def test_duplicate_ids_are_refused():
    with pytest.raises(BundleFormatError):
        build_bundle([Entry("a", "x", b"1"), Entry("a", "y", b"2")])


def test_inspect_lists_and_extracts(tmp_path):
    """`inspect` lists every entry and extracts one by id or by name."""
    path = tmp_path / "ui_bundle"
    path.write_bytes(build_bundle(ENTRIES, "zstd", 3))
    description = inspect_bundle(path)
    assert description["compression"] == "zstd" and description["format_version"] == 1
    assert [e["id"] for e in description["entries"]] == sorted(e.id for e in ENTRIES)
    assert "Common/Hole_tex" in format_listing(description)
    row = extract_entry(path, "Test/Wall", tmp_path / "wall.bin")
    assert row.id == "e5ce0940-f689-404d-968f-775317804069"
    assert (tmp_path / "wall.bin").read_bytes() == b"wall " * 200
    extract_entry(path, "Worlds/Town.iworld", tmp_path / "town.xml")
    assert (tmp_path / "town.xml").read_bytes() == b"<World/>"
    with pytest.raises(ConfigError, match="no entry"):
        extract_entry(path, "nope", tmp_path / "x")
    (tmp_path / "junk").write_bytes(b"garbage" * 10)
    with pytest.raises(ProjectError):
        inspect_bundle(tmp_path / "junk")


def test_ambiguous_entry_name_asks_for_the_id(tmp_path):
    path = tmp_path / "b"
    path.write_bytes(build_bundle([Entry("a", "same", b"1"), Entry("b", "same", b"2")]))
    with pytest.raises(ConfigError, match="entry id"):
        extract_entry(path, "same", tmp_path / "out")
    assert extract_entry(path, "b", tmp_path / "out").id == "b"
