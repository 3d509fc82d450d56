"""Content hashing: BLAKE3 everywhere (fast, cryptographic, 256-bit hex digests)."""

from __future__ import annotations

import json
import pickle
from typing import Any

import blake3

DIGEST_HEX_LEN = 64


def digest_bytes(data: bytes) -> str:
    """Hex BLAKE3 digest of `data`."""
    return blake3.blake3(data).hexdigest()


def digest_file(path: str, chunk: int = 1 << 20) -> str:
    """Hex BLAKE3 digest of a file's bytes, streamed."""
    hasher = blake3.blake3()
    with open(path, "rb") as handle:
        while True:
            block = handle.read(chunk)
            if not block:
                break
            hasher.update(block)
    return hasher.hexdigest()


def canonical_json(value: Any) -> bytes:
    """Deterministic JSON bytes (sorted keys, no whitespace) used for key material."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=_json_default).encode("utf-8")


def _json_default(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, bytes):
        return {"__bytes__": digest_bytes(value)}
    raise TypeError(f"not key material: {type(value).__name__}")


def digest_value(value: Any) -> str:
    """Digest of JSON-able key material (dicts, lists, strings, numbers)."""
    return digest_bytes(canonical_json(value))


def dumps(value: Any) -> bytes:
    """Serialize a unit result for the store (pickle protocol 5; results hold no sets)."""
    return pickle.dumps(value, protocol=5)


def loads(data: bytes) -> Any:
    """Inverse of `dumps`."""
    return pickle.loads(data)
