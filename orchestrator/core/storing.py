"""What a stage leaves for the next run, written in one transaction of the build state.

The units that ran (their records) and the files each read (the reverse index), the stage's
output values entry by entry, what it published, and its record. Publishing happens inside the
transaction: a run killed mid-publish leaves the previous record, so the next run does the stage
again rather than trusting files it may not have finished.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..cache.records import Fingerprint, StageRecord, StageRows, UnitRecord, output_signature
from ..cache.state import WHOLE, BuildState
from ..files.reads import entry_read
from ..keyed import KeyedPatch
from ..memory import paused_gc
from ..typing import PROJECT, Plan
from .context import Context
from .graph import Stage
from .values import UNCHANGED


def store_stage(
    stage: Stage,
    ctx: Context,
    state: BuildState,
    stored: StoredStage,
    outputs: dict,
    callbacks: Iterable[Callable] = (),
    publish: bool = True,
) -> Stored:
    """Store the stage's units, reads, values, publications and record, all or nothing
    (without `publish`, a dry run's: the stage's `publish` hook is not called); the record,
    and for a stage planned afresh the rows it now has (`FreshRows`) when they are known."""
    spec = stage.spec
    previous = stored.previous
    with state.transaction():
        finished = [record for record in stored.due if record.result]
        outside = dict(previous.outside) if previous else {}
        for record in finished:
            for path, digest in record.reads.items():  # what a rescan would not notice
                if entry_read(path) is None and not ctx.files.tracks(ctx.root, path, digest):
                    outside[path] = digest
        if previous is None:  # the plan named every unit the stage has: the others go
            state.units.drop_stage(spec.name)
        written = state.units.put(spec.name, finished)  # reads rows: only those that differ
        state.units.drop(spec.name, stored.removed)
        live: dict[str, list[list]] = {}
        for name, value in outputs.items():
            rows = store_value(state, name, value, name in spec.keyed)
            if rows is not None:
                live[name] = rows
            ctx.entries.forget(name)
        stage_record = StageRecord(
            fingerprint=stored.fingerprint,
            generation=state.generation,
            state=stored.plan.state,
            external=dict(ctx.stage_external),
            published={},
            outside=outside,
            walked=ctx.stage_walked or PROJECT in spec.inputs,
            units=stored.units,
        )
        kept = _publish(stage, ctx, state, stage_record, outputs, callbacks, publish)
    fresh = None
    if previous is None and not stored.removed and not written.lost:
        # Only the units this store wrote are there (the stage's were dropped first), and the
        # keyed values it replaced whole are exactly what it wrote. A row per file a unit read:
        # a million lists at 100,000 resources, none in a cycle (memory.py).
        with paused_gc():
            fresh = FreshRows(
                [
                    [unit_id, key, result, digest, data]
                    for _, unit_id, key, result, digest, data, _ in written.rows
                ],
                [[path, unit_id] for path, _, unit_id in written.gained],
                live,
            )
    return Stored(kept, fresh)


def adopt_stage(
    stage: Stage,
    ctx: Context,
    state: BuildState,
    taken: StageRows,
    blob: str,
    outputs: Mapping[str, Any],
    callbacks: Iterable[Callable] = (),
    publish: bool = True,
) -> StageRecord:
    """Store what another build of the stage left (its rows, as stored in `blob`: nothing
    decoded, encoded or hashed again; held by reference in a fresh state) as this run's, then
    publish its outputs (`outputs`, read from those rows) and keep its record with what this
    run published: all or nothing; the record."""
    with state.transaction():
        state.take(stage.spec.name, blob, taken)
        for name in taken.values:
            ctx.entries.forget(name)
        record = dataclasses.replace(taken.record, generation=state.generation, published={})
        return _publish(stage, ctx, state, record, outputs, callbacks, publish)


def _publish(
    stage: Stage,
    ctx: Context,
    state: BuildState,
    record: StageRecord,
    outputs: Mapping[str, Any],
    callbacks: Iterable[Callable],
    publish: bool,
) -> StageRecord:
    """Publish the stage's outputs (its `publish` hook, unless a dry run), tell the callbacks,
    and keep its record with the signatures of the files it published; the record kept."""
    hook = getattr(stage.module, "publish", None) if publish else None
    if hook is not None:
        hook(ctx, outputs)
    for callback in callbacks:
        callback(ctx, outputs)
    published = {}
    for path in sorted(ctx.stage_published):
        st = ctx.stage_signatures.get(path) or ctx.output_folder.lstat(path)
        if st is not None:
            published[path] = output_signature(st)
    kept = dataclasses.replace(record, published=published)
    state.records.put(stage.spec.name, kept)
    return kept


@dataclass(frozen=True)
class FreshRows:
    """The rows a stage planned afresh has once stored, as the build state gives them: its
    units ([id, key, result, digest, data] by id), what each read ([path, unit] by path and
    unit), and the live entries ([key, digest, data] by key) of the keyed values it replaced
    whole (the others are read). Filing the stage whole (stageentries.py) takes them from here
    rather than reading back what was just written: 3 s of the driver's at 100,000 resources."""

    units: list[list]
    reads: list[list]
    values: dict[str, list[list]]


class Stored(NamedTuple):
    """What `store_stage` leaves: the stage's record, and its rows when they are known."""

    record: StageRecord
    fresh: FreshRows | None


@dataclass(frozen=True)
class StoredStage:
    """What a stage's run leaves besides its outputs and what its context recorded: its
    fingerprint, the record it ran against (None: it planned every unit afresh), its plan, the
    records of the units that were due, the units that went away, and how many it has."""

    fingerprint: Fingerprint
    previous: StageRecord | None
    plan: Plan
    due: list[UnitRecord]
    removed: set[str]
    units: int


def store_value(state: BuildState, name: str, value: Any, keyed: bool) -> list[list] | None:
    """One output value: a keyed one entry by entry (a patch touches only its keys). Returns
    the value's live entries as stored (`ValueStore.rows`) when it was stored whole and keyed
    (a plain value may have been keyed before: its rows are read)."""
    if value is UNCHANGED:
        return None
    values = state.values
    if keyed:
        if isinstance(value, KeyedPatch):
            values.put_entries(name, value.set.items())
            values.remove_entries(name, value.removed)
            return None
        live: list[list] = []
        values.replace_entries(name, dict(value), live)
        return live
    values.put_entries(name, [(WHOLE, value)])
    return None
