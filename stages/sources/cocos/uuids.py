"""Creator's asset ids: uuids, sub-asset ids (`uuid@sub`) and the compressed form of release builds.

A release build's `config.json` writes a 36-character uuid as 22 characters: the first two hex
digits as they are, then each group of three hex digits (12 bits) as two base64 characters;
`@…` sub-ids are kept. Nine-character entries are merged JSON packs, not assets.
"""

from __future__ import annotations

import re

BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_VALUE = {char: value for value, char in enumerate(BASE64)}
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
COMPRESSED_LENGTH = 22
PACK_LENGTH = 9


def is_uuid(text: str) -> bool:
    """A plain 36-character lower-case uuid."""
    return bool(UUID_RE.match(text))


def base_uuid(asset_id: str) -> str:
    """The uuid part of an asset id (`uuid@sub@sub` → `uuid`)."""
    return asset_id.split("@", 1)[0]


def compress_uuid(asset_id: str) -> str:
    """Creator's compressed form of an asset id (anything not a uuid is returned as it is)."""
    base, sep, sub = asset_id.partition("@")
    if not is_uuid(base):
        return asset_id
    hex_digits = base.replace("-", "")
    out = [hex_digits[:2]]
    for i in range(2, 32, 3):
        value = int(hex_digits[i : i + 3], 16)
        out.append(BASE64[value >> 6] + BASE64[value & 63])
    return "".join(out) + sep + sub


def decompress_uuid(text: str) -> str:
    """The asset id of a compressed uuid (`Build.Utils.decompressUuid`); other text unchanged."""
    base, sep, sub = text.partition("@")
    if len(base) != COMPRESSED_LENGTH or any(c not in _VALUE for c in base[2:]):
        return text
    digits = [base[:2]]
    for i in range(2, COMPRESSED_LENGTH, 2):
        digits.append(f"{_VALUE[base[i]] * 64 + _VALUE[base[i + 1]]:03x}")
    h = "".join(digits)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}" + sep + sub


def is_pack_id(text: str) -> bool:
    """A merged JSON pack's id in `config.json` (nine hex characters), not an asset."""
    return len(text) == PACK_LENGTH and "@" not in text and "-" not in text
