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

import os
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from ..codec import CodecError, dumps, loads
from ..errors import CacheCorrupt
from ..files.confined import ConfinedFolder
from ..files.filetable import FileTable
from ..hashing import digest_bytes, digest_value
from .entries import WHOLE, ValueChanges, ValueEntries
from .signing import EntryKey
from .statedb import chunks

__all__ = ["WHOLE", "ScopeState", "StoredUnit", "ValueChanges", "machine_id"]

#: Published files looked up one query each before the run reads their rows whole.
SINGLE_OUTPUT_LOOKUPS = 64
SCHEMA_VERSION = 6  # 4: rows carry a check of their bytes; large rows in rowid tables
# 5: a unit's reads are found by unit (dropping one scanned every read)
# 6: rows signed with the farm's key (a unit's check covers the digest of its data)
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


class StoredUnit(NamedTuple):
    """A unit as the last run left it."""

    id: str
    key: str  # its static key digest
    result: str  # its result digest
    data: Any  # what the scheduler stored beside (payload, declared key, files, reads …)


class ScopeState(ValueEntries):
    """The database of one scope (see the module's docstring)."""

    def __init__(
        self,
        cache_root: Path,
        project_root: str,
        output_dir: str,
        blobs: Any,
        log=None,
        scratch: bool = False,
        key: EntryKey | None = None,
    ) -> None:
        root_dev = os.stat(project_root).st_dev if os.path.isdir(project_root) else 0
        scope = digest_value([project_root, output_dir, root_dev])[:24]
        self.blobs = blobs  # the content-addressed store, for large values
        folder = ConfinedFolder(cache_root, "cache folder")
        path = folder.path(f"state/{machine_id()}/{scope}.sqlite")
        super().__init__(path, SCHEMA, SCHEMA_VERSION, log, scratch, folder, key)
        # Published files' rows, read whole once a run has looked up more than a few: a
        # publish checks thousands of bundle files, and a query each cost more than that.
        self._outputs: dict[str, tuple] | None = None
        self._output_lookups = 0

    # -- the file table --------------------------------------------------------------------------
    def file_table(self) -> FileTable | None:
        """The table the last run saved; None when there is none or it is damaged (each part
        is checked against its digest, and its row against its check)."""
        blobs, digests = {}, {}
        signed = True
        for name, data, digest, check in self.execute("SELECT * FROM filetable"):
            blobs[name] = bytes(data)
            digests[name] = digest
            # the check covers the digest, the digest the part's bytes
            signed = signed and self.checks.verify("filetable", check, name, digest)
        if not blobs:
            return None
        try:
            if signed and all(digest_bytes(data) == digests[name] for name, data in blobs.items()):
                table = FileTable.from_blobs(blobs)
                table.stored = digests
                return table
        except (KeyError, ValueError, TypeError, UnicodeDecodeError):
            pass
        self.untrusted("filetable", "the file table", "every file is scanned afresh")
        return None

    def save_file_table(self, table: FileTable) -> None:
        """Store the table: the parts that differ from what it was loaded from."""
        rows = []
        for name, data in table.to_blobs().items():
            digest = digest_bytes(data)
            if table.stored.get(name) != digest:
                rows.append((name, data, digest, self.checks.check("filetable", name, digest)))
        self.begin()
        self.execute_many("INSERT OR REPLACE INTO filetable VALUES (?, ?, ?, ?)", rows)
        self.commit()
        table.stored.update((name, digest) for name, _, digest, _ in rows)
        table.changed = False

    def log_file_changes(self, changes: Iterable[tuple[str, str]]) -> None:
        """Log content changes (path, kind) under this generation."""
        gen = self.generation
        self.begin()
        self.execute_many(
            "INSERT INTO file_changes VALUES (?, ?, ?, ?)",
            (
                (gen, path, kind, self.checks.check("file_changes", gen, path, kind))
                for path, kind in changes
            ),
        )
        self.commit()

    def file_changes(self, since: int) -> list[tuple[str, str]]:
        """(path, kind) of every file change logged after generation `since`, oldest first;
        CacheCorrupt if one fails its check (a change lost would leave a result stale)."""
        found = []
        for gen, path, kind, check in self.execute(
            "SELECT gen, path, kind, check_ FROM file_changes WHERE gen > ? ORDER BY gen", (since,)
        ):
            if not self.checks.verify("file_changes", check, gen, path, kind):
                then = "the run starts again with every stage planned afresh"
                raise CacheCorrupt(self.untrusted("file_changes", "a logged file change", then))
            found.append((path, kind))
        return found

    def prune_file_changes(self, before: int) -> None:
        self.execute("DELETE FROM file_changes WHERE gen < ?", (before,))

    # -- stage records ---------------------------------------------------------------------------
    def record(self, stage: str) -> dict | None:
        row = self.execute(
            "SELECT stage, data, check_ FROM records WHERE stage = ?", (stage,)
        ).fetchone()
        return None if row is None else self._record(*row)

    def records(self) -> dict[str, dict]:
        found = {}
        for row in self.execute("SELECT stage, data, check_ FROM records"):
            record = self._record(*row)
            if record is not None:
                found[row[0]] = record
        return found

    def _record(self, stage: str, data: bytes, check: bytes) -> dict | None:
        """A stored record; None (the stage runs as if it never had) when it is damaged."""
        data = bytes(data)
        try:
            if self.checks.verify("records", check, stage, data):
                record = loads(data)
                if isinstance(record, dict):
                    return record
        except CodecError:
            pass
        self.untrusted("records", f"the record of {stage}", "skipped, the stage plans afresh")
        return None

    def put_record(self, stage: str, record: dict) -> None:
        data = dumps(record)
        check = self.checks.check("records", stage, data)
        self.execute("INSERT OR REPLACE INTO records VALUES (?, ?, ?)", (stage, data, check))

    def forget_stages(self) -> None:
        """Drop every stage's record, units and values, and the change log only records read
        (the file table and the signatures of published files stay): the next stages plan
        from scratch."""
        self.begin()
        for table in ("records", "units", "reads", "entries", "file_changes"):
            self.execute(f"DELETE FROM {table}")
        self.commit()

    def drop_record(self, stage: str) -> None:
        self.execute("DELETE FROM records WHERE stage = ?", (stage,))

    # -- units and what they read ------------------------------------------------------------------
    def units(self, stage: str, ids: Iterable[str] | None = None) -> dict[str, StoredUnit]:
        """The stage's stored units (all, or those named); CacheCorrupt if one is damaged."""
        if ids is None:
            rows = self.execute(
                "SELECT id, key, result, digest, data, check_ FROM units WHERE stage = ?", (stage,)
            ).fetchall()
        else:
            wanted = sorted(set(ids))
            rows = []
            for chunk in chunks(wanted, 500):
                marks = ",".join("?" * len(chunk))
                rows += self.execute(
                    "SELECT id, key, result, digest, data, check_ FROM units WHERE stage = ? "
                    f"AND id IN ({marks})",
                    (stage, *chunk),
                ).fetchall()
        found = {}
        for unit_id, key, result, digest, data, check in rows:
            self._verify_unit(stage, unit_id, key, result, digest, check)
            try:  # the check covers the digest, the digest the data
                if digest_bytes(data) == digest.hex():
                    found[unit_id] = StoredUnit(unit_id, key.hex(), result.hex(), loads(data))
                    continue
            except CodecError:
                pass
            raise CacheCorrupt(f"a stored unit of {stage} ({unit_id}) is damaged")
        return found

    def unit_keys(self, stage: str) -> dict[str, tuple[str, str]]:
        """unit id → (static key digest, result digest), for every unit of the stage."""
        found = {}
        for unit_id, key, result, digest, check in self.execute(
            "SELECT id, key, result, digest, check_ FROM units WHERE stage = ?", (stage,)
        ):
            self._verify_unit(stage, unit_id, key, result, digest, check)
            found[unit_id] = (bytes(key).hex(), bytes(result).hex())
        return found

    def _verify_unit(self, stage: str, unit_id: str, key, result, digest, check) -> None:
        """Raise CacheCorrupt unless the unit's row passes its check. Not "absent": the stage
        would keep the unit's old result without running it. The run starts again with every
        stage planned afresh (scheduler.run_build)."""
        if not self.checks.verify("units", check, stage, unit_id, key, result, digest):
            then = "the run starts again with every stage planned afresh"
            raise CacheCorrupt(
                self.untrusted("units", f"a stored unit of {stage} ({unit_id})", then)
            )

    def put_units(self, stage: str, units: Iterable[tuple[str, str, str, Any]]) -> None:
        """Store units: (id, static key digest, result digest, data)."""
        rows = []
        for unit_id, key, result, data in units:
            data = dumps(data)
            fields = (bytes.fromhex(key), bytes.fromhex(result), bytes.fromhex(digest_bytes(data)))
            check = self.checks.check("units", stage, unit_id, *fields)
            rows.append((stage, unit_id, *fields, data, check))
        rows.sort()
        self.execute_many("INSERT OR REPLACE INTO units VALUES (?, ?, ?, ?, ?, ?, ?)", rows)

    def drop_units(self, stage: str, ids: Iterable[str]) -> None:
        ids = list(ids)
        self.execute_many("DELETE FROM units WHERE stage = ? AND id = ?", ((stage, i) for i in ids))
        self.execute_many(
            "DELETE FROM reads WHERE stage = ? AND unit = ?", ((stage, i) for i in ids)
        )

    def drop_stage_units(self, stage: str) -> None:
        self.execute("DELETE FROM units WHERE stage = ?", (stage,))
        self.execute("DELETE FROM reads WHERE stage = ?", (stage,))

    def put_reads(self, stage: str, reads: Iterable[tuple[str, str]]) -> None:
        """Record that units read (or looked for) files: (unit id, path)."""
        rows = sorted({(path, stage, unit_id) for unit_id, path in reads})
        self.execute_many("INSERT OR IGNORE INTO reads VALUES (?, ?, ?)", rows)

    def readers(self, stage: str, paths: Iterable[str]) -> dict[str, list[str]]:
        """The stage's units that read (or looked for) any of these files → those files."""
        found: dict[str, list[str]] = {}
        for chunk in chunks(sorted(set(paths)), 500):
            marks = ",".join("?" * len(chunk))
            for path, unit in self.execute(
                f"SELECT path, unit FROM reads WHERE stage = ? AND path IN ({marks})",
                (stage, *chunk),
            ):
                found.setdefault(unit, []).append(path)
        return found

    def stages_reading(self, paths: Iterable[str]) -> set[str]:
        found: set[str] = set()
        for chunk in chunks(sorted(set(paths)), 500):
            marks = ",".join("?" * len(chunk))
            found.update(
                stage
                for (stage,) in self.execute(
                    f"SELECT DISTINCT stage FROM reads WHERE path IN ({marks})", chunk
                )
            )
        return found

    # -- published files -------------------------------------------------------------------------
    def output_digest(self, relpath: str, st: os.stat_result) -> str | None:
        """The digest of a published file when its signature is the one recorded."""
        row = self._output_row(relpath)
        if row and tuple(row[:4]) == (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino):
            return str(row[4])
        return None

    def _output_row(self, relpath: str) -> tuple | None:
        """(size, mtime, ctime, ino, digest) recorded for a published file: one query each for
        the first few, then every row read at once. A row that fails its check is none (the
        file is hashed again, and its row written anew)."""
        if self._outputs is None and self._output_lookups < SINGLE_OUTPUT_LOOKUPS:
            self._output_lookups += 1
            rows = self.execute("SELECT * FROM outputs WHERE path = ?", (relpath,))
        elif self._outputs is None:
            rows = self.execute("SELECT * FROM outputs")
            self._outputs = {}
        else:
            return self._outputs.get(relpath)
        found = {}
        for path, *row, check in rows:
            if self.checks.verify("outputs", check, path, *row):
                found[path] = tuple(row)
            else:
                self.untrusted("outputs", f"the record of published file {path}", "hashed again")
        if self._outputs is not None:
            self._outputs = found
        return found.get(relpath)

    def put_output(self, relpath: str, st: os.stat_result, digest: str) -> None:
        row = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, digest)
        check = self.checks.check("outputs", relpath, *row)
        self.execute(
            "INSERT OR REPLACE INTO outputs VALUES (?, ?, ?, ?, ?, ?, ?)", (relpath, *row, check)
        )
        if self._outputs is not None:
            self._outputs[relpath] = row

    def rollback(self) -> None:
        self._outputs = None  # rows put since the transaction began are gone again
        super().rollback()
