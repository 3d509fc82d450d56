"""What a stage leaves for the next run, written in one transaction of the build state.

The units that ran (payload, keys, result) and the files each read (the reverse index), the
stage's output values entry by entry, what it published, and its record. Publishing happens
inside the transaction: a run killed mid-publish leaves the previous record, so the next run
does the stage again rather than trusting files it may not have finished.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from ..cache.state import WHOLE, ScopeState
from ..keyed import Keyed, KeyedPatch
from ..typing import PROJECT
from .context import Context
from .graph import Stage
from .replanning import Replanned
from .staleness import output_signature
from .values import UNCHANGED


class StageRecord(NamedTuple):
    """What the record of a stage is made from, besides what its context collected."""

    fingerprint: dict
    units: int  # how many units the stage has (for the report of a skipped run)
    previous: dict | None  # the record it replaces, when it still applied
    # Planned without a usable record (none, another fingerprint, --no-cache): the plan is
    # every unit the stage has, so the stored ones it does not name must go.
    fresh_start: bool


def store_stage(
    stage: Stage,
    ctx: Context,
    state: ScopeState,
    replanned: Replanned,
    outputs: dict,
    record: StageRecord,
    callbacks: Iterable[Callable] = (),
    publish: bool = True,
) -> None:
    """Store the stage's units, reads, values, publications and record, all or nothing
    (without `publish`, a dry run's: the stage's `publish` hook is not called)."""
    spec = stage.spec
    state.begin()
    try:
        rows, reads, existed = [], [], []
        outside = dict(record.previous.get("outside") or {}) if record.previous else {}
        for unit_id, (item, done, was_stored) in replanned.ran.items():
            if done is None:
                continue
            if was_stored:
                existed.append(unit_id)
            unit = item.unit
            data = {
                # Only a unit that read files is ever re-run from the state (when they change)
                "payload": unit.payload if done.reads else None,
                "files": list(unit.files),
                "blobs": list(unit.blobs),
                "cost": unit.cost,
                "parts": item.parts,
            }
            rows.append((unit_id, item.static, done.result, data))
            reads += [(unit_id, path) for path in done.reads]
            for path, digest in done.reads.items():  # what a rescan would not notice
                if not ctx.files.tracks(ctx.root, path, digest):
                    outside[path] = digest
        if record.fresh_start:
            state.drop_stage_units(spec.name)
        if existed:
            state.drop_units(spec.name, existed)
        if rows:
            state.put_units(spec.name, rows)
            state.put_reads(spec.name, reads)
        if replanned.results.removed:
            state.drop_units(spec.name, replanned.results.removed)
        for name, value in outputs.items():
            store_value(state, name, value, name in spec.keyed)
        hook = getattr(stage.module, "publish", None) if publish else None
        if hook is not None:
            hook(ctx, outputs)
        for callback in callbacks:
            callback(ctx, outputs)
        published = {}
        for path in sorted(ctx.stage_published):
            found = ctx.output_folder.lstat(path)
            if found is not None:
                published[path] = output_signature(found)
        state.put_record(
            spec.name,
            {
                "fingerprint": record.fingerprint,
                "gen": state.generation,
                "state": replanned.plan.state,
                "external": dict(ctx.stage_external),
                "published": published,
                "outside": outside,
                "walked": ctx.stage_walked or PROJECT in spec.inputs,
                "units": record.units,
            },
        )
        state.commit()
    except BaseException:
        state.rollback()
        raise


def store_value(state: ScopeState, name: str, value: Any, keyed: bool) -> None:
    """One output value: a keyed one entry by entry (a patch touches only its keys)."""
    if value is UNCHANGED:
        return
    if keyed:
        if isinstance(value, KeyedPatch):
            state.put_entries(name, value.set.items())
            state.remove_entries(name, value.removed)
        else:
            state.replace_entries(name, dict(value))
    else:
        state.put_entries(name, [(WHOLE, value)])


class PreviousValues:
    """A stage's outputs as the last run stored them (`ctx.previous[name]`)."""

    def __init__(self, state: ScopeState, keyed: tuple[str, ...]) -> None:
        self._state = state
        self._keyed = keyed
        self._whole: dict[str, Any] = {}  # decoded once: `update` and `finish` may both read it

    def __getitem__(self, name: str) -> Any:
        if name in self._keyed:
            return Keyed(name, self._state)
        if name not in self._whole:
            self._whole[name] = self._state.entry(name, WHOLE)
        return self._whole[name]
