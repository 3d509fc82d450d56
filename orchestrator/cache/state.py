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
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ..codec import loads
from ..errors import CacheCorrupt, CodecError
from ..files.confined import ConfinedFolder
from ..hashing import digest_bytes, digest_value
from .entries import WHOLE, ValueStore
from .records import StageRows
from .resident import DecodedEntries, KeptDigests
from .signing import EntryKey
from .statedb import StateDatabase
from .stores import RESTART, FileTableStore, OutputStore, RecordStore, UnitStore
from .taken import UNITS, VALUE, TakenPart, TakenUnits, TakenValue

__all__ = ["WHOLE", "BuildState", "machine_id"]

SCHEMA_VERSION = 8  # 4: rows carry a check of their bytes; large rows in rowid tables
# 5: a unit's reads are found by unit (dropping one scanned every read)
# 6: rows signed with the farm's key (a unit's check covers the digest of its data)
# 7: records and units stored as typed records (cache/records.py)
# 8: stages taken whole are held by reference until changed (cache/taken.py)
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
CREATE TABLE IF NOT EXISTS taken (kind TEXT NOT NULL, name TEXT NOT NULL, stage TEXT NOT NULL,
    blob TEXT NOT NULL, gen INTEGER NOT NULL, check_ BLOB, PRIMARY KEY (kind, name));
CREATE TABLE IF NOT EXISTS outputs (path TEXT PRIMARY KEY, size INTEGER NOT NULL,
    mtime INTEGER NOT NULL, ctime INTEGER NOT NULL, ino INTEGER NOT NULL, digest TEXT NOT NULL,
    check_ BLOB);
"""


#: A taken value of fewer entries is written in at once (a millisecond): what reads a summary
#: value (a no-op's verdict reads several) must not read its stage's blob (1.3 s at 100,000
#: resources, for collect's).
HELD_ENTRIES = 1000


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


class TakenStore:
    """The parts of stages taken whole the state holds by reference (the `taken` table:
    cache/taken.py), and their stage's values, read from the blob store once per process (its
    units only when they are settled: kept, the reads of 100,000 resources' units held 200 MB
    more through the run that took them)."""

    def __init__(self, db: StateDatabase, blobs: Any) -> None:
        self.db = db
        self.blobs = blobs
        self._parts: dict[tuple[str, str], TakenPart] | None = None  # None: read again
        self._stage_values: dict[str, dict[str, list[list]]] = {}  # blob → its values
        # (value, blob) → the value as taken: made once, as its index by key is
        self._values: dict[tuple[str, str], TakenValue] = {}

    def forget_unsaved(self) -> None:
        """Parts put or settled since the transaction began may be back or gone (a rollback)."""
        self._parts = None

    def _all(self) -> dict[tuple[str, str], TakenPart]:
        if self._parts is None:
            parts = {}
            db = self.db
            for kind, name, stage, blob, gen, check in db.execute("SELECT * FROM taken"):
                if not db.checks.verify("taken", check, kind, name, stage, blob, gen):
                    what = f"the taken {kind} {name}"
                    raise CacheCorrupt(db.untrusted("taken", what, RESTART))
                parts[kind, name] = TakenPart(stage, blob, gen)
            self._parts = parts
        return self._parts

    def put(self, stage: str, blob: str, rows: StageRows, values: Iterable[str]) -> None:
        """Name the blob of a stage's rows for its units and those of its values, as taken by
        this run's generation; the caller has made sure the state holds nothing of them."""
        gen, checks = self.db.generation, self.db.checks
        parts = [(UNITS, stage)] + [(VALUE, name) for name in values]
        self.db.execute_many(
            "INSERT OR REPLACE INTO taken VALUES (?, ?, ?, ?, ?, ?)",
            (
                (kind, name, stage, blob, gen, checks.check("taken", kind, name, stage, blob, gen))
                for kind, name in parts
            ),
        )
        self._stage_values[blob] = rows.values
        known = self._all()
        known.update(((kind, name), TakenPart(stage, blob, gen)) for kind, name in parts)

    def holds(self, kind: str, name: str) -> bool:
        return (kind, name) in self._all()

    def generation(self, value: str) -> int | None:
        """The generation that took a value (None: not taken), without reading its blob."""
        part = self._all().get((VALUE, value))
        return None if part is None else part.generation

    def value(self, name: str) -> TakenValue | None:
        part = self._all().get((VALUE, name))
        if part is None:
            return None
        found = self._values.get((name, part.blob))
        if found is None or found.generation != part.generation:
            values = self._stage_values.get(part.blob)
            if values is None:
                values = self._stage_values[part.blob] = self._stage_rows(part).values
            if name not in values:
                raise CacheCorrupt(f"the rows of taken stage {part.stage} hold no value {name}")
            found = self._values[name, part.blob] = TakenValue(part.generation, values[name])
        return found

    def units(self, stage: str) -> TakenUnits | None:
        part = self._all().get((UNITS, stage))
        if part is None:
            return None
        rows = self._stage_rows(part)
        return TakenUnits(rows.units, rows.reads)

    def _stage_rows(self, part: TakenPart) -> StageRows:
        try:
            found = loads(self.blobs.get_blob(part.blob))
        except CodecError as exc:
            raise CacheCorrupt(f"the rows of taken stage {part.stage}: {exc}") from None
        if not isinstance(found, StageRows) or not isinstance(found.values, dict):
            raise CacheCorrupt(f"the rows of taken stage {part.stage} are no stage's rows")
        return found

    def settle(self, kind: str, name: str, write: Callable[[], None]) -> None:
        """Write a part's rows into the state (`write` stores them as they were taken) and
        hold it by reference no more: all or nothing."""
        with self.db.atomic():
            write()
            self.drop(kind, name)

    def drop(self, kind: str, name: str) -> None:
        """The part is no longer taken (settled, or its rows dropped)."""
        self.db.execute("DELETE FROM taken WHERE kind = ? AND name = ?", (kind, name))
        self._all().pop((kind, name), None)

    def drop_all(self) -> None:
        self.db.execute("DELETE FROM taken")
        self._parts = {}


