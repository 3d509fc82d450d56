"""The bundle file format: a header, a table of contents, then one payload per entry.

Little-endian throughout; the full description is in docs/bundle-format.md. Every entry is
compressed on its own, so a reader seeks to one entry and decompresses only that (random access
survives archiving). Bytes depend only on the entries and the codec settings: no time stamps, no
absolute paths, fixed compressor parameters.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import BinaryIO, NamedTuple

import blake3
import lz4.block
import zstandard

from orchestrator import digest_bytes

MAGIC = b"ORCHBNDL"
FORMAT_VERSION = 1
CODECS = {"none": 0, "lz4": 1, "zstd": 2}
CODEC_NAMES = {number: name for name, number in CODECS.items()}

# magic, format version, codec, codec level, entry count, TOC byte size, data region offset
_HEADER = struct.Struct("<8sIIiIIQ")
# offset (in the data region), stored size, payload size, BLAKE3 of the payload (32 raw bytes)
_ENTRY_FIXED = struct.Struct("<QQQ32s")
_LENGTH = struct.Struct("<H")
HEADER_SIZE = _HEADER.size


class BundleFormatError(ValueError):
    """The bytes are not a bundle this reader understands (wrong magic, version, truncated)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One asset in a bundle, as written: its payload is separate."""

    id: str  # a GUID, or the project-relative path of a world or level
    name: str  # a human name: the virtual path of a resource, the file name of a map
    payload: bytes


@dataclass(frozen=True, slots=True)
class TocEntry:
    """One row of the table of contents."""

    id: str
    name: str
    offset: int  # from the start of the data region
    stored_size: int  # bytes in the file (compressed)
    size: int  # bytes of the payload
    hash: str  # hex BLAKE3 of the payload


@dataclass(frozen=True, slots=True)
class Header:
    version: int
    codec: str
    level: int
    count: int
    toc_size: int
    data_offset: int


# -- compression ------------------------------------------------------------------------------
def compress(data: bytes, codec: str, level: int) -> bytes:
    """One payload compressed with fixed parameters (same input, same bytes, on every machine)."""
    if not data or codec == "none":
        return data  # an empty payload is stored empty whatever the codec
    if codec == "zstd":
        # Explicit frame parameters: content size always written, no checksum or dictionary id,
        # single-threaded, so the frame does not vary with how the data was fed or the machine.
        compressor = zstandard.ZstdCompressor(
            level=level,
            write_content_size=True,
            write_checksum=False,
            write_dict_id=False,
            threads=0,
        )
        return compressor.compress(data)
    if codec == "lz4":
        # The payload size lives in the TOC, so the raw block carries no size prefix.
        if level <= 0:
            return lz4.block.compress(data, mode="default", store_size=False)
        return lz4.block.compress(
            data, mode="high_compression", compression=min(level, 12), store_size=False
        )
    raise BundleFormatError(f"unknown codec {codec!r}")


def decompress(stored: bytes, codec: str, size: int) -> bytes:
    if size == 0 or codec == "none":
        return stored
    if codec == "zstd":
        return zstandard.ZstdDecompressor().decompress(stored, max_output_size=size)
    if codec == "lz4":
        return lz4.block.decompress(stored, uncompressed_size=size)
    raise BundleFormatError(f"unknown codec {codec!r}")


# -- writing ----------------------------------------------------------------------------------
def build_bundle(entries: Iterable[Entry], codec: str = "none", level: int = 0) -> bytes:
    """Serialize entries (sorted by id here, whatever the caller's order) into bundle bytes."""
    if codec not in CODECS:
        raise BundleFormatError(f"unknown codec {codec!r}")
    ordered = sorted(entries, key=lambda e: e.id)
    ids = [e.id for e in ordered]
    if len(set(ids)) != len(ids):
        raise BundleFormatError("two entries share an id")
    toc, data = bytearray(), bytearray()
    for entry in ordered:
        stored = compress(entry.payload, codec, level)
        toc += _pack_text(entry.id) + _pack_text(entry.name)
        toc += _ENTRY_FIXED.pack(
            len(data), len(stored), len(entry.payload), blake3.blake3(entry.payload).digest()
        )
        data += stored
    header = _HEADER.pack(
        MAGIC,
        FORMAT_VERSION,
        CODECS[codec],
        level if codec != "none" else 0,
        len(ordered),
        len(toc),
        HEADER_SIZE + len(toc),
    )
    return bytes(header) + bytes(toc) + bytes(data)


def recompress(bundle: bytes, codec: str, level: int) -> bytes:
    """The same bundle with every entry stored under another codec (what `archive` does)."""
    return build_bundle(iter_entries(bundle), codec, level)


def _pack_text(text: str) -> bytes:
    raw = text.encode("utf-8")
    if len(raw) > 0xFFFF:
        raise BundleFormatError(f"entry id or name longer than 65535 bytes: {text[:60]}…")
    return _LENGTH.pack(len(raw)) + raw


# -- reading ----------------------------------------------------------------------------------
def read_header(data: bytes) -> Header:
    if len(data) < HEADER_SIZE:
        raise BundleFormatError("truncated: shorter than a bundle header")
    magic, version, codec, level, count, toc_size, data_offset = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise BundleFormatError("not a bundle (bad magic)")
    if version != FORMAT_VERSION:
        raise BundleFormatError(
            f"bundle format version {version}; this reader knows {FORMAT_VERSION}"
        )
    if codec not in CODEC_NAMES or data_offset != HEADER_SIZE + toc_size:
        raise BundleFormatError("corrupt bundle header")
    return Header(version, CODEC_NAMES[codec], level, count, toc_size, data_offset)


class Toc(NamedTuple):
    header: Header
    entries: list[TocEntry]


def read_toc(data: bytes) -> Toc:
    """Header and table of contents from the first `header.data_offset` bytes of a bundle."""
    header = read_header(data)
    if len(data) < header.data_offset:
        raise BundleFormatError("truncated table of contents")
    entries, pos = [], HEADER_SIZE
    try:
        for _ in range(header.count):
            entry_id, pos = _unpack_text(data, pos)
            name, pos = _unpack_text(data, pos)
            offset, stored, size, digest = _ENTRY_FIXED.unpack_from(data, pos)
            pos += _ENTRY_FIXED.size
            entries.append(TocEntry(entry_id, name, offset, stored, size, digest.hex()))
    except (struct.error, UnicodeDecodeError) as exc:
        raise BundleFormatError(f"corrupt table of contents: {exc}") from None
    if pos != header.data_offset:
        raise BundleFormatError("table of contents size does not match the header")
    return Toc(header, entries)


def _unpack_text(data: bytes, pos: int) -> tuple[str, int]:
    (length,) = _LENGTH.unpack_from(data, pos)
    pos += _LENGTH.size
    if pos + length > len(data):
        raise struct.error("text runs past the table of contents")
    return data[pos : pos + length].decode("utf-8"), pos + length


def iter_entries(bundle: bytes) -> Iterable[Entry]:
    """Every entry of in-memory bundle bytes, payloads decompressed and verified."""
    header, toc = read_toc(bundle)
    for row in toc:
        start = header.data_offset + row.offset
        yield Entry(
            row.id, row.name, _payload(bundle[start : start + row.stored_size], header, row)
        )


def _payload(stored: bytes, header: Header, row: TocEntry) -> bytes:
    if len(stored) != row.stored_size:
        raise BundleFormatError(f"entry {row.id} is truncated")
    try:
        payload = decompress(stored, header.codec, row.size)
    except (zstandard.ZstdError, lz4.block.LZ4BlockError) as exc:
        raise BundleFormatError(f"entry {row.id} does not decompress: {exc}") from None
    if len(payload) != row.size or digest_bytes(payload) != row.hash:
        raise BundleFormatError(f"entry {row.id} does not match its content hash")
    return payload


def content_hash(toc: Iterable[TocEntry]) -> str:
    """BLAKE3 over the entries' ids, names, sizes and payload hashes, in TOC order.

    It covers the payloads (through their hashes) and not the header, the codec or the offsets,
    so recompressing a bundle or bumping the format version keeps it.
    """
    hasher = blake3.blake3()
    for row in toc:
        hasher.update(_pack_text(row.id) + _pack_text(row.name))
        hasher.update(struct.pack("<Q", row.size) + bytes.fromhex(row.hash))
    return hasher.hexdigest()


def crc32(data: bytes) -> int:
    """CRC32 of a whole file (unsigned), as the manifest records it."""
    return zlib.crc32(data) & 0xFFFFFFFF


class BundleReader:
    """Random access to a bundle file: the TOC is read once, each entry with one seek."""

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle
        prefix = handle.read(HEADER_SIZE)
        header = read_header(prefix)
        prefix += handle.read(header.toc_size)
        self.header, self.entries = read_toc(prefix)
        self._by_id = {row.id: row for row in self.entries}

    def find(self, key: str) -> TocEntry:
        """The entry with this id, else the only entry with this name; KeyError otherwise."""
        if key in self._by_id:
            return self._by_id[key]
        named = [row for row in self.entries if row.name == key]
        if len(named) == 1:
            return named[0]
        if named:
            raise KeyError(f"{len(named)} entries are named {key!r}; give the entry id")
        raise KeyError(f"no entry {key!r} in the bundle")

    def read(self, key: str) -> bytes:
        """One entry's payload, decompressed and checked against its content hash."""
        row = self.find(key)
        self._handle.seek(self.header.data_offset + row.offset)
        return _payload(self._handle.read(row.stored_size), self.header, row)
