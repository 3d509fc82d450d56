"""Which of a stage's units run again, and with what stated reason (`--explain`).

Two paths. When the stage has an `update` and its record applies, the update returns only the
units that changed (plus those the engine adds because a file they read changed): the rest keep
their stored results without being looked at. Otherwise the stage plans everything, and a unit
whose static key is the stored one and whose reads did not change keeps its result. Either way
the units that do run go to the rebuilder, which may still find them in the action cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..cache.records import UnitRecord
from ..cache.state import BuildState
from ..files.reads import describe_read
from ..hashing import digest_value
from ..typing import Plan, StageChanges
from .context import Context
from .rebuild import Rebuilder, RunningStage
from .staleness import Staleness
from .values import Results, UpdatedDigests


@dataclass(frozen=True)
class Replanned:
    """A stage's plan this run, every unit's result, and the records of the units that were
    due (run, or found in the action cache)."""

    plan: Plan
    results: Results
    due: list[UnitRecord]


def key_parts(key: Any) -> dict[str, str]:
    """Digest of each top-level field of a unit's key, so --explain can name what changed."""
    if isinstance(key, Mapping):
        return {
            str(k): digest_value(v)[:16] for k, v in sorted(key.items(), key=lambda kv: str(kv[0]))
        }
    return {"key": digest_value(key)[:16]}


class Replanner:
    """Plans one stage at a time against its stored units."""

    def __init__(self, rebuilder: Rebuilder, state: BuildState, ctx: Context) -> None:
        self.rebuilder = rebuilder
        self.state = state
        self.ctx = ctx

    def units(self, run: RunningStage, inputs: Any, staleness: Staleness) -> Replanned:
        """The stage's plan and every unit's result, the due units run."""
        spec, update = run.stage.spec, getattr(run.stage.module, "update", None)
        if staleness.usable and update is not None:
            assert staleness.record is not None
            units = self.state.units
            rerun = [record.planned for record in units.get(spec.name, staleness.dirty).values()]
            changes = StageChanges(
                staleness.inputs,
                rerun,
                staleness.record.state,
                staleness.modified_files(),
                lambda: list(units.keys(spec.name)),
                lambda ids: {i: record.planned for i, record in units.get(spec.name, ids).items()},
            )
            plan = update(self.ctx, inputs, changes)
            if plan is not None:
                return self._incremental(run, plan, staleness)
        return self._full(run, run.stage.module.plan(self.ctx, inputs), staleness)

    def _full(self, run: RunningStage, plan: Plan, staleness: Staleness) -> Replanned:
        """Every unit planned: those whose key and reads are unchanged keep their results."""
        dirty, rebuilder = staleness.dirty, self.rebuilder
        stored = self.state.units.keys(run.name) if staleness.usable else {}
        kept: dict[str, str] = {}
        due: list[UnitRecord] = []
        rebuilder.begin(run, self.ctx.project, plan.shared)
        for unit in plan.units:
            known = stored.get(unit.id)
            static = rebuilder.static_key(run.prefix, unit)
            if known is not None and known.static == static and unit.id not in dirty:
                kept[unit.id] = known.result
                rebuilder.remember(UnitRecord(run.name, unit, static, {}, result=known.result))
                continue
            reason = (
                staleness.why_all
                if known is None
                else f"input changed: {unit.id}"
                if unit.id in dirty
                else "declared input changed"
            )
            due.append(
                UnitRecord(run.name, unit, static, key_parts(unit.key), reason, known is not None)
            )
        run.report.planned(len(plan.units), len(kept))
        if due and staleness.usable:
            self._explain(run.name, due, dirty)
        rebuilder.execute(run, self.ctx, due)
        for record in due:
            if record.result:
                kept[record.id] = record.result
        removed = set(stored) - {unit.id for unit in plan.units}
        return Replanned(plan, Results(plan, rebuilder.load_result, kept, removed=removed), due)

    def _incremental(self, run: RunningStage, plan: Plan, staleness: Staleness) -> Replanned:
        """Only the units the update returned and those reading changed files run again."""
        dirty, rebuilder = staleness.dirty, self.rebuilder
        removed = set(plan.removed)
        units = {unit.id: unit for unit in plan.units}
        # Only the units the update named, those reading changed files and those removed are
        # looked up: the others keep their stored results, read only if `finish` asks.
        stored = self.state.units
        previous = stored.keys(run.name, set(units) | set(dirty) | removed)
        reasons = plan.reasons or {}
        due: list[UnitRecord] = []
        for unit in units.values():
            known = previous.get(unit.id)
            static = rebuilder.static_key(run.prefix, unit)
            if known is not None and known.static == static and unit.id not in dirty:
                continue  # returned by the update, but its key did not move
            reason = reasons.get(unit.id) or (
                "new unit" if known is None else "declared input changed"
            )
            due.append(
                UnitRecord(run.name, unit, static, key_parts(unit.key), reason, known is not None)
            )
        for record in self.state.units.get(run.name, set(dirty) - removed - set(units)).values():
            record.explain("input changed")
            due.append(record)
        self._explain(run.name, due, dirty, reasons)
        count = (
            stored.count(run.name)
            - len(removed & set(previous))
            + sum(1 for unit_id in units if unit_id not in previous)
        )
        rebuilder.begin(run, self.ctx.project, plan.shared)
        rebuilder.execute(run, self.ctx, due)
        run.report.planned(count, count - run.report.built)
        latest = {unit_id: keys.result for unit_id, keys in previous.items()}
        changed = set()
        for record in due:
            if record.result:
                latest[record.id] = record.result
                if record.id not in previous or previous[record.id].result != record.result:
                    changed.add(record.id)
        for unit_id in removed:
            latest.pop(unit_id, None)
        gone = removed & set(previous)
        before = {unit_id: previous[unit_id].result for unit_id in (changed | gone) & set(previous)}
        digests = UpdatedDigests(
            latest,
            removed,
            lambda: {unit_id: keys.result for unit_id, keys in stored.keys(run.name).items()},
        )
        results = Results(
            plan, rebuilder.load_result, digests, changed=changed, removed=gone, before=before
        )
        return Replanned(plan, results, due)

    def _explain(
        self,
        stage: str,
        due: list[UnitRecord],
        dirty: dict[str, list[str]],
        reasons: dict[str, str] | None = None,
    ) -> None:
        """Sharpen each due unit's reason with what its stored key parts say (a reason the
        stage gave stands)."""
        if not due:
            return
        stored = self.state.units.get(stage, [record.id for record in due])
        for record in due:
            if record.id in dirty:
                record.explain(
                    "input changed: "
                    + ", ".join(
                        describe_read(path, self.ctx.entries.notes) for path in dirty[record.id]
                    )
                )
                continue
            known = stored.get(record.id)
            if (reasons and record.id in reasons) or known is None:
                continue
            old = known.parts
            changed = sorted(
                k for k in set(old) | set(record.parts) if old.get(k) != record.parts.get(k)
            )
            if changed:
                record.explain(f"declared input changed: {', '.join(changed)}")
