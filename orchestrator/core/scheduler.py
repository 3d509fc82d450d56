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
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..cache import Cache
from ..cache.records import UnitRecord
from ..cache.state import BuildState
from ..codec import allow_package
from ..errors import CacheCorrupt, DryRunNamed, InternalError, OrchestrateError
from ..executors import Workplace
from ..executors.pool import ExecutorPool
from ..files.changes import FileChanges
from ..files.filetable import FileTable
from ..files.projectfiles import ProjectFiles
from ..files.scanning import learn_unread_digests, scan
from ..hashing import digest_bytes
from ..typing import PROJECT
from .config import Build
from .context import Context
from .graph import Stage, select
from .identity import code_digest
from .observe import Progress, ResourceSampler
from .options import RunOptions
from .outcomes import StageReport
from .rebuild import Rebuilder, RunningStage
from .registry import code_roots, registered_stages
from .replanning import Replanner
from .staleness import assess, fingerprint, must_run
from .storing import PreviousValues, StoredStage, store_stage
from .values import RunValues, StageInputs


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
    concluded: Any = None  # what run_build's `conclude` made of the run


class Scheduler:
    """Runs the stage graph for one build file."""

    def __init__(
        self,
        build: Build,
        options: RunOptions,
        log,
        stages: Sequence[Stage] | None = None,
        forget_state: bool = False,
    ) -> None:
        self.build = build
        self.forget_state = forget_state  # after a stored result went missing: plan afresh
        self.options = options
        self.log = log
        self.root = str(build.project_root).replace("\\", "/")
        if stages is None:
            stages = registered_stages()
        self.stages = select(list(stages), options.stages)
        for stage in self.stages:  # their results may hold records of their packages' types
            allow_package(getattr(stage.module, "__name__", type(stage.module).__module__))
        # A dry run is this run with nothing kept: the state and the cache in scratch.
        self.cache = Cache(
            build.cache_dir,
            log=log,
            scratch=options.dry_run,
            key=build.cache_key(),
            remote=build.cache_remote(),
        )
        self.files = ProjectFiles(self.root, build.file_policy)
        place = Workplace(
            self.root, str(build.cache_dir), build.file_policy, tuple(code_roots(self.stages))
        )
        settings = build.config.executor  # type: ignore[attr-defined]
        self.executors = ExecutorPool(options.executor, place, settings, options.workers, log)
        code = code_digest(
            getattr(s.module, "__name__", type(s.module).__module__) for s in self.stages
        )
        self.rebuilder = Rebuilder(
            self.cache, self.executors, log, code, options, keep_producers=forget_state
        )

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> RunResult:
        state = BuildState(
            self.build.cache_dir,
            self.root,
            str(self.build.output_dir),
            self.cache,
            self.log,
            scratch=self.options.dry_run,
            key=self.cache.key,
        )
        if self.forget_state:
            state.forget_stages()
        try:
            started = time.perf_counter()
            scanned = self._scan(state)
            scan_seconds = time.perf_counter() - started
            ctx = Context(
                self.build, self.files, state, scanned.table, self.log, self.rebuilder.load_result
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
                        self._stage(stage, stepping, scanned.trusted, needed_later=later)
                        for name in outputs:  # nothing later reads it: let it go
                            if last_use.get(name, -1) <= position:
                                values.release(name)
                        gc.freeze()  # what the stages built lives on: keep the collector off it
                except OrchestrateError as error:
                    if not isinstance(error, CacheCorrupt):
                        # The digests units found are true whatever stopped the build: without
                        # them, the next touch of those files would look like an edit.
                        state.files.save(scanned.table)
                    raise
                finally:
                    gc.unfreeze()
                    progress.stop()
            if scanned.racy:
                hashed += learn_unread_digests(self.files, scanned.table, ctx.unsettled)
            if scanned.table.changed:
                state.files.save(scanned.table)  # the signatures scanned and the digests learned
        finally:
            try:
                self.cache.close()
            finally:
                state.close()
                self.executors.close()
        return RunResult(
            values,
            ctx.reports,
            ctx,
            self.stages,
            self.executors.ray_startup,
            self.cache.corrupt_dropped,
            hashed,
            explained=self.rebuilder.explained,
            driver_peak_rss=sampler.driver_peak,
            driver_peak_private=sampler.driver_private_peak,
            workers_peak_rss=sampler.workers_peak,
            scan_seconds=scan_seconds,
            file_changes=scanned.changes,
        )

    def _scan(self, state: BuildState) -> Scanned:
        """This run's file table, and its content changes logged in the state (a file whose
        signature moved but whose bytes did not is no change)."""
        skip = {str(self.build.output_dir), str(self.build.cache_dir)}
        previous = state.files.load()
        if previous is not None and previous.policy != self.files.policy:
            previous = None  # scanned under another policy: what it refused is no longer known
        if previous is None:
            # Without the table the records cannot tell what changed since (not even which
            # files went away): every stage plans afresh, the action cache sparing the work.
            state.forget_stages()
        result = scan(self.root, skip, previous, self.files)
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
    def _stage(self, stage: Stage, step: Stepping, trusted: bool, needed_later: bool) -> None:
        """Run (or skip) one stage. `trusted`: the stages' records may be used (the file
        table they were made against is this checkout's, and no damage restarted the run);
        `needed_later`: a later stage of the run reads its values."""
        ctx, state, values = step.ctx, step.state, step.values
        spec = stage.spec
        started = time.perf_counter()
        report = StageReport(spec.name, start=time.time())
        slice_value = self.build.slice_for(spec.config_keys)
        now = fingerprint(spec, self.rebuilder.libs, slice_value)
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
            self._close(report, started, step)
            return
        report.runs_because(why)
        if self.options.explain:
            self.log.info("explain", stage=spec.name, runs_because=why)
        ctx.begin_stage(PreviousValues(state, spec.keyed) if staleness.usable else None)
        inputs = StageInputs(values, [name for name in spec.inputs if name != PROJECT])
        prefix = self.rebuilder.key_prefix(stage, slice_value)
        run = RunningStage(stage, prefix, report, step.progress, needed_later)
        try:
            replanned = Replanner(self.rebuilder, state, ctx).units(run, inputs, staleness)
        except DryRunNamed:  # no later stage reads its values: nothing to finish or store
            self.rebuilder.end_stage()
            self._close(report, started, step)
            return
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
        dry = self.options.dry_run  # stored in scratch for the later stages; nothing published
        removed = replanned.results.removed or set()
        stored = StoredStage(
            now, staleness.record, replanned.plan, replanned.due, removed, report.units
        )
        store_stage(stage, ctx, state, stored, outputs, () if dry else callbacks, not dry)
        self._close(report, started, step)

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
    """Run a build; a damaged cache entry found mid-run is set aside and the run started
    again. `conclude(result)` (kept as `result.concluded`) reads what the run left while it
    still holds the cache: a stored value it finds damaged starts the run again too."""
    from ..cache.housekeeping import temporary_files_in
    from ..files.lock import CacheLock
    from ..memory import relaxed_gc

    for attempt in range(3):
        # Again after damage: the state may name results that are gone (`cache gc`, another
        # machine's cleanup), so the retry plans every stage afresh; the action cache and the
        # file table still spare the work.
        scheduler = Scheduler(build, options, log, stages, forget_state=attempt > 0)
        try:
            with CacheLock(build.cache_dir), relaxed_gc(), temporary_files_in(build.cache_dir):
                result = scheduler.run()
                if conclude is None:
                    return result
                return dataclasses.replace(result, concluded=conclude(result))
        except CacheCorrupt as exc:
            log.warning("cache.corrupt", message=exc.message, action="dropped; rerunning")
            if attempt == 2:
                raise
    raise AssertionError("unreachable")
