"""The build manifest and the staging manifest as documents and bytes, and the patch of a
manifest whose only change is some bundles' files (an asset cooked again).

Both documents are written by `to_json_bytes`: sorted keys, two-space indents, one key per line.
That fixed shape is what lets `patch_bundle_files` replace a bundle's file fields in the last
manifest's bytes instead of parsing and writing 24 MB again at 100,000 assets, and what lets
`named_bundle_files` list the files a manifest names without parsing it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import NamedTuple

import orjson

import orchestrator

FORMAT = 1
MANIFEST = "manifest.json"
STAGING = "staging.json"
LINK_XML = "link.xml"
#: More changed bundles than this and the manifest is made again (each patch scans for its
#: entry; past a few hundred a fresh document is cheaper).
PATCH_LIMIT = 256

BUNDLES_OPEN = b'\n  "bundles": {\n'
BUNDLES_CLOSE = b"\n  }"
ENTRY_CLOSE = b"\n    }"  # a bundle's entry ends at four spaces' indent
FILE_LINE = re.compile(rb'\n      "file": ("(?:[^"\\]|\\.)*"),?\n')


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
    entries = {
        name: bundle_entry(bundle, bundle_files[name]) for name, bundle in sorted(bundles.items())
    }
    types = dict(cooked_types.items())
    return {
        "format": FORMAT,
        "build": build_fields(info, platform, versions),
        "bundles": entries,
        "assets": {a: asset_entry(types[a], names) for a, names in sorted(asset_bundles.items())},
        **cook_fields(cooklist, types, info),
        "loose_files": [LINK_XML, STAGING],
    }


def bundle_entry(bundle, record) -> dict:
    """What the manifest says of a bundle (its Bundle and its BundleFile)."""
    entry = {
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
        entry["priority"] = bundle.priority
        entry["redirects"] = {r.asset: r.bundle for r in bundle.redirects}
        entry.update(bundle.source_fields)  # e.g. Cocos `paths`, `scenes`
    return entry


def asset_entry(asset_type: str, bundles) -> dict:
    return {"type": asset_type, "bundles": list(bundles)}


def build_fields(info, platform: str, versions: dict[str, int]) -> dict:
    return {
        "platform": platform,
        "tool_version": orchestrator.__version__,
        "stage_versions": dict(sorted(versions.items())),
        "shared_dependencies": info.policy,
    }


def cook_fields(cooklist, cooked, info) -> dict:
    """The cook list (of the assets `cooked`: a container of ids), what it misses, and the
    bundle cycles."""
    return {
        "cooklist": [a for a in cooklist.cooked if a in cooked],
        "missing": sorted(cooklist.missing),
        "bundle_cycles": [list(c) for c in info.cycles],
    }


def patched_document(
    manifest: bytes,
    bundles: Mapping[str, dict | None],
    assets: Mapping[str, dict | None],
    fields: dict,
) -> dict | None:
    """The document of the last `manifest` (bytes) with some bundles' entries and some assets'
    replaced (name → entry, None: gone) and the top-level `fields` (the build's, the cook
    list's) set: the document `manifest_document` makes when only those changed. None when the
    bytes do not parse back."""
    try:
        document = orjson.loads(manifest)
    except orjson.JSONDecodeError:
        return None
    for key, changed in (("bundles", bundles), ("assets", assets)):
        entries = document[key]
        for name, entry in changed.items():
            if entry is None:
                entries.pop(name, None)
            else:
                entries[name] = entry
    document.update(fields)
    return document


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


def patch_bundle_files(manifest: bytes, changed: Mapping[str, object]) -> bytes | None:
    """`manifest` (bytes `to_json_bytes` wrote) with the file fields of the `changed` bundles
    (name → BundleFile) replaced: the bytes `to_json_bytes` writes for the patched document.

    None when it cannot tell: too many bundles, a bundle it does not find in key order, a field
    not where that shape puts it. The caller then makes the document again.
    """
    if len(changed) > PATCH_LIMIT:
        return None
    start = manifest.find(BUNDLES_OPEN)
    if start < 0:
        return None
    pieces, copied, cursor = [], 0, start + len(BUNDLES_OPEN) - 1
    for name in sorted(changed):
        try:
            head = b"\n    " + orjson.dumps(name) + b": {\n"
        except orjson.JSONEncodeError:
            return None
        at = manifest.find(head, cursor)
        end = manifest.find(ENTRY_CLOSE, at + len(head)) if at >= 0 else -1
        if end < 0:
            return None
        entry = _patched_entry(manifest[at:end], file_fields(changed[name]))
        if entry is None:
            return None
        pieces += [manifest[copied:at], entry]
        copied = cursor = end
    pieces.append(manifest[copied:])
    return b"".join(pieces)


def _field_span(entry: bytes, key: str) -> tuple[int, int] | None:
    """Where the value of a bundle entry's field `key` lies in the entry (its line's comma
    left out); None when the entry has no such line."""
    line = b'\n      "' + key.encode() + b'": '
    at = entry.find(line)
    if at < 0:
        return None
    begin = at + len(line)
    end = entry.find(b"\n", begin)
    end = len(entry) if end < 0 else end
    return begin, end - 1 if entry[end - 1 : end] == b"," else end


def _patched_entry(entry: bytes, fields: dict) -> bytes | None:
    for key, value in fields.items():
        span = _field_span(entry, key)
        if span is None:
            return None
        entry = entry[: span[0]] + orjson.dumps(value) + entry[span[1] :]
    return entry


def named_bundle_files(manifest: bytes) -> list[str] | None:
    """The bundle files a manifest `to_json_bytes` wrote names, sorted, found line by line
    (None when the bytes do not have that shape)."""
    start = manifest.find(BUNDLES_OPEN)
    if start < 0:
        return None
    end = manifest.find(BUNDLES_CLOSE, start + len(BUNDLES_OPEN) - 1)
    if end < 0:
        return None
    try:
        return sorted({orjson.loads(found) for found in FILE_LINE.findall(manifest, start, end)})
    except orjson.JSONDecodeError:
        return None


class FileFieldsChange(NamedTuple):
    """A bundle whose file fields differ between two manifests (and nothing else of it)."""

    before: dict
    after: dict


def bundle_file_changes(before: bytes, after: bytes) -> dict[str, FileFieldsChange] | None:
    """The bundles whose file fields differ between two manifests `to_json_bytes` wrote, when
    nothing else differs; None when something else does (or the bytes are not of that shape).

    The bytes are compared in place: a difference is traced to the bundle entry holding it,
    that entry's file fields are read from both, and the comparison goes on after the entry,
    which must then be the same but for those fields. Cost: a comparison of the bytes.
    """
    start = before.find(BUNDLES_OPEN)
    if start < 0 or after[: start + len(BUNDLES_OPEN)] != before[: start + len(BUNDLES_OPEN)]:
        return None
    changes: dict[str, FileFieldsChange] = {}
    old, new = start, start
    while True:
        same = _common_prefix(before, old, after, new)
        if old + same == len(before) and new + same == len(after):
            return changes
        if len(changes) >= PATCH_LIMIT:
            return None
        at = before.rfind(b'\n    "', start, old + same + 1)
        if at < start:
            return None
        shift = new - old
        old_end = before.find(ENTRY_CLOSE, at + 1)
        new_end = after.find(ENTRY_CLOSE, at + shift + 1)
        if old_end < old + same or new_end < 0:
            return None  # the difference is not inside a bundle's entry
        head_end = before.find(b": {\n", at)
        try:
            name = orjson.loads(before[at + 5 : head_end])
        except orjson.JSONDecodeError:
            return None
        old_entry, new_entry = before[at:old_end], after[at + shift : new_end]
        fields = (_file_fields_of(old_entry), _file_fields_of(new_entry))
        if None in fields or name in changes:
            return None
        if _patched_entry(old_entry, fields[1]) != new_entry:  # type: ignore[arg-type]
            return None
        changes[name] = FileFieldsChange(*fields)  # type: ignore[arg-type]
        old, new = old_end, new_end


def _file_fields_of(entry: bytes) -> dict | None:
    found = {}
    for key in ("file", "size", "crc32", "content_hash", "raw_hash"):
        span = _field_span(entry, key)
        if span is None:
            return None
        try:
            found[key] = orjson.loads(entry[span[0] : span[1]])
        except orjson.JSONDecodeError:
            return None
    return found


def _common_prefix(a: bytes, i: int, b: bytes, j: int) -> int:
    """How many bytes of a[i:] and b[j:] are the same from their start (blocks compared whole,
    then halved: memcmp does the work)."""
    length, done, block = min(len(a) - i, len(b) - j), 0, 1 << 16
    while done < length:
        size = min(block, length - done)
        if a[i + done : i + done + size] == b[j + done : j + done + size]:
            done += size
            continue
        if size == 1:
            return done
        block = max(1, size // 2)
    return length
