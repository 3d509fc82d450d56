"""The plumbing of a build-state database: one connection, transactions, damage handling,
the checks its rows carry (keyed when the build holds the farm's key) and the run's
generation."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..errors import CacheCorrupt
from ..files.confined import ConfinedFolder
from ..hashing import digest_bytes
from .db import (
    in_forked_child,
    inherited,
    is_damage,
    note_hazard,
    open_db,
    raise_if_outside,
    set_aside,
)
from .signing import STATE_ROW, EntryKey


class Rows(list):
    """The rows of a query, fetched whole (`fetchone`/`fetchall` as on a cursor)."""

    def fetchone(self) -> Any:
        return self[0] if self else None

    def fetchall(self) -> list:
        return self


class RowChecks:
    """The check each row of one build state carries, so that a run trusts only what it can
    verify.

    With the farm's key, every row that says what a run reuses carries the HMAC of its fields
    (signing.py), bound to its table and to this state's file: a row changed, made up, or moved
    from another table or another machine's or checkout's state by anyone without the key does
    not verify. Large bytes are not in the fields: a unit's data, a value's and a part of the
    file table are checked against a digest their row holds (and the check covers).

    Without a key, a stage record carries the plain digest of its fields (bit rot inside it
    would go unseen: its bytes have no digest of their own), and so do a taken part's row (its
    generation) and the generation row
    (a state signed with a key then fails, and is started afresh whole); the other rows carry
    none, as before keys: what a check would add is found anyway (a rotten digest names no
    blob, a rotten key reruns a unit), and a local cache without a key pays for no check it did
    not.
    """

    PLAIN = frozenset({"records", "meta", "taken"})

    def __init__(self, key: EntryKey | None, scope: str) -> None:
        self._key = key
        self._scope = scope.encode("utf-8")  # the state's file, relative to the cache folder

    @property
    def keyed(self) -> bool:
        return self._key is not None

    @property
    def source(self) -> str:
        """Where the key came from, for messages (never the key)."""
        return "" if self._key is None else self._key.source

    def checked(self, table: str) -> bool:
        """Whether rows of `table` carry a check (those that do not are taken as they are)."""
        return self._key is not None or table in self.PLAIN

    def check(self, table: str, *values: Any) -> bytes | None:
        """What a row of `table` holding these values stores in its check column."""
        if self._key is None and table not in self.PLAIN:
            # Before the fields: every unit and entry row of a cold build comes here, and
            # without a key most carry no check (their fields cost a tenth of storing them).
            return None
        fields = typed_fields(values)
        if self._key is not None:
            return self._key.sign(self._scope, table.encode("ascii"), *fields, domain=STATE_ROW)
        return row_check(*fields)

    def verify(self, table: str, check: Any, *values: Any) -> bool:
        """Whether a row holding these values carries exactly the check this build would
        write for it."""
        if not self.checked(table):
            return True
        return isinstance(check, bytes) and check == self.check(table, *values)


class StateDatabase:
    """A SQLite database of the build state; every method raises CacheCorrupt when it turns
    out damaged (the file is set aside first, so the run that restarts finds a fresh one).

    A `scratch` database (a dry run's) does everything a run does inside one transaction that
    is never committed: each of the run's transactions is a savepoint in it, so what a stage
    stored is there for the next stage to read, and `close` rolls it all back."""

    def __init__(
        self,
        path: Path,
        schema: str,
        version: int,
        log=None,
        scratch: bool = False,
        folder: ConfinedFolder | None = None,
        key: EntryKey | None = None,
    ) -> None:
        self.path = path
        self.log = log
        self.schema = schema
        self.version = version
        self.scratch = scratch
        self._step = False  # a scratch database: inside one of the run's transactions
        self.folder = folder  # the cache folder holding it: no link below it is followed
        scope = path.name if folder is None else Path(path).relative_to(folder.base).as_posix()
        self.checks = RowChecks(key, scope)
        self._refused: set[str] = set()  # tables whose refused rows were reported this run
        self._db: sqlite3.Connection | None = open_db(path, schema, version, log, folder)
        in_forked_child(self, StateDatabase._forget_connection)
        note_hazard(self, StateDatabase._fork_hazard)
        if scratch:
            self.execute("BEGIN IMMEDIATE")
        self.generation = self._next_generation()

    def _forget_connection(self) -> None:
        """In a forked copy of the process: the parent's connection is not this one's."""
        inherited(self._db)
        self._db = None

    def _fork_hazard(self) -> str | None:
        """A forked helper opens a connection of its own: it sees what was committed."""
        if self.scratch:
            return "a dry run's build state is never committed"
        if self._db is not None and self._db.in_transaction:
            return "the build state has uncommitted changes"
        return None

    @property
    def db(self) -> sqlite3.Connection:
        """The connection; after `close`, a new one again (values read after the run)."""
        if self._db is None:
            self._db = open_db(self.path, self.schema, self.version, self.log, self.folder)
        return self._db

    def execute(self, sql: str, args: Iterable = ()) -> Rows:
        """The statement's rows, all fetched here: SQLite finds most damage while stepping
        through rows, and that must be handled like damage found when the query starts."""
        try:
            return Rows(self.db.execute(sql, tuple(args)).fetchall())
        except sqlite3.DatabaseError as exc:
            self._fail(exc)
            raise

    def execute_many(self, sql: str, rows: Iterable) -> None:
        try:
            self.db.executemany(sql, rows)
        except sqlite3.DatabaseError as exc:
            self._fail(exc)
            raise

    def _fail(self, exc: sqlite3.DatabaseError) -> None:
        raise_if_outside(exc, self.path)
        if is_damage(exc):
            self.close()
            set_aside(self.path, str(exc), self.log)
            raise CacheCorrupt(f"the build state was damaged and has been set aside: {exc}")

    def dropped(self, why: str) -> None:
        """Log a damaged row that was skipped (what it held is recomputed)."""
        if self.log is not None:
            self.log.warning("cache.dropped", file=str(self.path), reason=why)

    def untrusted(self, table: str, what: str, then: str) -> str:
        """Log a row of `table` that failed its check, and return why (for an error message).

        Without a key the row is damaged (logged as dropped). With the key it is not signed
        with it: planted or changed by someone without the key (or damaged); logged as the
        action cache logs such rows (`cache.refused`), once per table and run whatever the
        number of rows. `then` says what happens to what it held."""
        if not self.checks.keyed:
            why = f"{what} is damaged"
            self.dropped(f"{why}: {then}")
            return why
        why = f"{what} is not signed with this build's key ({self.checks.source})"
        if table not in self._refused and self.log is not None:
            self.log.warning("cache.refused", file=str(self.path), reason=f"{why}: {then}")
        self._refused.add(table)
        return why

    def begin(self) -> None:
        if self.scratch:
            if not self._step:
                self.execute("SAVEPOINT step")
                self._step = True
        elif not self.db.in_transaction:
            self.execute("BEGIN IMMEDIATE")

    @contextlib.contextmanager
    def atomic(self) -> Iterator[None]:
        """The block all or nothing: in the transaction already open, else in its own."""
        if self._step or (not self.scratch and self.db.in_transaction):
            yield
            return
        self.begin()
        try:
            yield
            self.commit()
        except BaseException:
            self.rollback()
            raise

    def commit(self) -> None:
        if self.scratch:
            if self._step:
                self.execute("RELEASE step")
                self._step = False
        elif self.db.in_transaction:
            self.execute("COMMIT")

    def rollback(self) -> None:
        """Forget what the current transaction wrote (a stage that failed stores nothing)."""
        try:
            if self.scratch:
                if self._step:
                    self._step = False
                    self.db.execute("ROLLBACK TO step")
                    self.db.execute("RELEASE step")
            elif self.db.in_transaction:
                self.db.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    def close(self) -> None:
        """Let go of the connection; what a transaction left open wrote (all a scratch
        database's) is rolled back."""
        self.scratch = self._step = False  # reopened after the run: to read what is stored
        if self._db is None:
            return
        try:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            self._db.close()
        except sqlite3.Error:
            pass
        self._db = None

    def _next_generation(self) -> int:
        """This run's generation. The signed generation row vouches for the state as a whole:
        without one, or with one that fails its check (the state was written without this
        build's key, with another key, or with one when this build has none), nothing in it is
        trusted. It is emptied once, with one message, not refused row by row."""
        row = self.execute("SELECT value, check_ FROM meta WHERE name = 'generation'").fetchone()
        last = 0
        if (
            row is not None
            and isinstance(row[0], int)
            and self.checks.verify("meta", row[1], "generation", row[0])
        ):
            last = row[0]
        else:
            if row is not None:
                self._refuse_whole()
            self._empty()
        generation = last + 1
        check = self.checks.check("meta", "generation", generation)
        self.execute("INSERT OR REPLACE INTO meta VALUES ('generation', ?, ?)", (generation, check))
        return generation

    def _refuse_whole(self) -> None:
        then = "every stage plans afresh and the project's files are hashed again"
        if self.checks.keyed:
            self.untrusted(
                "meta",
                "the build state",
                "written by a build without the key or with another one, or changed by someone "
                f"without it; refused whole: {then}",
            )
        else:
            self.dropped(
                f"the build state was signed with a cache key and this build has none: {then}"
            )

    def _empty(self) -> None:
        """Delete every row but the generation's (a fresh state has none to delete)."""
        tables = self.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'meta'"
        )
        self.begin()
        for (table,) in tables:
            self.execute(f"DELETE FROM {table}")
        self.commit()


def typed_fields(values: Iterable[Any]) -> list[bytes]:
    """The bytes a check covers for each value, tagged with its type: a number stored where
    text was (SQLite compares them differently) no longer verifies."""
    fields = []
    for value in values:
        if isinstance(value, bytes):
            fields.append(b"b" + value)
        elif isinstance(value, str):
            fields.append(b"s" + value.encode("utf-8", "surrogateescape"))
        elif isinstance(value, int):
            fields.append(b"i%d" % value)
        elif value is None:
            fields.append(b"n")
        else:  # never written (a float planted in a column): it fails its check
            fields.append(b"o" + repr(value).encode("utf-8", "backslashreplace"))
    return fields


def row_check(*fields: bytes) -> bytes:
    """What a row stores to be verified on read: SQLite keeps no checksum of the rows it holds,
    so bit rot inside a row that leaves the file sound would otherwise be read as data."""
    return digest_bytes(b"".join(fields)).encode("ascii")[:16]


def chunks(items: list, size: int) -> Iterator[list]:
    """`items` in slices of at most `size` (SQLite bounds the parameters of a query)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
