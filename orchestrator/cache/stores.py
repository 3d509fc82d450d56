"""The small stores a build state is made of (state.py composes them), each over its own tables
of one database, each with a handful of methods: the file table and its change log, the stages'
records, their units and what each read, and the published files' signatures. (The stage
values, entry by entry, are entries.py's.) Every row read is verified against its check
(statedb.RowChecks: keyed with the farm's key)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from ..codec import dumps, loads
from ..errors import CacheCorrupt, CodecError
from ..files.changes import FileChanges
from ..files.filetable import FileTable
from ..files.reads import entry_path
from ..hashing import digest_bytes
from .records import StageRecord, UnitKeys, UnitRecord
from .statedb import StateDatabase, chunks
from .taken import UNITS, TakenParts

#: Published files looked up one query each before the run reads their rows whole.
SINGLE_OUTPUT_LOOKUPS = 64
RESTART = "the run starts again with every stage planned afresh"


class FileTableStore:
    """The file table the last run saved, and the log of content changes by generation."""

    def __init__(self, db: StateDatabase) -> None:
        self.db = db

    def load(self) -> FileTable | None:
        """The table the last run saved; None when there is none or it is damaged (each part
        is checked against its digest, and its row against its check)."""
        db, blobs, digests = self.db, {}, {}
        signed = True
        for name, data, digest, check in db.execute("SELECT * FROM filetable"):
            blobs[name] = bytes(data)
            digests[name] = digest
            # the check covers the digest, the digest the part's bytes
            signed = signed and db.checks.verify("filetable", check, name, digest)
        if not blobs:
            return None
        try:
            if signed and all(digest_bytes(data) == digests[name] for name, data in blobs.items()):
                return FileTable.from_blobs(blobs, stored=digests)
        except (KeyError, ValueError, TypeError, UnicodeDecodeError):
            pass
        db.untrusted("filetable", "the file table", "every file is scanned afresh")
        return None

    def save(self, table: FileTable) -> None:
        """Store the table: the parts that differ from what it was loaded from."""
        db, rows = self.db, []
        for name, data in table.to_blobs().items():
            digest = digest_bytes(data)
            if table.stored.get(name) != digest:
                rows.append((name, data, digest, db.checks.check("filetable", name, digest)))
        db.begin()
        db.execute_many("INSERT OR REPLACE INTO filetable VALUES (?, ?, ?, ?)", rows)
        db.commit()
        table.saved({name: digest for name, _, digest, _ in rows})

    def log_changes(self, changes: FileChanges) -> None:
        """Log content changes under this run's generation."""
        db, gen = self.db, self.db.generation
        db.begin()
        db.execute_many(
            "INSERT INTO file_changes VALUES (?, ?, ?, ?)",
            (
                (gen, path, kind, db.checks.check("file_changes", gen, path, kind))
                for path, kind in changes.logged()
            ),
        )
        db.commit()

    def changes_since(self, since: int) -> FileChanges:
        """What the changes logged after generation `since` amount to; CacheCorrupt if one
        fails its check (a change lost would leave a result stale)."""
        logged = []
        for gen, path, kind, check in self.db.execute(
            "SELECT gen, path, kind, check_ FROM file_changes WHERE gen > ? ORDER BY gen", (since,)
        ):
            if not self.db.checks.verify("file_changes", check, gen, path, kind):
                raise CacheCorrupt(self.db.untrusted("file_changes", "a logged change", RESTART))
            logged.append((path, kind))
        return FileChanges.net(logged)

    def prune_changes(self, before: int) -> None:
        self.db.execute("DELETE FROM file_changes WHERE gen < ?", (before,))


