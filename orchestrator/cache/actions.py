"""The action cache: (stage, unit key) → the files the unit read with their digests → its result.

It is what makes a second checkout, another output folder or an edit undone hit results built
before: an entry is valid when every file it records (including files looked for and not
found) still has the digest recorded. A key keeps its few newest distinct results. One SQLite
database per cache folder (WAL: concurrent runs share it); each row carries a digest of its
content, so a damaged row is skipped like a missing one, and, when the build has the farm's key,
a signature (signing.py): a reader with the key refuses a row that is unsigned or signed by
anyone else, deletes it, and the unit runs again.

With a remote cache (remote.py), a key none of whose rows matches is looked up on the server
too: its entry there is checked as a row is (its check, and with the key its signature, over
the same fields), and kept in the database when it serves a hit. What a build records goes to
both, the server's copy after the blobs it names. The server holds one entry per key (the last
written); the database keeps a few.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import msgpack

from ..errors import CacheCorrupt
from .db import in_forked_child, inherited, is_damage, open_db, raise_if_outside, set_aside
from .remote import AC, MAX_ENTRY_BYTES, RemoteEntry, action_key, row_check
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
        in_forked_child(self, ActionCache._forget_connection)
        self._pending: list[tuple] = []
        self._used: list[tuple] = []  # entries that served a hit: their stamp moves (gc is LRU)
        self._damaged: list[tuple] = []  # entries that failed their check: deleted at the flush
        self._refused: list[tuple] = []  # results refused: the entries naming them go too
        self._fetched: dict[tuple, RemoteEntry] = {}  # the remote's entries this run has read
        self._adopted: list[tuple] = []  # …that served a hit: written here, not sent back

    def _forget_connection(self) -> None:
        """In a forked copy of the process: the parent's connection is not this one's."""
        inherited(self._db)
        self._db = None

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
            if row_check(result, reads) != bytes(check):
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

    def candidates(self, stage: str, key: str) -> Iterator[ActionEntry]:
        """The key's entries here, newest first, then (asked for only if none of those served)
        the remote's, when it differs from them."""
        entries = self.get(stage, key)
        yield from entries
        found = self._from_remote(stage, key)
        if found is not None and found not in entries:
            yield found

    def _from_remote(self, stage: str, key: str) -> ActionEntry | None:
        """The remote's entry for the key, verified as a row is; None if it has none."""
        remote = self._owner.remote
        if remote is None:
            return None
        raw_key = bytes.fromhex(key)
        data = remote.get(AC, action_key(stage, raw_key), MAX_ENTRY_BYTES)
        if data is None:
            return None
        entry = RemoteEntry.decode(data)
        reads = None
        if entry is not None and (entry.stage, entry.key) == (stage, raw_key) and entry.intact:
            reads = _trace(entry.reads)
        if entry is None or reads is None:
            self._owner.refused_remotely(
                f"an action entry of {stage} on the server is damaged or not orchestrate's: "
                "refused; its unit runs again"
            )
            return None
        if self._key is not None and not self._key.verify(
            entry.signature, *_signed(stage, raw_key, entry.result, entry.reads)
        ):
            signed = "unsigned" if entry.signature is None else "not signed with this build's key"
            self._owner.refused_remotely(
                f"an action entry of {stage} (key {key[:12]}) on the server is {signed} "
                f"({self._key.source}): refused; its unit runs again"
            )
            return None
        self._owner.learn_address(entry.result.hex(), entry.address)
        self._fetched[(stage, raw_key, entry.result)] = entry
        return ActionEntry(reads, entry.result.hex())

    def put(self, stage: str, key: str, reads: dict[str, str | None], result: str) -> None:
        """Record an entry (written with the next flush)."""
        # Paths sorted alone (as str, in C), then paired: the same bytes as sorting the pairs,
        # a third of the time for a rule unit's hundred thousand index entry reads.
        packed = msgpack.packb([(path, reads[path]) for path in sorted(reads)])
        raw, raw_key = bytes.fromhex(result), bytes.fromhex(key)
        check = row_check(raw, packed)
        signature = (
            None if self._key is None else self._key.sign(*_signed(stage, raw_key, raw, packed))
        )
        self._pending.append((stage, raw_key, raw, packed, time.time_ns(), check, signature))

    def drop_result(self, result: str) -> None:
        """Delete (with the next flush) every entry whose result is this blob."""
        self._refused.append((bytes.fromhex(result),))

    def touch(self, stage: str, key: str, result: str) -> None:
        """Note that an entry served a hit (its stamp moves with the next flush; one of the
        remote's is written here)."""
        raw_key, raw_result = bytes.fromhex(key), bytes.fromhex(result)
        fetched = self._fetched.pop((stage, raw_key, raw_result), None)
        if fetched is not None:
            self._adopted.append(
                (stage, raw_key, raw_result, fetched.reads, time.time_ns(), fetched.check,
                 fetched.signature)
            )  # fmt: skip
            return
        self._used.append((time.time_ns(), stage, raw_key, raw_result))

    def flush(self) -> None:
        """Write what was recorded, and delete what was found damaged, in one transaction."""
        if self.scratch:
            self._pending, self._used, self._damaged, self._refused = [], [], [], []
            self._adopted = []
        work = (self._pending, self._adopted, self._used, self._damaged, self._refused)
        if not any(work):
            return
        recorded, self._pending = sorted(self._pending), []
        rows = sorted(recorded + self._adopted)
        self._adopted = []
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
        self._send(recorded)

    def _send(self, rows: list[tuple]) -> None:
        """Upload what this run recorded (the blobs they name are on the server by now)."""
        remote = self._owner.remote
        if remote is None or not self._owner.uploads:
            return
        for stage, raw_key, result, reads, _stamp, check, signature in rows:
            address = self._owner.address_of(result.hex())
            if address is None:  # its blob did not reach the server: nor does the entry
                continue
            value = RemoteEntry(stage, raw_key, result, address, reads, check, signature).encode()
            send = functools.partial(remote.put, AC, action_key(stage, raw_key), value)
            remote.submit(send, len(value))

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


def _trace(reads: bytes) -> list | None:
    """The files an entry read, `[[path, digest or None], …]`; None if it holds no such list
    (a server's entry is checked as closely as a row of the folder's database)."""
    try:
        trace = msgpack.unpackb(reads)
    except (ValueError, msgpack.ExtraData, TypeError):
        return None
    if not isinstance(trace, list):
        return None
    for read in trace:
        if not (isinstance(read, list) and len(read) == 2 and isinstance(read[0], str)):
            return None
        if not isinstance(read[1], str | None):
            return None
    return trace


def _signed(stage: str, key: bytes, result: bytes, reads: bytes) -> tuple[bytes, ...]:
    """What a row's signature covers: the entry's key and everything it maps to (the stamp,
    only the least-recently-used order of gc, is left out)."""
    return stage.encode("utf-8"), key, result, reads
