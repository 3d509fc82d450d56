"""The build loop: for each stage in graph order, skip it whole if nothing it depended on changed,
else plan its units, let the rebuilder look them up and run the misses, finish, publish, record.

Stage records (cache/records.py) make a no-op rerun cheap; per-unit constructive traces
(rebuild.py) make a one-file edit cheap. Unchanged outputs give unchanged downstream
fingerprints and keys, so a rebuild stops as early as it can.
"""

from __future__ import annotations

import gc
import pickle
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .cache import Cache, StageRecord, StageRecords, StatCache, listing_digest, published_signature
from .config import Build
from .context import Context
from .errors import CacheCorrupt
from .executors.pool import ExecutorPool
from .graph import Stage, select
from .hashing import digest_value, dumps
from .observe import Progress, ResourceSampler
from .outcomes import StageReport, UnitOutcome
from .rebuild import DryRunStop, InternalError, Rebuilder
from .values import StageValues


@dataclass
class RunResult:
    outputs: StageValues
    reports: list[StageReport]
    context: Context
    stages: list[Stage]  # the stages this run took part in, in graph order
    ray_startup: float | None = None
    corrupt_dropped: int = 0
    hashed_files: int = 0
    explained: list[UnitOutcome] = field(default_factory=list)
    dry_run_stopped_at: str | None = None
    driver_peak_rss: int = 0  # bytes, sampled (ResourceSampler.driver_peak)
    driver_peak_private: int = 0  # bytes: RSS less shared pages (ResourceSampler)
    workers_peak_rss: int = 0  # bytes, all child processes together (ResourceSampler.workers_peak)


@dataclass
class RunOptions:
    executor: str = "auto"
    workers: int | None = None
    stages: list[str] | None = None
    explain: bool = False
    no_cache: bool = False
    dry_run: bool = False
    keep_going: bool = False
    progress: bool = True
    callbacks: dict[str, list[Callable]] = field(default_factory=dict)


