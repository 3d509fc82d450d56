"""What the build state records: one record per stage (what its last run left for the next) and
one per unit (its whole life in a run: planned, looked up, run, stored).

ninja's `Edge` carries a step's whole life in one object; `UnitRecord` does the same for a
unit, so the planner, the rebuilder, the store and the reports pass one value along instead of
re-packing the same facts into a new shape at each step.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..codec import record
from ..typing import Unit

NO_RECORD = "no entry"  # why a unit runs when its stage has no record it may use


@record
class Fingerprint(NamedTuple):
    """What a stage's results depend on besides its inputs, by part (so --explain can name the
    part that moved): its version, the libraries', the product's code and the build-file slice
    it reads (digests, shortened)."""

    version: int
    libs: str
    code: str
    slice: str


OutputSignature = tuple[int, int, int, int]
"""How a published file is recognised as untouched since: size, mtime, ctime (a rewrite that
restores size and mtime still moves it) and inode."""


def output_signature(st: os.stat_result) -> OutputSignature:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


@record
@dataclass(frozen=True, slots=True)
class StageRecord:
    """What a stage's last run left: enough to tell, next time, whether anything it depends on
    moved (staleness.py) and to start its `update` from where it stopped."""

    fingerprint: Fingerprint
    generation: int  # the run at which it last ran
    state: Any  # its plan's state (`Plan.state`), handed to its next `update`
    external: dict[str, str | None]  # files outside the project its driver code read → digest
    published: dict[str, OutputSignature]  # files it published → their signature then
    outside: dict[str, str | None]  # files its units read that no rescan watches → digest
    walked: bool  # it listed the project: a file added or removed reaches it
    units: int  # how many units it has (for the report of a run that skips it)


@record
class StageRows(NamedTuple):
    """What the build state keeps of one stage's run, as stored rows, so that another build
    takes it without decoding a value (core/stageentries.py): its record, its units ([id, key,
    result, digest, data] each), the files each read ([path, unit id]) and its output values'
    live entries ([key, digest, data]). Rows are plain lists, not records: a stage can have a
    hundred thousand, and msgpack reads a list of bytes without a call per row."""

    record: StageRecord
    units: list[list]
    reads: list[list[str]]
    values: dict[str, list[list]]


@record
@dataclass(slots=True)
class UnitRecord:
    """A unit's life in one run. Made when the unit is planned (or read back from the build
    state), given its `result` when the action cache has it or when it has run, stored with the
    stage. `planned` is the unit as the stage made it (its declared key is not kept once
    `static`, the digest its action entries are filed under, is computed)."""

    stage: str
    planned: Unit
    static: str  # digest of the stage's key prefix, the unit's declared key and its id
    parts: dict[str, str]  # digest of each part of its declared key, for --explain
    reason: str = ""  # why it runs this run ("" while it does not)
    stored: bool = False  # the build state held it before this run
    result: str = ""  # digest of its stored result, once known
    reads: dict[str, str | None] = field(default_factory=dict)  # file → digest it read
    ran: bool = False  # executed in this run (not found in the action cache)
    seconds: float = 0.0
    worker: str = "driver"
    start: float = 0.0  # wall-clock time it started

    @property
    def id(self) -> str:
        return self.planned.id

    def explain(self, reason: str) -> None:
        """Why it runs this run (sharpened as more is known: a changed file, a key part)."""
        self.reason = reason

    def found(self, result: str, reads: dict[str, str | None]) -> None:
        """The action cache had its result, for these reads."""
        self.result, self.reads = result, reads

    def finished(
        self, result: str, reads: dict[str, str | None], seconds: float, worker: str, start: float
    ) -> None:
        """It ran now, there and then, read these files and made this result."""
        self.result, self.reads, self.ran = result, reads, True
        self.seconds, self.worker, self.start = seconds, worker, start

    def kept(self) -> UnitRecord:
        """The record as the build state keeps it (and the next run reads back): no declared
        key, no reasons or timings, and a payload only when the unit read files (only such a
        unit is ever re-run from the state, when one of them changes)."""
        planned = self.planned
        payload = planned.payload if self.reads else None
        return UnitRecord(
            self.stage,
            Unit(planned.id, payload, None, planned.files, planned.blobs, planned.cost),
            self.static,
            self.parts,
            stored=True,  # as the next run reads it back
            result=self.result,
        )


class UnitKeys(NamedTuple):
    """What the state holds of every unit of a stage, read whole when a stage plans everything:
    the digest its action entries are filed under and its result's digest."""

    static: str
    result: str
