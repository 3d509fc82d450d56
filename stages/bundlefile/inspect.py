"""`orchestrate inspect BUNDLE [--extract ENTRY --to FILE]`: list a bundle, extract one entry."""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator import ConfigError, ProjectError

from .format import BundleFormatError, BundleReader, TocEntry, content_hash, crc32


def inspect_bundle(path: str | os.PathLike) -> dict:
    """A JSON-able description of a bundle file: header, hashes, and one row per entry."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            reader = BundleReader(handle)
    except FileNotFoundError:
        raise ConfigError("bundle file not found", file=str(path)) from None
    except BundleFormatError as exc:
        raise ProjectError(str(exc), file=str(path)) from None
    data = path.read_bytes()
    return {
        "file": path.name,
        "size": len(data),
        "format_version": reader.header.version,
        "compression": reader.header.codec,
        "level": reader.header.level,
        "crc32": crc32(data),
        "content_hash": content_hash(reader.entries),
        "entries": [
            {
                "id": row.id,
                "name": row.name,
                "offset": row.offset,
                "stored_size": row.stored_size,
                "size": row.size,
                "hash": row.hash,
            }
            for row in reader.entries
        ],
    }


def format_listing(description: dict) -> str:
    """The human listing of `inspect_bundle`'s result, one entry per line."""
    lines = [
        f"{description['file']}: {len(description['entries'])} entries, "
        f"{description['size']} bytes, {description['compression']}, "
        f"format {description['format_version']}",
        f"content hash {description['content_hash']}  crc32 {description['crc32']:08x}",
    ]
    for row in description["entries"]:
        lines.append(f"  {row['size']:>10}  {row['hash'][:16]}  {row['id']}  {row['name']}")
    return "\n".join(lines)


def extract_entry(path: str | os.PathLike, entry: str, to: str | os.PathLike) -> TocEntry:
    """Write one entry's payload (found by id, or by a unique name) to the file `to`."""
    try:
        with open(path, "rb") as handle:
            reader = BundleReader(handle)
            try:
                row = reader.find(entry)
            except KeyError as exc:
                raise ConfigError(exc.args[0], file=str(path), key="--extract") from None
            payload = reader.read(row.id)
    except FileNotFoundError:
        raise ConfigError("bundle file not found", file=str(path)) from None
    except BundleFormatError as exc:
        raise ProjectError(str(exc), file=str(path)) from None
    Path(to).write_bytes(payload)
    return row
