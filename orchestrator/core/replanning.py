"""Which of a stage's units run again, and with what stated reason (`--explain`).

Two paths. When the stage has an `update` and its record applies, the update returns only the
units that changed (plus those the engine adds because a file they read changed): the rest keep
their stored results without being looked at. Otherwise the stage plans everything, and a unit
whose static key is the stored one and whose reads did not change keeps its result. Either way
the units that do run go to the rebuilder, which may still find them in the action cache.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..cache.state import ScopeState
from ..typing import Plan, StageChanges, Unit
from .context import Context
from .graph import Stage
from .observe import Progress
from .outcomes import StageReport
from .rebuild import Done, Pending, Producer, Rebuilder, key_parts
from .staleness import Staleness
from .values import Results


class UnitRun(NamedTuple):
    """A unit that was due this run: what was planned, its outcome (None if it did not finish:
    a dry run, a failure under --keep-going) and whether the state held it before."""

    pending: Pending
    done: Done | None
    was_stored: bool


class Replanned(NamedTuple):
    plan: Plan
    results: Results
    ran: dict[str, UnitRun]


class Replanner:
    """Plans one stage at a time against its stored units."""

    def __init__(self, rebuilder: Rebuilder, state: ScopeState, ctx: Context) -> None:
        self.rebuilder = rebuilder
        self.state = state
        self.ctx = ctx

    def units(
        self,
        stage: Stage,
        inputs: Any,
        staleness: Staleness,
        prefix: bytes,
        report: StageReport,
        progress: Progress,
    ) -> Replanned:
        """The stage's plan and every unit's result, the due units run."""
        spec = stage.spec
        update = getattr(stage.module, "update", None)
        if staleness.usable and update is not None:
            state = self.state
            rerun = [stored_unit(s) for s in state.units(spec.name, staleness.dirty).values()]
            changes = StageChanges(
                staleness.inputs,
                rerun,
                staleness.record.get("state") if staleness.record else None,
                staleness.modified_files(),
                lambda: list(state.unit_keys(spec.name)),
            )
            plan = update(self.ctx, inputs, changes)
            if plan is not None:
                return self._incremental(stage, plan, prefix, staleness, report, progress)
        plan = stage.module.plan(self.ctx, inputs)
        return self._full(stage, plan, prefix, staleness, report, progress)

    def _full(
        self,
        stage: Stage,
        plan: Plan,
        prefix: bytes,
        staleness: Staleness,
        report: StageReport,
        progress: Progress,
    ) -> Replanned:
        """Every unit planned: those whose key and reads are unchanged keep their results."""
        spec, dirty, rebuilder = stage.spec, staleness.dirty, self.rebuilder
        stored = self.state.unit_keys(spec.name) if staleness.usable else {}
        results = Results(plan, rebuilder.load_result)
        pending: list[Pending] = []
        report.units = len(plan.units)
        reuse = []
        for unit in plan.units:
            static = rebuilder.static_key(prefix, unit)
            known = stored.get(unit.id)
            if known is not None and known[0] == static and unit.id not in dirty:
                results.add(unit.id, known[1])
                reuse.append((unit, known[1]))
                report.cached += 1
                continue
            why = (
                staleness.why_all
                if known is None
                else f"input changed: {unit.id}"
                if unit.id in dirty
                else "declared input changed"
            )
            pending.append(Pending(unit, static, key_parts(unit.key), why))
        for unit, digest in reuse:
            rebuilder.remember(digest, Producer(stage, self.ctx.project, plan.shared, unit))
        if pending and staleness.usable:
            self._explain(spec.name, pending, dirty)
        done = rebuilder.execute(stage, self.ctx, plan.shared, pending, report, progress)
        for unit_id, outcome in done.items():
            results.add(unit_id, outcome.result)
        results.removed = set(stored) - {unit.id for unit in plan.units}
        ran = {p.unit.id: UnitRun(p, done.get(p.unit.id), p.unit.id in stored) for p in pending}
        return Replanned(plan, results, ran)

    def _incremental(
        self,
        stage: Stage,
        plan: Plan,
        prefix: bytes,
        staleness: Staleness,
        report: StageReport,
        progress: Progress,
    ) -> Replanned:
        """Only the units the update returned and those reading changed files run again."""
        spec, dirty, rebuilder = stage.spec, staleness.dirty, self.rebuilder
        removed = set(plan.removed)
        units = {unit.id: unit for unit in plan.units}
        previous = self.state.unit_keys(spec.name)
        reasons = plan.reasons or {}
        pending = []
        for unit in units.values():
            static = rebuilder.static_key(prefix, unit)
            known = previous.get(unit.id)
            if known is not None and known[0] == static and unit.id not in dirty:
                continue  # returned by the update, but its key did not move
            why = reasons.get(unit.id) or (
                "new unit" if known is None else "declared input changed"
            )
            pending.append(Pending(unit, static, key_parts(unit.key), why))
        for stored in self.state.units(spec.name, set(dirty) - removed - set(units)).values():
            parts = stored.data.get("parts", {}) if isinstance(stored.data, dict) else {}
            pending.append(Pending(stored_unit(stored), stored.key, parts, "input changed"))
        self._explain(spec.name, pending, dirty, reasons)
        report.units = (
            len(previous)
            - len(removed & set(previous))
            + sum(1 for unit_id in units if unit_id not in previous)
        )
        done = rebuilder.execute(stage, self.ctx, plan.shared, pending, report, progress)
        report.cached = report.units - report.built
        results = Results(
            plan,
            rebuilder.load_result,
            {unit_id: result for unit_id, (_, result) in previous.items()},
        )
        changed = set()
        for unit_id, outcome in done.items():
            results.add(unit_id, outcome.result)
            if previous.get(unit_id, ("", ""))[1] != outcome.result:
                changed.add(unit_id)
        for unit_id in removed:
            results.discard(unit_id)
        results.changed = changed
        results.removed = removed & set(previous)
        results.before = {
            unit_id: previous[unit_id][1]
            for unit_id in changed | results.removed
            if unit_id in previous
        }
        ran = {p.unit.id: UnitRun(p, done.get(p.unit.id), p.unit.id in previous) for p in pending}
        return Replanned(plan, results, ran)

    def _explain(
        self,
        stage_name: str,
        pending: list[Pending],
        dirty: dict[str, list[str]],
        reasons: dict[str, str] | None = None,
    ) -> None:
        """Sharpen each pending unit's reason with what its stored key parts say (a reason the
        stage gave stands)."""
        if not pending:
            return
        stored = self.state.units(stage_name, [item.unit.id for item in pending])
        for i, item in enumerate(pending):
            if item.unit.id in dirty:
                pending[i] = item._replace(why=f"input changed: {', '.join(dirty[item.unit.id])}")
                continue
            known = stored.get(item.unit.id)
            if (reasons and item.unit.id in reasons) or known is None:
                continue
            if not isinstance(known.data, dict):
                continue
            old = known.data.get("parts") or {}
            changed = sorted(
                k for k in set(old) | set(item.parts) if old.get(k) != item.parts.get(k)
            )
            if changed:
                pending[i] = item._replace(why=f"declared input changed: {', '.join(changed)}")


def stored_unit(stored: Any) -> Unit:
    """A stored unit as the executor runs it."""
    data = stored.data
    return Unit(
        id=stored.id,
        payload=data["payload"],
        key=None,
        files=tuple(data["files"]),
        blobs=tuple(data["blobs"]),
        cost=int(data["cost"]),
    )
