"""Cache entries authenticated with the farm's key (`cache.key_file` / `cache.key_env`).

A shared cache is content-addressed below its rows: a blob is named by the digest of its bytes
and checked against it on every read, and a result names the blobs it holds by digest. So what
needs a key is only the rows that name digests: an action row's (stage, unit key) → the files it
read with their digests, and its result's digest; and every row of a machine's build state that
says what its next run reuses (statedb.RowChecks: units, records, value entries, the file table,
the change log, published files). The holder of the key signs a row when it writes it; a reader
with the key refuses a row that is unsigned or whose signature does not match (refused,
reported, and what it held recomputed). Without a key, rows are written unsigned and read as
before: a row's plain check proves it intact, not who wrote it.

The signature is one small value over a few fields, so a remote store can carry it beside an
entry the same way. HMAC-SHA256 from the standard library, not BLAKE3's keyed mode (blake3 is a
dependency): a BLAKE3 key is exactly 32 bytes, so a key file of any length would need a key
derivation of our own, while HMAC takes any key and is what any other tool can check an entry
with (Python's or Go's standard library, `openssl dgst -hmac`); one HMAC per action row costs
about a microsecond.
"""

from __future__ import annotations

import hmac

#: What a signed message starts with, per kind of row: a signature of one kind of row means
#: nothing as another's.
ACTION_ENTRY = b"orchestrate action entry v1\0"
STATE_ROW = b"orchestrate state row v1\0"
#: Shorter keys are refused: guessable.
MIN_KEY_BYTES = 16


class EntryKey:
    """The key that signs and verifies cache entries; it never leaves the process that read it."""

    __slots__ = ("_secret", "source")

    def __init__(self, secret: bytes, source: str) -> None:
        if len(secret) < MIN_KEY_BYTES:
            raise ValueError(
                f"the cache key has {len(secret)} bytes; use at least {MIN_KEY_BYTES} random "
                "bytes (e.g. `openssl rand -hex 32`)"
            )
        self._secret = secret
        self.source = source  # where it came from, for messages: `cache.key_env ORCH_KEY`

    def sign(self, *fields: bytes, domain: bytes = ACTION_ENTRY) -> bytes:
        """The signature of the fields (each length-prefixed: no two field lists sign alike)."""
        message = domain + b"".join([len(field).to_bytes(8, "big") + field for field in fields])
        return hmac.digest(self._secret, message, "sha256")  # OpenSSL's one-shot HMAC

    def verify(self, signature: bytes | None, *fields: bytes, domain: bytes = ACTION_ENTRY) -> bool:
        return signature is not None and hmac.compare_digest(
            bytes(signature), self.sign(*fields, domain=domain)
        )

    def __repr__(self) -> str:
        return f"EntryKey(from {self.source})"

    def __reduce__(self):  # never shipped to a worker or written anywhere by accident
        raise TypeError("the cache key stays in the process that read it")