class RecordStore:
    """Each stage's record: what its last run left (records.StageRecord)."""

    def __init__(self, db: StateDatabase) -> None:
        self.db = db

    def get(self, stage: str) -> StageRecord | None:
        row = self.db.execute(
            "SELECT stage, data, check_ FROM records WHERE stage = ?", (stage,)
        ).fetchone()
        return None if row is None else self._record(*row)

    def all(self) -> dict[str, StageRecord]:
        found = {}
        for row in self.db.execute("SELECT stage, data, check_ FROM records"):
            record = self._record(*row)
            if record is not None:
                found[row[0]] = record
        return found

    def _record(self, stage: str, data: bytes, check: bytes) -> StageRecord | None:
        """A stored record; None (the stage runs as if it never had) when it is damaged."""
        data = bytes(data)
        try:
            if self.db.checks.verify("records", check, stage, data):
                record = loads(data)
                if isinstance(record, StageRecord):
                    return record
        except CodecError:
            pass
        self.db.untrusted("records", f"the record of {stage}", "skipped, the stage plans afresh")
        return None

    def put(self, stage: str, record: StageRecord) -> None:
        data = dumps(record)
        check = self.db.checks.check("records", stage, data)
        self.db.execute("INSERT OR REPLACE INTO records VALUES (?, ?, ?)", (stage, data, check))


class WrittenUnits(NamedTuple):
    """What `UnitStore.put` wrote: the units' rows (stage, id, key, result, digest, data,
    check) in order, the rows of reads it added (path, stage, unit) in order, and whether it
    deleted any of the reads rows it found."""

    rows: list[tuple]
    gained: list[tuple[str, str, str]]
    lost: bool


