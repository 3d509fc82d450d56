"""A whole stage from the action cache: what a checkout with no build state of its own takes
instead of planning the stage, looking up each of its units and storing its values one by one.

When a stage has run with every unit planned afresh (no record of its own it could use: a cold
build, a fresh checkout, a new fingerprint), its whole run is filed as one more action entry.
Its key is the stage's key prefix (name, version, the product's code, libraries, build-file
slice) with the fingerprints of its input values (every entry's key and digest); its trace,
every file its units and its driver code read with their digests, the project's listing when
it walked it, and the files outside the project it tracked; its result, the rows the build
state keeps of the stage (`StageRows`: its record, its units and what each read, its output
values entry by entry), as stored bytes in one blob.

A stage that would plan afresh looks its key up first. An entry whose every read still holds
its digest is taken whole: its rows go into the build state in bulk (nothing decoded, encoded
or hashed again), its outputs are published from them, and nothing of the stage is planned or
looked up. That rests on the engine's rule that a stage's outputs are a function of what it
declares and traces (its inputs, its fingerprint, what its code and its units read, its units'
results). Where the checkout lies is no input of its own: where it shows in what the stage
stored or in a unit's key (custom rule code keys on it), the entry keys on the project's root
too, so only a checkout at the same path takes it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ..cache import Cache, named_blobs
from ..cache.records import Fingerprint, StageRecord, StageRows, UnitRecord
from ..cache.state import BuildState
from ..codec import dumps, loads
from ..errors import CacheCorrupt, CodecError
from ..files.reads import ENTRY_MARK
from ..hashing import canonical_json, digest_bytes
from ..typing import PROJECT
from .context import Context
from .graph import Stage
from .storing import FreshRows, adopt_stage

#: Raised whenever what a whole-stage entry holds, or how it is keyed, changes.
VERSION = 1
#: The action cache's `stage` column for a whole stage's entry (a unit's holds the stage name).
WHOLE = "whole:"
#: Reads of a trace that are no project file (a project path never holds a NUL).
LISTING = "\0listing"
OUTSIDE = "\0outside\0"  # + the path, relative to the build file's folder when it lies below it


class FoundStage(NamedTuple):
    """What another build of a stage left, whose reads still hold: its rows, and the blob
    that holds them (the build state names it rather than copying them: cache/taken.py)."""

    rows: StageRows
    blob: str


@dataclass(frozen=True)
class WholeStage:
    """A stage planning afresh, as its whole-stage entry goes: its key (unrooted, and with the
    project's root) and what another build of it left, when an entry's reads still hold."""

    stage: Stage
    fingerprint: Fingerprint
    keys: tuple[str, str]  # (without the root, with it)
    found: FoundStage | None = None


class StageEntries:
    """Finds, takes and files whole stages for one run."""

    def __init__(self, cache: Cache, log, use: bool) -> None:
        self.cache = cache
        self.log = log
        self.use = use  # False: file entries, take none (--no-cache)
        self._fingerprints: dict[tuple[str, int], str] = {}  # (value, its generation) → print

    def find(
        self,
        stage: Stage,
        prefix: bytes,
        fingerprint: Fingerprint,
        ctx: Context,
        state: BuildState,
        take: bool,
    ) -> WholeStage:
        """The stage's keys and, when `take`, another build's run of it whose reads hold."""
        names = [name for name in stage.spec.inputs if name != PROJECT]
        prints = {name: self._fingerprint(ctx, state, name) for name in names}
        material = canonical_json([VERSION, prints]) + prefix
        keys = (digest_bytes(material), digest_bytes(material + canonical_json([ctx.root])))
        found = self._lookup(stage.spec.name, keys, ctx) if take and self.use else None
        return WholeStage(stage, fingerprint, keys, found)

    def _fingerprint(self, ctx: Context, state: BuildState, name: str) -> str:
        generation = state.values.generation(name)
        known = self._fingerprints.get((name, generation))
        if known is None:
            # Through the run's entry digests, which keep it: the stage's units that read the
            # whole value are traced with it too (read again: half a second at 100,000).
            known = self._fingerprints[(name, generation)] = ctx.entries.fingerprint(name)
        return known

    def _lookup(self, name: str, keys: tuple[str, str], ctx: Context) -> FoundStage | None:
        for key in keys:
            for entry in self.cache.actions.candidates(WHOLE + name, key):
                files = (read for read in entry.reads if not read[0].startswith(ENTRY_MARK))
                if not all(self._holds(ctx, path, digest) for path, digest in files):
                    continue
                if ctx.entries.changed(entry.reads) is not None:  # entry reads: in one pass
                    continue
                try:
                    rows = loads(self.cache.get_blob(entry.result))
                except (CacheCorrupt, CodecError) as exc:
                    if isinstance(exc, CodecError):  # intact bytes, but no value: never again
                        self.cache.refuse(entry.result, str(exc))
                    self.cache.actions.drop_result(entry.result)  # no entry leads back here
                    continue  # the stage plans afresh
                if isinstance(rows, StageRows) and self._blobs_at_hand(rows):
                    self.cache.actions.touch(WHOLE + name, key, entry.result)
                    return FoundStage(rows, entry.result)
        return None

    def _blobs_at_hand(self, rows: StageRows) -> bool:
        """Whether the blobs the rows name are in the folder, or fetched into it now from the
        cache server: the large values later stages read, and each unit's result (a later
        run that updates the stage reads them, with the server or without it)."""
        results = (bytes(unit[2]).hex() for unit in rows.units if unit[2])
        values = (blob for entries in rows.values.values() for blob in named_blobs(entries))
        return self.cache.has_blobs([*values, *results])

    @staticmethod
    def _holds(ctx: Context, path: str, digest: str | None) -> bool:
        """Whether a read of a trace still finds what it found."""
        if path == LISTING:
            return ctx.listing_digest() == digest
        if path.startswith(OUTSIDE):
            return ctx.digest_outside(str(ctx.build_dir / path[len(OUTSIDE) :])) == digest
        return ctx.digest_of(path) == digest

    # -- taking one ------------------------------------------------------------------------------
    def take(
        self,
        whole: WholeStage,
        ctx: Context,
        state: BuildState,
        outputs: Mapping[str, Any],
        callbacks: Iterable[Callable],
        publish: bool,
    ) -> StageRecord:
        """Store what another build of the stage left as this run's and publish its outputs
        (`outputs`: the run's values of them, read from the rows once stored); its record."""
        assert whole.found is not None
        rows, blob = whole.found
        external = {
            str(ctx.build_dir / path): digest for path, digest in rows.record.external.items()
        }
        record = dataclasses.replace(rows.record, fingerprint=whole.fingerprint, external=external)
        taken = rows._replace(record=record)
        kept = adopt_stage(whole.stage, ctx, state, taken, blob, outputs, callbacks, publish)
        self.log.debug("stage.taken", stage=whole.stage.spec.name, units=record.units)
        return kept

    # -- filing one ------------------------------------------------------------------------------
    def keep(
        self,
        whole: WholeStage,
        ctx: Context,
        state: BuildState,
        due: list[UnitRecord],
        fresh: FreshRows | None = None,
    ):
        """File the stage's run, every unit of it planned afresh, as a whole-stage entry: not
        when a unit failed, or when two of its reads found one file with different bytes.
        `fresh`: the rows the stage has, as storing it left them (else they are read)."""
        trace: dict[str, str | None] = {}
        for record in due:
            if not record.result:
                return
            for path, digest in record.reads.items():
                if trace.setdefault(path, digest) != digest:
                    return
        for path, digest in ctx.stage_reads.items():
            if trace.setdefault(path, digest) != digest:
                return
        if ctx.stage_walked:
            trace[LISTING] = ctx.listing_digest()
        name = whole.stage.spec.name
        stored = state.records.get(name)
        if stored is None:
            return
        external = {_portable(path, ctx.build_dir): d for path, d in stored.external.items()}
        trace.update((OUTSIDE + path, digest) for path, digest in external.items())
        if fresh is None:
            units, reads = state.units.rows(name)
            fresh = FreshRows([list(row) for row in units], [list(row) for row in reads], {})
        rows = StageRows(
            dataclasses.replace(stored, generation=0, published={}, external=external),
            fresh.units,
            fresh.reads,
            {
                output: fresh.values.get(output) or [list(row) for row in state.values.rows(output)]
                for output in whole.stage.spec.outputs
            },
        )
        blob = dumps(rows)
        rooted = self._rooted(ctx.root, blob, rows, due)
        digest = self.cache.put_blob(blob)
        self.cache.actions.put(WHOLE + name, whole.keys[rooted], trace, digest)

    def _rooted(self, root: str, blob: bytes, rows: StageRows, due: list[UnitRecord]) -> bool:
        """Whether where the checkout lies shows in what the stage stored (its large values
        are read again to tell) or in one of its units' keys."""
        mark = root.encode("utf-8", "surrogateescape")
        if mark in blob:
            return True
        if any(mark in canonical_json(record.planned.key) for record in due):
            return True
        return any(  # a large value's entry names its blob
            mark in self.cache.get_blob(blob)
            for entries in rows.values.values()
            for blob in named_blobs(entries)
        )


def _portable(path: str, base: Path) -> str:
    """A path outside the project as a trace keeps it: relative to the build file's folder
    when it lies below it (the rule files beside a build file), else as it is."""
    relative = os.path.relpath(path, base)
    return path if relative.startswith("..") else Path(relative).as_posix()
