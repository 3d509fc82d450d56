"""The action cache: (stage, unit key) → the files the unit read with their digests → its result.

It is what makes a second checkout, another output folder or an edit undone hit results built
before: an entry is valid when every file it records (including files looked for and not
found) still has the digest recorded. A key keeps its few newest distinct results. One SQLite
database per cache folder (WAL: concurrent runs share it); each row carries a digest of its
content, so a damaged row is skipped like a missing one, and, when the build has the farm's key,
a signature (signing.py): a reader with the key refuses a row that is unsigned or signed by
anyone else, deletes it, and the unit runs again.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any, NamedTuple

import msgpack

from ..errors import CacheCorrupt
from ..hashing import digest_bytes
from .db import is_damage, open_db, raise_if_outside, set_aside
from .signing import EntryKey

ENTRIES_PER_KEY = 4
SCHEMA_VERSION = 3  # 3: a signature beside the check
SCHEMA = """
CREATE TABLE IF NOT EXISTS actions (
    stage TEXT NOT NULL, key BLOB NOT NULL, result BLOB NOT NULL, reads BLOB NOT NULL,
    stamp INTEGER NOT NULL, check_ BLOB NOT NULL, signature BLOB);
CREATE UNIQUE INDEX IF NOT EXISTS actions_by_key ON actions (stage, key, result);
"""  # a rowid table: `reads` can be large (see state.py)


class ActionEntry(NamedTuple):
    reads: list  # [[path, digest or None], …], sorted by path
    result: str


class ActionCache:
    """The cache folder's action database, opened on first use."""

    def __init__(
        self, path: Path, owner: Any, scratch: bool = False, key: EntryKey | None = None
    ) -> None:
        self.path = path
        self._owner = owner  # counts and logs what is dropped
        self.scratch = scratch  # a dry run's: what it records is never written
        self._key = key  # signs what is written; what is read must carry its signature
        self._db: sqlite3.Connection | None = None
        self._pending: list[tuple] = []
        self._used: list[tuple] = []  # entries that served a hit: their stamp moves (gc is LRU)
        self._damaged: list[tuple] = []  # entries that failed their check: deleted at the flush
        self._refused: list[tuple] = []  # results refused: the entries naming them go too

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = open_db(
                self.path, SCHEMA, SCHEMA_VERSION, self._owner.log, self._owner.folder
            )
        return self._db

    def get(self, stage: str, key: str) -> list[ActionEntry]:
        """The newest entries of a key (distinct results), verified."""
        raw_key = bytes.fromhex(key)
        rows = self._query(
            "SELECT result, reads, check_, signature FROM actions WHERE stage = ? AND key = ?"
            " ORDER BY stamp DESC LIMIT ?",
            (stage, raw_key, ENTRIES_PER_KEY),
        )
        entries = []
        for result, reads, check, signature in rows:
            result, reads = bytes(result), bytes(reads)
            if digest_bytes(result + reads).encode("ascii")[:16] != bytes(check):
                self._owner.dropped(self.path, f"a damaged action entry of {stage} was skipped")
                self._damaged.append((stage, raw_key, result))
                continue
            if self._key is not None and not self._key.verify(
                None if signature is None else bytes(signature),
                *_signed(stage, raw_key, result, reads),
            ):
                self._owner.refused(
                    self.path,
                    f"an action entry of {stage} (key {key[:12]}) is "
                    + ("unsigned" if signature is None else "not signed with this build's key")
                    + f" ({self._key.source}): refused and deleted; its unit runs again",
                )
                self._damaged.append((stage, raw_key, result))
                continue
            try:
                entries.append(ActionEntry(msgpack.unpackb(reads), bytes(result).hex()))
            except (ValueError, msgpack.ExtraData, TypeError):
                self._owner.dropped(self.path, "an undecodable action entry was skipped")
                self._damaged.append((stage, bytes.fromhex(key), bytes(result)))
        return entries

    def put(self, stage: str, key: str, reads: dict[str, str | None], result: str) -> None:
        """Record an entry (written with the next flush)."""
        packed = msgpack.packb(sorted([path, digest] for path, digest in reads.items()))
        raw, raw_key = bytes.fromhex(result), bytes.fromhex(key)
        check = digest_bytes(raw + packed).encode("ascii")[:16]
        signature = (
            None if self._key is None else self._key.sign(*_signed(stage, raw_key, raw, packed))
        )
        self._pending.append((stage, raw_key, raw, packed, time.time_ns(), check, signature))

    def drop_result(self, result: str) -> None:
        """Delete (with the next flush) every entry whose result is this blob."""
        self._refused.append((bytes.fromhex(result),))

    def touch(self, stage: str, key: str, result: str) -> None:
        """Note that an entry served a hit (its stamp moves with the next flush)."""
        self._used.append((time.time_ns(), stage, bytes.fromhex(key), bytes.fromhex(result)))

    def flush(self) -> None:
        """Write what was recorded, and delete what was found damaged, in one transaction."""
        if self.scratch:
            self._pending, self._used, self._damaged, self._refused = [], [], [], []
        if not self._pending and not self._used and not self._damaged and not self._refused:
            return
        rows, self._pending = sorted(self._pending), []
        used, self._used = sorted(self._used), []
        damaged, self._damaged = sorted(set(self._damaged)), []
        refused, self._refused = sorted(set(self._refused)), []
        db = self._conn()
        try:
            db.execute("BEGIN IMMEDIATE")
            db.executemany(
                "DELETE FROM actions WHERE stage = ? AND key = ? AND result = ?", damaged
            )
            db.executemany("DELETE FROM actions WHERE result = ?", refused)
            db.executemany("INSERT OR REPLACE INTO actions VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            db.executemany(
                "UPDATE actions SET stamp = ? WHERE stage = ? AND key = ? AND result = ?", used
            )
            db.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            self._fail(exc)

    def _query(self, sql: str, args: tuple) -> list:
        try:
            return self._conn().execute(sql, args).fetchall()
        except sqlite3.DatabaseError as exc:
            self._fail(exc)
            return []

    def _fail(self, exc: sqlite3.DatabaseError) -> None:
        raise_if_outside(exc, self.path)
        if not is_damage(exc):
            raise exc
        self.close()
        set_aside(self.path, str(exc), self._owner.log)
        raise CacheCorrupt(f"the action cache was damaged and has been set aside: {exc}")

    def close(self) -> None:
        if self._db is not None:
            try:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
            finally:
                self._db.close()
                self._db = None

    def count(self) -> int:
        return self._query("SELECT COUNT(*) FROM actions", ())[0][0]


def _signed(stage: str, key: bytes, result: bytes, reads: bytes) -> tuple[bytes, ...]:
    """What a row's signature covers: the entry's key and everything it maps to (the stamp,
    only the least-recently-used order of gc, is left out)."""
    return stage.encode("utf-8"), key, result, reads
