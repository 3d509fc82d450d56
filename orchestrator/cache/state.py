"""The incremental state of one checkout building into one output folder, on one machine.

One SQLite database (`<cache>/state/<machine>/<scope>.sqlite`) holds what the next run starts
from: the file table, every stage's record, its units (payload, key, result) and the files each
read, the stage values entry by entry, and the signatures of published files. A run reads and
writes only the rows it touches. With the farm's key every row that says what a run reuses is
signed, and verified when read (statedb.RowChecks); `reads`, an index that can only make a unit
run again, is not.

Every run has a *generation* (a counter). A value entry or a file records the generation at
which it last changed, and a stage the generation at which it last ran, so what changed for a
stage since it ran is a range query, and a stage nothing reached is skipped without looking at
its units. Only one run writes a scope at a time (the output folder's lock); WAL lets what is
read after a run go on beside the next one. Machine-local by construction: the path names the machine, so two
machines sharing a cache folder never read each other's signatures.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..files.confined import ConfinedFolder
from ..hashing import digest_bytes, digest_value
from .entries import WHOLE, DecodedEntries, ValueStore
from .signing import EntryKey
from .statedb import StateDatabase
from .stores import FileTableStore, OutputStore, RecordStore, UnitStore

__all__ = ["WHOLE", "BuildState", "machine_id"]

SCHEMA_VERSION = 7  # 4: rows carry a check of their bytes; large rows in rowid tables
# 5: a unit's reads are found by unit (dropping one scanned every read)
# 6: rows signed with the farm's key (a unit's check covers the digest of its data)
# 7: records and units stored as typed records (cache/records.py)
# Tables whose rows can be large (unit payloads, value entries) keep a rowid: in a WITHOUT
# ROWID table the whole row is the b-tree key, and interior pages copy large keys, which made
# storing 6,555 small rows beside a few large ones take 77 s instead of 0.03 s (measured).
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value BLOB, check_ BLOB);
CREATE TABLE IF NOT EXISTS filetable (name TEXT PRIMARY KEY, data BLOB NOT NULL,
    digest TEXT NOT NULL, check_ BLOB);
CREATE TABLE IF NOT EXISTS file_changes (gen INTEGER NOT NULL, path TEXT NOT NULL,
    kind TEXT NOT NULL, check_ BLOB);
CREATE INDEX IF NOT EXISTS file_changes_by_gen ON file_changes (gen);
CREATE TABLE IF NOT EXISTS records (stage TEXT PRIMARY KEY, data BLOB NOT NULL,
    check_ BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS units (stage TEXT NOT NULL, id TEXT NOT NULL, key BLOB NOT NULL,
    result BLOB NOT NULL, digest BLOB NOT NULL, data BLOB NOT NULL, check_ BLOB);
CREATE UNIQUE INDEX IF NOT EXISTS units_by_id ON units (stage, id);
CREATE TABLE IF NOT EXISTS reads (path TEXT NOT NULL, stage TEXT NOT NULL, unit TEXT NOT NULL,
    PRIMARY KEY (path, stage, unit)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS reads_by_unit ON reads (stage, unit);
CREATE TABLE IF NOT EXISTS entries (value TEXT NOT NULL, key TEXT NOT NULL, gen INTEGER NOT NULL,
    digest BLOB, data BLOB, check_ BLOB);
CREATE UNIQUE INDEX IF NOT EXISTS entries_by_key ON entries (value, key);
CREATE INDEX IF NOT EXISTS entries_by_gen ON entries (value, gen);
CREATE TABLE IF NOT EXISTS outputs (path TEXT PRIMARY KEY, size INTEGER NOT NULL,
    mtime INTEGER NOT NULL, ctime INTEGER NOT NULL, ino INTEGER NOT NULL, digest TEXT NOT NULL,
    check_ BLOB);
"""


def machine_id() -> str:
    """Names this machine: systemd's machine id, else the host name."""
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            text = Path(path).read_text(encoding="ascii").strip()
        except OSError:
            continue
        if text:
            return text[:32]
    return digest_bytes(socket.gethostname().encode("utf-8"))[:32]


class BuildState:
    """The database of one scope (see the module's docstring), as the stores it is made of:
    `files` (the file table and its change log), `records` (each stage's), `units` (and what
    they read), `values` (entry by entry) and `outputs` (published files' signatures). One
    transaction spans them all (`begin`, `commit`, `rollback`)."""

    def __init__(
        self,
        cache_root: Path,
        project_root: str,
        output_dir: str,
        blobs: Any,
        log=None,
        scratch: bool = False,
        key: EntryKey | None = None,
        decoded: DecodedEntries | None = None,
    ) -> None:
        root_dev = os.stat(project_root).st_dev if os.path.isdir(project_root) else 0
        scope = digest_value([project_root, output_dir, root_dev])[:24]
        folder = ConfinedFolder(cache_root, "cache folder")
        path = folder.path(f"state/{machine_id()}/{scope}.sqlite")
        self.db = StateDatabase(path, SCHEMA, SCHEMA_VERSION, log, scratch, folder, key)
        self.files = FileTableStore(self.db)
        self.records = RecordStore(self.db)
        self.units = UnitStore(self.db)
        self.values = ValueStore(self.db, blobs, decoded)
        self.outputs = OutputStore(self.db)

    @property
    def generation(self) -> int:
        """This run's generation: what changes in it are logged under."""
        return self.db.generation

    def forget_stages(self) -> None:
        """Drop every stage's record, units and values, and the change log only records read
        (the file table and the signatures of published files stay): the next stages plan
        from scratch."""
        self.db.begin()
        for table in ("records", "units", "reads", "entries", "file_changes"):
            self.db.execute(f"DELETE FROM {table}")
        self.db.commit()

    def begin(self) -> None:
        self.db.begin()

    def commit(self) -> None:
        self.db.commit()

    def rollback(self) -> None:
        self.outputs.forget_unsaved()
        self.db.rollback()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """What the block stores, all or nothing: committed when it ends, rolled back when it
        raises (Ctrl-C included: a stage cut short leaves the state as it was before it)."""
        self.begin()
        try:
            yield
            self.commit()
        except BaseException:
            self.rollback()
            raise

    def close(self) -> None:
        self.db.close()
