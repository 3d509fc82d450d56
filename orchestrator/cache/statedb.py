"""The plumbing of a build-state database: one connection, transactions, damage handling,
the run's generation and a few named settings."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..errors import CacheCorrupt
from ..files.confined import ConfinedFolder
from ..hashing import digest_bytes
from .db import is_damage, open_db, raise_if_outside, set_aside


class Rows(list):
    """The rows of a query, fetched whole (`fetchone`/`fetchall` as on a cursor)."""

    def fetchone(self) -> Any:
        return self[0] if self else None

    def fetchall(self) -> list:
        return self


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
    ) -> None:
        self.path = path
        self.log = log
        self.schema = schema
        self.version = version
        self.scratch = scratch
        self._step = False  # a scratch database: inside one of the run's transactions
        self.folder = folder  # the cache folder holding it: no link below it is followed
        self._db: sqlite3.Connection | None = open_db(path, schema, version, log, folder)
        if scratch:
            self.execute("BEGIN IMMEDIATE")
        self.generation = self._next_generation()

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

    def begin(self) -> None:
        if self.scratch:
            if not self._step:
                self.execute("SAVEPOINT step")
                self._step = True
        elif not self.db.in_transaction:
            self.execute("BEGIN IMMEDIATE")

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
        row = self.execute("SELECT value FROM meta WHERE name = 'generation'").fetchone()
        generation = (int(row[0]) if row else 0) + 1
        self.execute("INSERT OR REPLACE INTO meta VALUES ('generation', ?)", (generation,))
        return generation

    def meta(self, name: str) -> Any:
        row = self.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return row[0] if row else None

    def set_meta(self, name: str, value: Any) -> None:
        self.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (name, value))


def row_check(*fields: bytes) -> bytes:
    """What a row stores to be verified on read: SQLite keeps no checksum of the rows it holds,
    so bit rot inside a row that leaves the file sound would otherwise be read as data."""
    return digest_bytes(b"".join(fields)).encode("ascii")[:16]


def chunks(items: list, size: int) -> Iterator[list]:
    """`items` in slices of at most `size` (SQLite bounds the parameters of a query)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
