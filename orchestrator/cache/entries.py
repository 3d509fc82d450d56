"""Stage values in the build state, entry by entry: a keyed value is one row per key, a plain
value one row; each row carries its digest and the generation at which it last changed, and a
removed key stays as a tombstone until every stage has seen it go."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from ..codec import CodecError, dumps, loads
from ..errors import CacheCorrupt
from ..hashing import digest_bytes
from .statedb import StateDatabase

INLINE_MAX_BYTES = 256 * 1024  # larger values live in the blob store
STORED_PREFIX = b"blob:"
WHOLE = ""  # the key of a value that is not keyed
#: Up to this many keys, a patch looks up their stored digests by key rather than reading all
#: of the value's (SQLite binds at most 999 parameters by default in older builds).
FEW_KEYS = 500


class ValueChanges(NamedTuple):
    changed: list[str]  # keys added or changed
    removed: list[str]


class ValueEntries(StateDatabase):
    """The `entries` table (values large enough go to `blobs`, the content-addressed store)."""

    blobs: Any

    def encode(self, value: Any) -> tuple[bytes, bytes]:
        """(digest, stored data) of a value: inline, or a reference into the blob store."""
        data = dumps(value)
        digest = bytes.fromhex(digest_bytes(data))
        if len(data) > INLINE_MAX_BYTES:
            return digest, STORED_PREFIX + self.blobs.put_blob(data).encode("ascii")
        return digest, data

    def decode(self, digest: bytes, data: bytes) -> Any:
        stored = None
        if data.startswith(STORED_PREFIX):
            stored = data[len(STORED_PREFIX) :].decode("ascii")
            data = self.blobs.get_blob(stored)
        if digest_bytes(data) != digest.hex():
            raise CacheCorrupt("a stored value does not match its digest")
        try:
            return loads(data)
        except CodecError as exc:
            if stored is not None:  # intact, but no value: no run may find it again
                self.blobs.refuse(stored, str(exc))
            raise CacheCorrupt(f"a stored value cannot be decoded: {exc}") from None

    def entry(self, value: str, key: str = WHOLE) -> Any:
        """One entry of a value (KeyError when absent)."""
        row = self.execute(
            "SELECT digest, data FROM entries WHERE value = ? AND key = ? AND data IS NOT NULL",
            (value, key),
        ).fetchone()
        if row is None:
            raise KeyError(key)
        return self.decode(bytes(row[0]), bytes(row[1]))

    def entry_digest(self, value: str, key: str = WHOLE) -> str | None:
        row = self.execute(
            "SELECT digest FROM entries WHERE value = ? AND key = ? AND data IS NOT NULL",
            (value, key),
        ).fetchone()
        return bytes(row[0]).hex() if row else None

    def keys(self, value: str) -> list[str]:
        return [
            key
            for (key,) in self.execute(
                "SELECT key FROM entries WHERE value = ? AND data IS NOT NULL ORDER BY key",
                (value,),
            )
        ]

    def digests(self, value: str) -> dict[str, str]:
        return {
            key: bytes(digest).hex()
            for key, digest in self.execute(
                "SELECT key, digest FROM entries WHERE value = ? AND data IS NOT NULL", (value,)
            )
        }

    def digests_of(self, value: str, keys: list[str]) -> dict[str, str]:
        """The stored digests of some keys (a patch of a few entries need not read them all)."""
        found = {}
        for start in range(0, len(keys), FEW_KEYS):
            chunk = keys[start : start + FEW_KEYS]
            marks = ", ".join("?" * len(chunk))
            for key, digest in self.execute(
                f"SELECT key, digest FROM entries WHERE value = ? AND key IN ({marks}) "
                "AND data IS NOT NULL",
                (value, *chunk),
            ):
                found[key] = bytes(digest).hex()
        return found

    def fingerprint(self, value: str) -> str:
        """A digest of every live entry's key and digest, in key order."""
        rows = self.execute(
            "SELECT key, digest FROM entries WHERE value = ? AND data IS NOT NULL ORDER BY key",
            (value,),
        )
        return digest_bytes(
            b"\n".join(
                key.encode("utf-8", "surrogateescape") + b"\0" + bytes(digest)
                for key, digest in rows
            )
        )

    def items(self, value: str) -> Iterator[tuple[str, Any]]:
        rows = self.execute(
            "SELECT key, digest, data FROM entries WHERE value = ? AND data IS NOT "
            "NULL ORDER BY key",
            (value,),
        ).fetchall()
        for key, digest, data in rows:
            yield key, self.decode(bytes(digest), bytes(data))

    def has_value(self, value: str) -> bool:
        return (
            self.execute("SELECT 1 FROM entries WHERE value = ? LIMIT 1", (value,)).fetchone()
            is not None
        )

    def value_generation(self, value: str) -> int:
        """The generation at which any entry of the value last changed (0: never stored)."""
        row = self.execute("SELECT MAX(gen) FROM entries WHERE value = ?", (value,)).fetchone()
        return int(row[0] or 0)

    def changes(self, value: str, since: int) -> ValueChanges:
        changed: list[str] = []
        removed: list[str] = []
        for key, live in self.execute(
            "SELECT key, data IS NOT NULL FROM entries WHERE value = ? AND gen > ? ORDER BY key",
            (value, since),
        ):
            (changed if live else removed).append(key)
        return ValueChanges(changed, removed)

    def put_entries(
        self, value: str, entries: Iterable[tuple[str, Any]], known: dict[str, str] | None = None
    ) -> list[str]:
        """Store entries whose digest differs from what is stored; returns the keys changed."""
        entries = list(entries)
        if known is None:
            known = (
                self.digests_of(value, [key for key, _ in entries])
                if len(entries) <= FEW_KEYS
                else self.digests(value)
            )
        rows, changed = [], []
        for key, entry in entries:
            digest, data = self.encode(entry)
            if known.get(key) == digest.hex():
                continue
            rows.append((value, key, self.generation, digest, data))
            changed.append(key)
        rows.sort()
        self.execute_many("INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?)", rows)
        return changed

    def remove_entries(self, value: str, keys: Iterable[str]) -> list[str]:
        """Tombstone entries (the removal is a change consumers see); returns the keys removed."""
        rows = sorted((self.generation, value, key) for key in keys)
        self.execute_many(
            "UPDATE entries SET gen = ?, digest = NULL, data = NULL WHERE value = ? AND "
            "key = ? AND data IS NOT NULL",
            rows,
        )
        return [key for _, _, key in rows]

    def replace_entries(self, value: str, entries: dict[str, Any]) -> list[str]:
        """Make the value exactly `entries`; returns the keys that changed or went away."""
        known = self.digests(value)
        changed = self.put_entries(value, entries.items(), known)
        gone = [key for key in known if key not in entries]
        return changed + self.remove_entries(value, gone)

    def prune_tombstones(self, before: int) -> None:
        self.execute("DELETE FROM entries WHERE data IS NULL AND gen < ?", (before,))
