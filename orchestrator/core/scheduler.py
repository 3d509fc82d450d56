"""The build loop: scan the project, then for each stage in graph order do only what changed.

A stage is skipped whole when nothing it depends on moved since it last ran: its declaration and
the build-file slice it reads (its fingerprint), the generation of each value it consumes, the
files its units read (the reverse index of the build state), the outside files it tracked, the
files it published. Otherwise a stage that can (`update`) learns what changed — entries of its
inputs, the project's files, the units the engine re-runs because a file they read changed —
and returns only the units to run again; a stage that cannot plans everything, and units whose
key and reads are unchanged keep their stored results. `finish` then patches or rebuilds the
outputs, which are stored entry by entry: an entry whose digest did not change is no change,
so what runs downstream stops as early as it can.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..cache.records import StageRecord, UnitRecord
from ..cache.state import BuildState
from ..errors import CacheCorrupt, DryRunNamed, InternalError, OrchestrateError
from ..files.changes import FileChanges
from ..files.filetable import FileTable
from ..files.scanning import learn_unread_digests, scan
from ..hashing import digest_bytes
from ..typing import PROJECT
from .config import Build
from .context import Context
from .graph import Stage
from .observe import Progress, ResourceSampler
from .options import RunOptions
from .outcomes import StageReport
from .rebuild import Rebuilder, RunningStage, stage_keys
from .replanning import Replanner
from .session import Session
from .stageentries import StageEntries
from .staleness import assess, must_run
from .storing import StoredStage, store_stage
from .values import PreviousValues, RunValues, StageInputs


@dataclass
class RunResult:
    outputs: RunValues
    reports: list[StageReport]
    context: Context
    stages: list[Stage]  # the stages this run took part in, in graph order
    ray_startup: float | None = None
    corrupt_dropped: int = 0
    hashed_files: int = 0
    explained: list[UnitRecord] = field(default_factory=list)  # ran (--explain); dry run: due
    driver_peak_rss: int = 0  # bytes, sampled (ResourceSampler.driver_peak)
    driver_peak_private: int = 0  # bytes: RSS less shared pages (ResourceSampler)
    workers_peak_rss: int = 0  # bytes, all child processes together (ResourceSampler.workers_peak)
    scan_seconds: float = 0.0
    file_changes: FileChanges | None = None
    # Files the stages depend on that no scan of the project sees (rule files their driver
    # code read, files outside the project their units read): what a watcher watches besides.
    outside_files: frozenset[str] = frozenset()
    concluded: Any = None  # what run_build's `conclude` made of the run


class Scheduler:
    """Runs the stage graph once, in a session (session.py): `changed`, the project's paths a
    file watcher saw move since the session's last build (None: any may have, every file is
    looked at)."""

    def __init__(
        self,
        session: Session,
        changed: Collection[str] | None = None,
        forget_state: bool = False,
    ) -> None:
        self.session = session
        self.build = session.build
        self.changed = changed
        self.forget_state = forget_state  # after a stored result went missing: plan afresh
        self.options = session.options
        self.log = session.log
        self.root = session.root
        self.stages = session.stages
        self.cache = session.cache
        self.files = session.files
        self.executors = session.executors
        self.rebuilder = Rebuilder(
            self.cache,
            self.executors,
            self.log,
            session.code,
            self.options,
            keep_producers=forget_state,
            kept=session.results,
        )
        self.wholes = StageEntries(self.cache, self.log, use=not self.options.no_cache)
        self.outside_files: set[str] = set()  # RunResult.outside_files, stage by stage

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> RunResult:
        state = self.session.open_state()
        ray_before, dropped_before = self.executors.ray_startup, self.cache.corrupt_dropped
        if self.forget_state:
            state.forget_stages()
        try:
            started = time.perf_counter()
            scanned = self._scan(state)
            scan_seconds = time.perf_counter() - started
            ctx = Context(
                self.build,
                self.files,
                state,
                scanned.table,
                self.log,
                self.rebuilder.load_result,
                resident=self.session.resident,
            )
            keyed = {name for stage in self.stages for name in stage.spec.keyed}
            values = RunValues(
                state.values, keyed, [name for stage in self.stages for name in stage.spec.outputs]
            )
            last_use = {
                name: i for i, stage in enumerate(self.stages) for name in stage.spec.inputs
            }
            progress = Progress(self.options.progress)
            hashed = scanned.hashed
            with ResourceSampler() as sampler:
                try:
                    for position, stage in enumerate(self.stages):
                        outputs = stage.spec.outputs
                        later = any(last_use.get(name, -1) > position for name in outputs)
                        stepping = Stepping(ctx, state, values, progress, sampler)
                        record = self._stage(stage, stepping, scanned.trusted, later)
                        if record is not None:  # what it read outside the file table
                            self.outside_files.update(record.external)
                            self.outside_files.update(
                                os.path.normpath(os.path.join(self.root, p)) for p in record.outside
                            )
                        for name in outputs:  # nothing later reads it: let it go
                            if last_use.get(name, -1) <= position:
                                values.release(name)
                        gc.freeze()  # what the stages built lives on: keep the collector off it
                except OrchestrateError as error:
                    if not isinstance(error, CacheCorrupt):
                        # The digests units found are true whatever stopped the build: without
                        # them, the next touch of those files would look like an edit.
                        self._save(state, scanned.table)
                    raise
                finally:
                    gc.unfreeze()
                    progress.stop()
            if scanned.racy:
                hashed += learn_unread_digests(self.files, scanned.table, ctx.unsettled)
            self._save(state, scanned.table)  # the signatures scanned and the digests learned
        finally:
            try:
                self.cache.flush()
            finally:
                state.close()
        return RunResult(
            values,
            ctx.reports,
            ctx,
            self.stages,
            self.executors.ray_startup if ray_before is None else None,
            self.cache.corrupt_dropped - dropped_before,
            hashed,
            explained=self.rebuilder.explained,
            driver_peak_rss=sampler.driver_peak,
            driver_peak_private=sampler.driver_private_peak,
            workers_peak_rss=sampler.workers_peak,
            scan_seconds=scan_seconds,
            file_changes=scanned.changes,
            outside_files=frozenset(self.outside_files),
        )

    def _save(self, state: BuildState, table: FileTable) -> None:
        """Store the table when it moved, and hand it back to the session: what the state
        holds now, the next build starts from."""
        if table.changed:
            state.files.save(table)
        self.session.keep_table(table)

    def _scan(self, state: BuildState) -> Scanned:
        """This run's file table, and its content changes logged in the state (a file whose
        signature moved but whose bytes did not is no change)."""
        skip = {str(self.build.output_dir), str(self.build.cache_dir)}
        held = self.session.take_table()
        previous = held if held is not None else state.files.load()
        if previous is not None and previous.policy != self.files.policy:
            previous = None  # scanned under another policy: what it refused is no longer known
        if previous is None:
            # Without the table the records cannot tell what changed since (not even which
            # files went away): every stage plans afresh, the action cache sparing the work.
            state.forget_stages()
        # A watcher's paths tell what moved since the table the session held; a table read
        # from the state may be older than what the watcher has seen, so all is looked at.
        paths = self.changed if held is not None else None
        result = scan(self.root, skip, previous, self.files, paths)
        changes, table = result.changes, result.table
        trusted = previous is not None and not self.forget_state
        if previous is None:
            table.mark_changed()
            return Scanned(table, changes, trusted, result.racy, 0)
        modified, hashed = [], 0
        for path in changes.modified:
            old = changes.old_digests.get(path)
            if old is not None:
                data, _ = self.files.read(path)
                hashed += 1
                if data is not None and digest_bytes(data) == old:
                    row = table.row(path)
                    if row is not None:
                        table.set_digest(row, old)
                    continue  # touched, not changed
            modified.append(path)
        moved = bool(changes) or result.relisted or result.racy
        changes = dataclasses.replace(changes, modified=modified)
        if moved:
            table.mark_changed()
        if changes:
            # The log goes first, the table (saved at the end of the run) after: a run that
            # dies between them rescans against the old table and logs the changes again.
            state.files.log_changes(changes)
        return Scanned(table, changes, trusted, result.racy, hashed)

    # -- one stage -------------------------------------------------------------------------------
    def _stage(
        self, stage: Stage, step: Stepping, trusted: bool, needed_later: bool
    ) -> StageRecord | None:
        """Run (or skip) one stage. `trusted`: the stages' records may be used (the file
        table they were made against is this checkout's, and no damage restarted the run);
        `needed_later`: a later stage of the run reads its values. Returns the stage's record
        as this run leaves it (None: a dry run named its units and stored nothing)."""
        ctx, state, values = step.ctx, step.state, step.values
        spec = stage.spec
        started = time.perf_counter()
        report = StageReport(spec.name, start=time.time())
        slice_value = self.build.slice_for(spec.config_keys)
        keys = stage_keys(spec, self.rebuilder.libs, slice_value)
        now = keys.fingerprint
        voided = (
            "--no-cache"
            if self.options.no_cache
            else "planned afresh after damage to the cache"
            if self.forget_state
            else None
        )
        record = state.records.get(spec.name) if trusted else None
        staleness = assess(spec, record, now, state, ctx, voided)
        callbacks = self.options.callbacks.get(spec.name, [])
        why = must_run(staleness, ctx)
        if why is None:
            assert staleness.record is not None
            ctx.begin_stage(previous=None)
            ctx.adopt_published(staleness.record.published)  # as published by this run too
            report.skip(staleness.record.units)
            for callback in callbacks:
                callback(ctx, {name: values[name] for name in spec.outputs})
            if self.session.resident:  # the stage may make ready what its next run reads
                inputs = StageInputs(values, [n for n in spec.inputs if n != PROJECT])
                self.session.warm(stage, ctx, inputs, staleness.record.state)
            self._close(report, started, step)
            return staleness.record
        report.runs_because(why)
        if self.options.explain:
            self.log.info("explain", stage=spec.name, runs_because=why)
        ctx.begin_stage(PreviousValues(state.values, spec.keyed) if staleness.usable else None)
        inputs = StageInputs(values, [name for name in spec.inputs if name != PROJECT])
        prefix = keys.prefix
        dry = self.options.dry_run  # stored in scratch for the later stages; nothing published
        # Planning afresh: another build's whole run of the stage may serve (stageentries.py).
        whole = None
        if not staleness.usable:
            whole = self.wholes.find(stage, prefix, now, ctx, state, take=voided is None)
            if whole.found is not None:
                taken = () if dry else callbacks
                outputs = StageInputs(values, list(spec.outputs))  # read from the rows taken
                kept = self.wholes.take(whole, ctx, state, outputs, taken, not dry)
                report.planned(kept.units, kept.units)
                self._close(report, started, step)
                return kept
        run = RunningStage(stage, prefix, report, step.progress, needed_later)
        try:
            replanned = Replanner(self.rebuilder, state, ctx).units(run, inputs, staleness)
        except DryRunNamed:  # no later stage reads its values: nothing to finish or store
            self.rebuilder.end_stage()
            self._close(report, started, step)
            return None
        try:
            outputs = stage.module.finish(ctx, inputs, replanned.results)
        finally:
            self.rebuilder.end_stage()
        if set(outputs) != set(spec.outputs):
            raise InternalError(
                f"stage {spec.name!r} returned {sorted(outputs)}, declared {list(spec.outputs)}"
            )
        for name, value in outputs.items():
            values.add(name, value)
        removed = replanned.results.removed or set()
        stored = StoredStage(
            now, staleness.record, replanned.plan, replanned.due, removed, report.units
        )
        record, fresh = store_stage(
            stage, ctx, state, stored, outputs, () if dry else callbacks, not dry
        )
        if whole is not None and not dry:
            self.wholes.keep(whole, ctx, state, replanned.due, fresh)
        self._close(report, started, step)
        return record

    def _close(self, report: StageReport, started: float, step: Stepping) -> None:
        # Ray's startup is reported on its own, not in the stage that needed it.
        seconds = time.perf_counter() - started - self.rebuilder.take_startup()
        report.close(seconds, *step.sampler.window())
        step.ctx.reports.append(report)
        self.log.debug(
            "stage.done",
            stage=report.name,
            units=report.units,
            cached=report.cached,
            built=report.built,
            seconds=round(report.seconds, 3),
        )


@dataclass(frozen=True)
class Stepping:
    """What every stage of a run is run with: the driver-side context, the build state, the
    values passed between stages, the progress display and the resource sampler."""

    ctx: Context
    state: BuildState
    values: RunValues
    progress: Progress
    sampler: ResourceSampler


@dataclass(frozen=True)
class Scanned:
    """What the scan at the start of a run found: the file table, the content changes since the
    last scan, whether the stages' records may be trusted, how many entries are too fresh to
    trust by their timestamps (scanning.py), and how many files it hashed."""

    table: FileTable
    changes: FileChanges
    trusted: bool
    racy: int
    hashed: int


def run_build(
    build: Build,
    options: RunOptions,
    log,
    stages: Sequence[Stage] | None = None,
    conclude: Callable[[RunResult], Any] | None = None,
) -> RunResult:
    """Run a build once: a session opened for it and closed after (session.py)."""
    with Session(build, options, log, stages) as session:
        return run_in_session(session, None, conclude)


def run_in_session(
    session: Session,
    changed: Collection[str] | None = None,
    conclude: Callable[[RunResult], Any] | None = None,
) -> RunResult:
    """Run a build in a session (`changed`: the paths a watcher saw move since its last build,
    None when any may have); a damaged cache entry found mid-run is set aside and the run
    started again. `conclude(result)` (kept as `result.concluded`) reads what the run left while
    it still holds the cache: a stored value it finds damaged starts the run again too."""
    from ..cache.housekeeping import temporary_files_in
    from ..memory import relaxed_gc

    for attempt in range(3):
        # Again after damage: the state may name results that are gone (`cache gc`, another
        # machine's cleanup), so the retry plans every stage afresh and looks at every file;
        # the action cache and the file table still spare the work.
        scheduler = Scheduler(session, changed if attempt == 0 else None, attempt > 0)
        try:
            with relaxed_gc(), temporary_files_in(session.build.cache_dir):
                result = scheduler.run()
                if conclude is None:
                    return result
                return dataclasses.replace(result, concluded=conclude(result))
        except CacheCorrupt as exc:
            session.log.warning("cache.corrupt", message=exc.message, action="dropped; rerunning")
            session.reopen_cache()
            if attempt == 2:
                raise
    raise AssertionError("unreachable")