class UnitStore:
    """Each stage's units as their last run left them (records.UnitRecord), and the reverse
    index of what they read: which units read a file, so an edit re-runs just those. The units
    of a stage taken whole are written here when first asked for (cache/taken.py)."""

    COLUMNS = "id, key, result, digest, data, check_"

    def __init__(self, db: StateDatabase, taken: TakenParts) -> None:
        self.db = db
        self.taken = taken

    def _settle(self, stage: str) -> None:
        """Write a taken stage's units and reads into the state, before they are read or
        changed."""
        taken = self.taken.units(stage)
        if taken is not None:
            units, reads = taken
            self.taken.settle(UNITS, stage, lambda: self._insert(stage, units, reads))

    def get(self, stage: str, ids: Iterable[str] | None = None) -> dict[str, UnitRecord]:
        """The stage's stored units (all, or those named); CacheCorrupt if one is damaged."""
        found = {}
        for unit_id, key, result, digest, data, check in self._rows(self.COLUMNS, stage, ids):
            self._verify(stage, unit_id, key, result, digest, check)
            try:  # the check covers the digest, the digest the data
                if digest_bytes(data) == digest.hex():
                    record = loads(data)
                    if isinstance(record, UnitRecord):
                        found[unit_id] = record
                        continue
            except CodecError:
                pass
            raise CacheCorrupt(f"a stored unit of {stage} ({unit_id}) is damaged")
        return found

    def keys(self, stage: str, ids: Iterable[str] | None = None) -> dict[str, UnitKeys]:
        """Every unit of the stage (or those named that it has): its static key and its
        result (nothing decoded)."""
        found = {}
        for unit_id, key, result, digest, check in self._rows(
            "id, key, result, digest, check_", stage, ids
        ):
            self._verify(stage, unit_id, key, result, digest, check)
            found[unit_id] = UnitKeys(bytes(key).hex(), bytes(result).hex())
        return found

    def _rows(self, columns: str, stage: str, ids: Iterable[str] | None) -> list[tuple]:
        """The columns of the stage's units (all, or those named)."""
        self._settle(stage)
        select = f"SELECT {columns} FROM units WHERE stage = ?"
        if ids is None:
            return self.db.execute(select, (stage,)).fetchall()
        rows = []
        for chunk in chunks(sorted(set(ids)), 500):
            marks = ",".join("?" * len(chunk))
            rows += self.db.execute(f"{select} AND id IN ({marks})", (stage, *chunk)).fetchall()
        return rows

    def count(self, stage: str) -> int:
        """How many units the stage has."""
        self._settle(stage)
        return self.db.execute("SELECT count(*) FROM units WHERE stage = ?", (stage,)).fetchone()[0]

    def _verify(self, stage: str, unit_id: str, key, result, digest, check) -> None:
        """Raise CacheCorrupt unless the unit's row passes its check. Not "absent": the stage
        would keep the unit's old result without running it."""
        if not self.db.checks.verify("units", check, stage, unit_id, key, result, digest):
            what = f"a stored unit of {stage} ({unit_id})"
            raise CacheCorrupt(self.db.untrusted("units", what, RESTART))

    def put(self, stage: str, records: Iterable[UnitRecord]) -> WrittenUnits:
        """Store units as the next run needs them, and make what each read exactly its files:
        only the rows of reads it gained or lost are written (a unit that ran again after an
        edit mostly read what it read before: at 100,000 resources a rule unit of a repository
        reads a hundred thousand index entries, rewritten whole for nothing before). Returns
        the rows written."""
        self._settle(stage)
        db, rows = self.db, []
        gained: list[tuple[str, str, str]] = []
        lost: list[tuple[str, str, str]] = []
        for record in records:
            data = dumps(record.kept())
            static, result = bytes.fromhex(record.static), bytes.fromhex(record.result)
            fields = (static, result, bytes.fromhex(digest_bytes(data)))
            check = db.checks.check("units", stage, record.id, *fields)
            rows.append((stage, record.id, *fields, data, check))
            held = self._read_paths(stage, record.id) if record.stored else set()
            # Set differences, in C: a rule unit reads a hundred thousand index entries, and
            # after an edit gains or loses a handful.
            reads = record.reads.keys()
            gained.extend((path, stage, record.id) for path in reads - held)
            lost.extend((path, stage, record.id) for path in held - reads)
        rows.sort()
        gained.sort()
        db.execute_many("INSERT OR REPLACE INTO units VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        db.execute_many("DELETE FROM reads WHERE path = ? AND stage = ? AND unit = ?", sorted(lost))
        db.execute_many("INSERT OR IGNORE INTO reads VALUES (?, ?, ?)", gained)
        return WrittenUnits(rows, gained, bool(lost))

    def _read_paths(self, stage: str, unit_id: str) -> set[str]:
        """What the reverse index holds of one unit's reads."""
        rows = self.db.execute(
            "SELECT path FROM reads WHERE stage = ? AND unit = ?", (stage, unit_id)
        )
        return {path for (path,) in rows}

    def rows(self, stage: str) -> tuple[list[tuple], list[tuple[str, str]]]:
        """The stage's units as stored, (id, key, result, digest, data) each, verified, and
        what each read, (path, unit id): what another build of it takes with `put_rows`."""
        self._settle(stage)
        units = []
        for unit_id, key, result, digest, data, check in self.db.execute(
            f"SELECT {self.COLUMNS} FROM units WHERE stage = ? ORDER BY id", (stage,)
        ):
            self._verify(stage, unit_id, key, result, digest, check)
            units.append((unit_id, bytes(key), bytes(result), bytes(digest), bytes(data)))
        reads = self.db.execute(
            "SELECT path, unit FROM reads WHERE stage = ? ORDER BY path, unit", (stage,)
        )
        return units, [(path, unit) for path, unit in reads]

    def put_rows(self, stage: str, units: Iterable[Sequence], reads: Iterable[Sequence]) -> None:
        """Make the stage's units exactly these stored rows (as `rows` gives them), in bulk:
        nothing decoded (a unit's data is checked against its digest when read)."""
        self.drop_stage(stage)
        self._insert(stage, units, reads)

    def _insert(self, stage: str, units: Iterable[Sequence], reads: Iterable[Sequence]) -> None:
        checks = self.db.checks
        self.db.execute_many(
            "INSERT INTO units VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                (stage, unit_id, key, result, digest, data,
                 checks.check("units", stage, unit_id, key, result, digest))
                for unit_id, key, result, digest, data in units
            ),
        )  # fmt: skip
        self.db.execute_many(
            "INSERT OR IGNORE INTO reads VALUES (?, ?, ?)",
            ((path, stage, unit_id) for path, unit_id in reads),
        )

    def holds(self, stage: str) -> bool:
        """Whether the state holds any unit of the stage (stored or taken)."""
        if self.taken.holds(UNITS, stage):
            return True
        row = self.db.execute("SELECT 1 FROM units WHERE stage = ? LIMIT 1", (stage,)).fetchone()
        return row is not None

    def drop(self, stage: str, ids: Iterable[str]) -> None:
        self._settle(stage)
        pairs = [(stage, unit_id) for unit_id in ids]
        self.db.execute_many("DELETE FROM units WHERE stage = ? AND id = ?", pairs)
        self.db.execute_many("DELETE FROM reads WHERE stage = ? AND unit = ?", pairs)

    def drop_stage(self, stage: str) -> None:
        if self.taken.holds(UNITS, stage):  # nothing of it is kept: its rows need not be written
            self.taken.drop(UNITS, stage)
        self.db.execute("DELETE FROM units WHERE stage = ?", (stage,))
        self.db.execute("DELETE FROM reads WHERE stage = ?", (stage,))

    def reads_entries(self, stage: str, value: str) -> bool:
        """Whether any unit of the stage read an entry of `value` (an entry read's path is
        ENTRY_MARK, the value's name, `/` and the key: files/reads.py)."""
        self._settle(stage)
        prefix = entry_path(value, "")
        row = self.db.execute(
            "SELECT 1 FROM reads WHERE path >= ? AND path < ? AND stage = ? LIMIT 1",
            (prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1), stage),
        ).fetchone()
        return row is not None

    def readers(self, stage: str, paths: Iterable[str]) -> dict[str, list[str]]:
        """The stage's units that read (or looked for) any of these files → those files."""
        self._settle(stage)
        found: dict[str, list[str]] = {}
        for chunk in chunks(sorted(set(paths)), 500):
            marks = ",".join("?" * len(chunk))
            for path, unit in self.db.execute(
                f"SELECT path, unit FROM reads WHERE stage = ? AND path IN ({marks})",
                (stage, *chunk),
            ):
                found.setdefault(unit, []).append(path)
        return found