class BuildState:
    """The database of one scope (see the module's docstring), as the stores it is made of:
    `files` (the file table and its change log), `records` (each stage's), `units` (and what
    they read), `values` (entry by entry), `outputs` (published files' signatures) and `taken`
    (stages taken whole, held by reference). One transaction spans them all (`begin`,
    `commit`, `rollback`)."""

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
        kept: KeptDigests | None = None,
    ) -> None:
        root_dev = os.stat(project_root).st_dev if os.path.isdir(project_root) else 0
        scope = digest_value([project_root, output_dir, root_dev])[:24]
        folder = ConfinedFolder(cache_root, "cache folder")
        path = folder.path(f"state/{machine_id()}/{scope}.sqlite")
        self.db = StateDatabase(path, SCHEMA, SCHEMA_VERSION, log, scratch, folder, key)
        self.files = FileTableStore(self.db)
        self.records = RecordStore(self.db)
        self.taken = TakenStore(self.db, blobs)
        self.units = UnitStore(self.db, self.taken)
        self.values = ValueStore(self.db, blobs, self.taken, decoded, kept)
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
        self.taken.drop_all()
        self.db.commit()
        self.values.forget_unsaved()

    def take(self, stage: str, blob: str, rows: StageRows) -> None:
        """Make what the state holds of a stage the rows another build of it left (`blob`
        holds them): when the state holds nothing of it (a fresh checkout), its units and its
        large values by reference (written only when something changes them, cache/taken.py)
        and its small ones written now; else all written now, each value's entries diffed
        against those stored (consumers see what changed)."""
        self.values.forget_unsaved()  # rows taken by reference are read as taken from now on
        outputs = [name for name in rows.values if self.values.has(name)]
        held: list[str] = []
        if not outputs and not self.units.holds(stage):
            held = [
                name for name, live in rows.values.items() if live and len(live) >= HELD_ENTRIES
            ]
            self.taken.put(stage, blob, rows, held)
        else:
            self.units.put_rows(stage, rows.units, rows.reads)
        for name, entries in rows.values.items():
            if name not in held:
                self.values.put_rows(name, entries)

    def begin(self) -> None:
        self.db.begin()

    def commit(self) -> None:
        self.db.commit()

    def rollback(self) -> None:
        self._forget_unsaved()
        self.db.rollback()

    def _forget_unsaved(self) -> None:
        """What the stores keep in memory of rows a rollback takes back is read again."""
        self.outputs.forget_unsaved()
        self.taken.forget_unsaved()
        self.values.forget_unsaved()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """What the block stores, all or nothing: committed when it ends, rolled back when it
        raises (Ctrl-C included: a stage cut short leaves the state as it was before it);
        inside one already open, part of it."""
        try:
            with self.db.atomic():
                yield
        except BaseException:
            self._forget_unsaved()
            raise

    def close(self) -> None:
        self.taken.forget_unsaved()  # a scratch database's rows are rolled back
        if self.db.scratch:
            self.values.forget_unsaved()
        self.db.close()