class Scheduler:
    """Runs the stage graph for one build file."""

    def __init__(
        self,
        build: Build,
        options: RunOptions,
        log,
        stages: Sequence[Stage] | None = None,
        skip_stages: bool = True,
    ) -> None:
        self.build = build
        self.options = options
        self.log = log
        # False after a corrupt blob was found: every stage runs its per-unit lookups, so a
        # damaged unit result is recomputed in place (see Rebuilder.load_result) instead of one
        # restart per damaged blob behind a skipped stage.
        self.skip_stages = skip_stages
        self.cache = Cache(build.cache_dir, log=log)
        root = str(build.project_root).replace("\\", "/")
        self.stat_cache = StatCache(build.cache_dir, root, log=log)
        if stages is None:
            from .registry import registered_stages

            stages = registered_stages()
        self.stages = select(list(stages), options.stages)
        settings = build.config.executor  # type: ignore[attr-defined]
        self.executors = ExecutorPool(options.executor, root, settings, options.workers, log)
        self.rebuilder = Rebuilder(
            self.cache,
            self.executors,
            log,
            no_cache=options.no_cache,
            dry_run=options.dry_run,
            keep_going=options.keep_going,
            explain=options.explain,
        )
        self.dry_run_stopped_at: str | None = None

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> RunResult:
        ctx = Context(self.build, self.stat_cache, self.log)
        ctx.load_result = self.rebuilder.load_result
        records = StageRecords(self.cache, ctx.root, str(self.build.output_dir))
        values = StageValues(self.cache, records)
        value_digests: dict[str, str] = {}
        progress = Progress(self.options.progress)
        try:
            with ResourceSampler() as sampler:
                for stage in self.stages:
                    started = time.perf_counter()
                    report = StageReport(stage.name, start=time.time())
                    fingerprint = self._fingerprint(stage, value_digests)
                    ctx.begin_stage()
                    record = records.get(stage.name)
                    if record is not None and self._unchanged(
                        stage.name, record, fingerprint, ctx, records
                    ):
                        values.add_stored(stage.name, record.outputs or {})
                        value_digests.update(record.values)
                        report.units = report.cached = record.units
                        for callback in self.options.callbacks.get(stage.name, []):
                            callback(ctx, {name: values[name] for name in stage.spec.outputs})
                    else:
                        ctx.begin_stage()
                        inputs = {name: values[name] for name in stage.spec.inputs}
                        try:
                            outputs, traces = self._run_stage(stage, ctx, inputs, report, progress)
                        except DryRunStop:
                            ctx.reports.append(report)
                            self.dry_run_stopped_at = stage.name
                            break
                        values.add(outputs)
                        if not self.options.dry_run:
                            publish = getattr(stage.module, "publish", None)
                            if publish is not None:
                                publish(ctx, outputs)
                            for callback in self.options.callbacks.get(stage.name, []):
                                callback(ctx, outputs)
                            record = self._record(stage, ctx, fingerprint, outputs, traces, report)
                            records.put(stage.name, record)
                            value_digests.update(record.values)
                    # Ray's startup is reported on its own, not in the stage that needed it.
                    report.seconds = (
                        time.perf_counter() - started - self.rebuilder.startup_unreported
                    )
                    self.rebuilder.startup_unreported = 0.0
                    report.peak_rss, report.cpu_percent = sampler.window()
                    ctx.reports.append(report)
                    # What the stages built so far (the tree, the index, results) lives on: keep
                    # the cycle collector from rescanning it at every growth of the heap (it was
                    # half the time of assembling a 100,000-asset index).
                    gc.freeze()
                    self.log.debug(
                        "stage.done",
                        stage=stage.name,
                        units=report.units,
                        cached=report.cached,
                        built=report.built,
                        seconds=round(report.seconds, 3),
                    )
        finally:
            gc.unfreeze()  # collectable again once the run's values are let go
            progress.stop()
            self.cache.close()
            self.stat_cache.save()
            ctx.save_tree()
            self.executors.close()
        return RunResult(
            values,
            ctx.reports,
            ctx,
            self.stages,
            self.executors.ray_startup,
            self.cache.corrupt_dropped,
            self.stat_cache.hashed,
            explained=self.rebuilder.explained,
            dry_run_stopped_at=self.dry_run_stopped_at,
            driver_peak_rss=sampler.driver_peak,
            driver_peak_private=sampler.driver_private_peak,
            workers_peak_rss=sampler.workers_peak,
        )

    # -- whole-stage records (cache/records.py) ---------------------------------------------------
    def _fingerprint(self, stage: Stage, value_digests: dict[str, str]) -> str:
        spec = stage.spec
        return digest_value(
            {
                "stage": spec.name,
                "version": spec.version,
                "libs": self.rebuilder.libs,
                "slice": self.build.slice_for(spec.config_keys),
                "inputs": {name: value_digests.get(name) for name in spec.inputs},
            }
        )

    def _unchanged(
        self,
        stage: str,
        record: StageRecord | None,
        fingerprint: str,
        ctx: Context,
        records: StageRecords,
    ) -> bool:
        """Whether everything the stage depended on last time is as it was (so skip it)."""
        if (
            record is None
            or not isinstance(record.outputs, dict)
            or self.options.no_cache
            or not self.skip_stages
            or record.fingerprint != fingerprint
            or not all(self.cache.has_blob(blob) for blob in record.outputs.values())
        ):
            return False
        tree = ctx.tree()
        if record.tree != tree.version:  # the tree moved since: check what the stage saw
            if record.listing is not None and listing_digest(ctx.walk()) != record.listing:
                return False
            reads = records.reads(stage, record)
            if reads is None or not ctx.files_unchanged(reads):
                return False
            if tree.covers(ctx.root, reads):
                records.stamp(stage, record, tree.version)
        if any(ctx.track_file(path) != digest for path, digest in record.external.items()):
            return False
        return all(
            published_signature(ctx.output_path(path)) == tuple(signature)
            for path, signature in record.published.items()
        )

    def _record(
        self,
        stage: Stage,
        ctx: Context,
        fingerprint: str,
        outputs: dict,
        traces: dict[str, str | None],
        report: StageReport,
    ) -> StageRecord:
        reads = {**traces, **ctx.stage_reads}
        listing = listing_digest(ctx.walk()) if ctx.stage_listing else None
        unit_results = {o.unit: o.result for o in report.outcomes if o.result}
        # dicts: the canonical JSON sorts their keys in C, not 200,000 tuples in Python
        derivation = digest_value([fingerprint, listing, reads, ctx.stage_external, unit_results])
        try:  # one blob per value: a later run loads only the values it needs
            stored = {name: self.cache.put_blob(dumps(value)) for name, value in outputs.items()}
        except (pickle.PicklingError, TypeError, AttributeError):
            stored = None  # values holding live objects (loaders): the stage always runs
        published = {}
        for path in sorted(ctx.stage_published):
            signature = published_signature(ctx.output_path(path))
            if signature is not None:
                published[path] = signature
        tree = ctx.tree()
        return StageRecord(
            fingerprint,
            listing,
            reads,
            dict(ctx.stage_external),
            published,
            {name: digest_value([derivation, name]) for name in outputs},
            stored,
            report.units,
            tree=tree.version if tree.covers(ctx.root, reads) else None,
        )

    def _run_stage(
        self, stage: Stage, ctx: Context, inputs: dict, report: StageReport, progress: Progress
    ) -> tuple[dict[str, Any], dict[str, str | None]]:
        """Plan, get every unit's result, finish: the stage's outputs and its units' reads."""
        spec = stage.spec
        plan = stage.module.plan(ctx, inputs)
        results, traces = self.rebuilder.results(
            stage, ctx, plan, self.build.slice_for(spec.config_keys), report, progress
        )
        outputs = stage.module.finish(ctx, inputs, results)
        if set(outputs) != set(spec.outputs):
            raise InternalError(
                f"stage {spec.name!r} returned {sorted(outputs)}, declared {list(spec.outputs)}"
            )
        return outputs, traces


def run_build(
    build: Build, options: RunOptions, log, stages: Sequence[Stage] | None = None
) -> RunResult:
    """Run a build; a corrupt cache entry found mid-run is dropped and the run restarted, then
    without skipping whole stages, so that every damaged unit result is recomputed in place."""
    for attempt in range(3):
        scheduler = Scheduler(build, options, log, stages, skip_stages=attempt == 0)
        try:
            result = scheduler.run()
            result.outputs.repair = lambda name: run_build(build, options, log, stages).outputs[
                name
            ]
            return result
        except CacheCorrupt as exc:
            log.warning("cache.corrupt", message=exc.message, action="dropped; rerunning")
            if attempt == 2:
                raise
    raise AssertionError("unreachable")