class OutputStore:
    """The digests of published files by the signature they had when written or checked, so
    that telling an output file untouched costs one `stat`."""

    def __init__(self, db: StateDatabase) -> None:
        self.db = db
        # Rows read whole once a run has looked up more than a few: a publish checks thousands
        # of bundle files, and a query each cost more than that.
        self._rows: dict[str, tuple] | None = None
        self._lookups = 0

    def digest(self, relpath: str, st: os.stat_result) -> str | None:
        """The digest of a published file when its signature is the one recorded."""
        row = self._row(relpath)
        if row and tuple(row[:4]) == (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino):
            return str(row[4])
        return None

    def _row(self, relpath: str) -> tuple | None:
        """(size, mtime, ctime, ino, digest) recorded for a published file: one query each for
        the first few, then every row read at once. A row that fails its check is none (the
        file is hashed again, and its row written anew)."""
        if self._rows is None and self._lookups < SINGLE_OUTPUT_LOOKUPS:
            self._lookups += 1
            rows = self.db.execute("SELECT * FROM outputs WHERE path = ?", (relpath,))
        elif self._rows is None:
            rows = self.db.execute("SELECT * FROM outputs")
            self._rows = {}
        else:
            return self._rows.get(relpath)
        found = {}
        for path, *row, check in rows:
            if self.db.checks.verify("outputs", check, path, *row):
                found[path] = tuple(row)
            else:
                what = f"the record of published file {path}"
                self.db.untrusted("outputs", what, "hashed again")
        if self._rows is not None:
            self._rows = found
        return found.get(relpath)

    def put(self, relpath: str, st: os.stat_result, digest: str) -> None:
        row = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, digest)
        check = self.db.checks.check("outputs", relpath, *row)
        self.db.execute(
            "INSERT OR REPLACE INTO outputs VALUES (?, ?, ?, ?, ?, ?, ?)", (relpath, *row, check)
        )
        if self._rows is not None:
            self._rows[relpath] = row

    def forget_unsaved(self) -> None:
        """Rows put since the transaction began are gone again (a rollback)."""
        self._rows = None
