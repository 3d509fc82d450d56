"""The build loop: for each stage in graph order, plan units, look each up, run the misses, record.

A scheduler × a rebuilder ("Build Systems à la Carte"): stages run in topological order; within a
stage every unit is looked up in the cache under a constructive trace — a static key (stage,
versions, build-file slice, declared key material) plus the files the unit read last time, each
re-checked against its current digest. Misses go to an executor; their results and traces are
recorded. Unchanged outputs give unchanged downstream keys, so rebuilds stop early.
"""

from __future__ import annotations

import gc
import os
import pickle
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from . import __version__
from .cache import ActionEntry, Cache, StatCache
from .config import Build
from .context import Context
from .errors import CacheCorrupt, OrchestrateError
from .executors import Executor, LazyBlobs, WorkItem, make_executor, run_item
from .graph import Stage, load_stages, select
from .hashing import canonical_json, digest_bytes, digest_value, dumps, loads
from .memo import StageRecord, StageRecords, listing_digest, published_signature
from .observe import Progress, ResourceSampler, outcome_line
from .types import StageReport, Unit, UnitOutcome

#: Below this many units left to run, `auto` stays in the driver: starting Ray costs seconds.
AUTO_LOCAL_MAX_UNITS = 400
#: Without a cluster address, `auto` starts a local Ray only on a machine with at least this many
#: cores: the driver keeps one busy (digests, the store, assembling results), and on 2 cores the
#: local executor measured faster at every size (docs/benchmarks.md: 8.3 s against 21.9 s for a
#: cold build of 10,000 resources; 188 s against 316 s at 100,000).
AUTO_LOCAL_RAY_MIN_CPUS = 4
#: Results smaller than this stay in memory for `finish`; larger ones (cooked payloads: a few KB
#: each, 100,000 of them) are reloaded from the store only if `finish` asks for them.
KEEP_IN_MEMORY_BYTES = 4 * 1024


class InternalError(OrchestrateError):
    """A stage raised something unexpected: a bug."""

    exit_code = 3


def library_versions() -> dict[str, str]:
    """Versions of the libraries that shape outputs; they enter every key."""
    import blake3
    import lxml.etree
    import zstandard
    import lz4
    return {"python": "%d.%d" % sys.version_info[:2], "lxml": lxml.etree.__version__,
            "zstandard": zstandard.__version__, "lz4": lz4.__version__,
            "blake3": getattr(blake3, "__version__", "?"), "orchestrate": __version__}


class Results(Mapping):
    """Unit id → result, loaded lazily from the store; `digest(id)` without loading."""

    def __init__(self, cache: Cache, repair: Callable[[str], Any]) -> None:
        self._cache = cache
        self._repair = repair
        self._digests: dict[str, str] = {}
        self._memory: dict[str, Any] = {}

    def add(self, unit_id: str, digest: str, value: Any = None, keep: bool = False) -> None:
        self._digests[unit_id] = digest
        if keep:
            self._memory[unit_id] = value

    def digest(self, unit_id: str) -> str:
        return self._digests[unit_id]

    def __getitem__(self, unit_id: str) -> Any:
        if unit_id in self._memory:
            return self._memory[unit_id]
        return self._repair(self._digests[unit_id])

    def __iter__(self) -> Iterator[str]:
        return iter(self._digests)

    def __len__(self) -> int:
        return len(self._digests)


class StageValues(Mapping):
    """The values stages produced; a skipped stage's values load from the store on first use."""

    def __init__(self, cache: Cache, records: StageRecords) -> None:
        self._cache = cache
        self._records = records
        self._values: dict[str, Any] = {}
        self._stored: dict[str, tuple[str, str]] = {}  # value → (stage, its stored blob)
        # After the run: how to get a value whose stored copy turns out corrupt (build again).
        self.repair: Callable[[str], Any] | None = None

    def add(self, outputs: dict[str, Any]) -> None:
        self._values.update(outputs)

    def add_stored(self, stage: str, blobs: dict[str, str]) -> None:
        for name, blob in blobs.items():
            self._stored[name] = (stage, blob)

    def __getitem__(self, name: str) -> Any:
        if name not in self._values:
            stage, blob = self._stored[name]
            try:
                self._values[name] = loads(self._cache.get_blob(blob))
            except CacheCorrupt:
                self._records.drop(stage)  # the rerun runs the stage instead
                if self.repair is None:
                    raise
                self._values[name] = self.repair(name)
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(self._stored), **dict.fromkeys(self._values)})

    def __len__(self) -> int:
        return len(set(self._stored) | set(self._values))


@dataclass
class RunResult:
    outputs: dict[str, Any]
    reports: list[StageReport]
    context: Context
    ray_startup: float | None = None
    corrupt_dropped: int = 0
    hashed_files: int = 0
    explained: list = field(default_factory=list)
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

    def __init__(self, build: Build, options: RunOptions, log, stage_modules=None,
                 skip_stages: bool = True) -> None:
        self.build = build
        self.options = options
        self.log = log
        # False after a corrupt blob was found: every stage runs its per-unit lookups, so a
        # damaged unit result is recomputed in place (see load_result) instead of one restart
        # per damaged blob behind a skipped stage.
        self.skip_stages = skip_stages
        self.cache = Cache(build.cache_dir, log=log)
        self.stat_cache = StatCache(build.cache_dir, str(build.project_root).replace("\\", "/"),
                                    log=log)
        self.stages = select(load_stages(stage_modules) if stage_modules else load_stages(),
                             options.stages)
        self.libs = library_versions()
        self.libs_digest = digest_value(self.libs)[:16]
        self._executors: dict[str, Executor] = {}
        self.ray_startup: float | None = None
        self._startup_unreported = 0.0
        self.explained: list[UnitOutcome] = []
        # digest of a cached result → what recomputes it, should its blob turn out corrupt:
        # (stage, context, shared data, unit, static key)
        self._producers: dict[str, tuple] = {}

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> RunResult:
        ctx = Context(self.build, self.stat_cache, self.log)
        ctx.load_result = self.load_result
        records = StageRecords(self.cache, ctx.root, str(self.build.output_dir))
        values = StageValues(self.cache, records)
        value_digests: dict[str, str] = {}
        progress = Progress(self.options.progress)
        self.dry_run_stopped_at: str | None = None
        try:
            with ResourceSampler() as sampler:
                for stage in self.stages:
                    started = time.perf_counter()
                    report = StageReport(stage.name, start=time.time())
                    fingerprint = self._fingerprint(stage, value_digests)
                    ctx.begin_stage()
                    record = records.get(stage.name)
                    if self._unchanged(stage.name, record, fingerprint, ctx, records):
                        values.add_stored(stage.name, record.outputs)
                        value_digests.update(record.values)
                        report.units = report.cached = record.units
                        for callback in self.options.callbacks.get(stage.name, []):
                            callback(ctx, {name: values[name] for name in stage.spec.outputs})
                    else:
                        ctx.begin_stage()
                        inputs = {name: values[name] for name in stage.spec.inputs}
                        try:
                            outputs, traces = self._run_stage(stage, ctx, inputs, report,
                                                              progress)
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
                    report.seconds = time.perf_counter() - started - self._startup_unreported
                    self._startup_unreported = 0.0
                    report.peak_rss, report.cpu_percent = sampler.window()
                    ctx.reports.append(report)
                    # What the stages built so far (the tree, the index, results) lives on: keep
                    # the cycle collector from rescanning it at every growth of the heap (it was
                    # half the time of assembling a 100,000-asset index).
                    gc.freeze()
                    self.log.debug("stage.done", stage=stage.name, units=report.units,
                                   cached=report.cached, built=report.built,
                                   seconds=round(report.seconds, 3))
        finally:
            gc.unfreeze()  # collectable again once the run's values are let go
            progress.stop()
            self.cache.close()
            self.stat_cache.save()
            ctx.save_tree()
            for executor in self._executors.values():
                executor.close()
        return RunResult(values, ctx.reports, ctx, self.ray_startup, self.cache.corrupt_dropped,
                         self.stat_cache.hashed, driver_peak_rss=sampler.driver_peak,
                         driver_peak_private=sampler.driver_private_peak,
                         workers_peak_rss=sampler.workers_peak)

    # -- whole-stage records (memo.py) ---------------------------------------------------
    def _fingerprint(self, stage: Stage, value_digests: dict[str, str]) -> str:
        spec = stage.spec
        return digest_value({"stage": spec.name, "version": spec.version, "libs": self.libs,
                             "slice": self.build.slice_for(spec.config_keys),
                             "inputs": {name: value_digests.get(name) for name in spec.inputs}})

    def _unchanged(self, stage: str, record: StageRecord | None, fingerprint: str,
                   ctx: Context, records: StageRecords) -> bool:
        """Whether everything the stage depended on last time is as it was (so skip it)."""
        if (record is None or not isinstance(record.outputs, dict) or self.options.no_cache
                or not self.skip_stages or record.fingerprint != fingerprint
                or not all(self.cache.has_blob(blob) for blob in record.outputs.values())):
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
        return all(published_signature(ctx.output_path(path)) == tuple(signature)
                   for path, signature in record.published.items())

    def _record(self, stage: Stage, ctx: Context, fingerprint: str, outputs: dict,
                traces: dict[str, str | None], report: StageReport) -> StageRecord:
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
        return StageRecord(fingerprint, listing, reads, dict(ctx.stage_external), published,
                           {name: digest_value([derivation, name]) for name in outputs},
                           stored, report.units,
                           tree=tree.version if tree.covers(ctx.root, reads) else None)

    def _run_stage(self, stage: Stage, ctx: Context, inputs: dict, report: StageReport,
                   progress: Progress) -> dict[str, Any]:
        spec = stage.spec
        plan = stage.module.plan(ctx, inputs)
        slice_digest = digest_value(self.build.slice_for(spec.config_keys))
        results = Results(self.cache, self.load_result)
        traces: dict[str, str | None] = {}
        misses: list[tuple[Unit, str, str, dict, str]] = []
        report.units = len(plan.units)
        # What every unit's key shares, serialized once: the per-unit part is its key and id.
        prefix = canonical_json({"stage": spec.name, "version": spec.version, "libs": self.libs,
                                 "slice": slice_digest})
        for unit in plan.units:
            static = digest_bytes(prefix + canonical_json([unit.key, unit.id]))
            entry, why = (None, "--no-cache") if self.options.no_cache else self._lookup(ctx, spec.name, static)
            if entry is not None:
                hit = entry.result
                traces.update(entry.reads)
                results.add(unit.id, hit)
                self._producers[hit] = (stage, ctx, plan.shared, unit, static)
                report.cached += 1
                report.outcomes.append(UnitOutcome(spec.name, unit.id, True, "cached", result=hit))
                continue
            unit_digest = digest_value([spec.name, unit.id])
            components = {"version": spec.version, "libs": self.libs_digest,
                          "slice": slice_digest[:16],
                          "key": {field: value[:16] for field, value in
                                  _key_parts(unit.key).items()}}
            if why is None:
                why = self._explain_miss(spec.name, unit_digest, components)
            misses.append((unit, static, unit_digest, components, why))
        if self.options.dry_run and misses:
            for unit, _, _, _, why in misses:
                outcome = UnitOutcome(spec.name, unit.id, False, why)
                report.outcomes.append(outcome)
                self.explained.append(outcome)
            report.built = len(misses)
            raise DryRunStop(spec.name)  # later stages need this stage's values to be planned
        if misses:
            self._execute(stage, ctx, plan.shared, misses, results, report, progress, traces)
        self.cache.actions(spec.name).release()  # 100 MB of log lines at 100,000 units
        outputs = stage.module.finish(ctx, inputs, results)
        if set(outputs) != set(spec.outputs):
            raise InternalError(f"stage {spec.name!r} returned {sorted(outputs)}, "
                                f"declared {list(spec.outputs)}")
        return outputs, traces

    # -- cache lookups -------------------------------------------------------------------
    def _lookup(self, ctx: Context, stage_name: str,
                static: str) -> tuple[ActionEntry | None, str | None]:
        """(entry, None) on a hit; (None, reason) when the trace no longer matches."""
        entries = self.cache.actions(stage_name).get(static)
        if not entries:
            return None, None
        reason = None
        for entry in entries:
            changed = next((path for path, digest in entry.reads
                            if ctx.digest_of(path) != digest), None)
            if changed is None:
                if self.cache.has_blob(entry.result):
                    return entry, None
                reason = "cached result was dropped from the store"
            elif reason is None:
                reason = f"input changed: {changed}"
        return None, reason

    def _explain_miss(self, stage_name: str, unit_digest: str, components: dict) -> str:
        last = self.cache.actions(stage_name).last(unit_digest)
        if last is None:
            return "no entry"
        if last.get("version") != components["version"]:
            return f"stage version changed ({last.get('version')} → {components['version']})"
        if last.get("libs") != components["libs"]:
            return "tool or library version changed"
        if last.get("slice") != components["slice"]:
            return "build-file slice changed"
        old, new = last.get("key", {}), components["key"]
        changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        return f"declared input changed: {', '.join(changed)}" if changed else "no entry"

    # -- running misses ------------------------------------------------------------------
    def _executor_for(self, stage: Stage, misses: list) -> Executor:
        kind = self.options.executor
        if kind == "auto":
            kind = "ray" if self._ray_pays_off(len(misses)) else "local"
        if kind not in self._executors:
            exec_cfg = self.build.config.executor
            executor = make_executor(kind, str(self.build.project_root).replace("\\", "/"),
                                     workers=self.options.workers or exec_cfg.workers,
                                     address=exec_cfg.address, shared_paths=exec_cfg.shared_paths,
                                     log=self.log)
            self._executors[kind] = executor
            if kind == "ray":
                self.ray_startup = getattr(executor, "startup_seconds", None)
                self._startup_unreported = self.ray_startup or 0.0
        return self._executors[kind]

    def _ray_pays_off(self, units: int) -> bool:
        """`auto`'s choice: a cluster whenever one is named; a local Ray for big work when
        workers were asked for, or on a machine with cores to spare."""
        if self.build.config.executor.address or os.environ.get("RAY_ADDRESS"):
            return True
        asked = self.options.workers or self.build.config.executor.workers
        roomy = (os.cpu_count() or 1) >= AUTO_LOCAL_RAY_MIN_CPUS
        return units > AUTO_LOCAL_MAX_UNITS and bool(asked or roomy)

    def _execute(self, stage: Stage, ctx: Context, shared: Any, misses: list, results: Results,
                 report: StageReport, progress: Progress, traces: dict) -> None:
        spec = stage.spec
        executor = self._executor_for(stage, misses)
        by_id = {unit.id: (unit, static, unit_digest, components, why)
                 for unit, static, unit_digest, components, why in misses}
        items = [WorkItem(unit.id, unit.payload, self._blobs_for(unit), want=unit.files,
                          cost=unit.cost) for unit, *_ in misses]
        progress.start(spec.name, len(items))
        failures: list[OrchestrateError] = []
        try:
            for finished in executor.execute(stage.module.run, items, shared):
                unit, static, unit_digest, components, why = by_id[finished.unit_id]
                progress.advance()
                if finished.error is not None:
                    error = finished.error
                    if not isinstance(error, OrchestrateError):
                        error = InternalError(
                            f"stage {spec.name!r} failed on unit {unit.id!r}: "
                            f"{type(error).__name__}: {error}\n{finished.error_text}")
                    failures.append(error)
                    self.log.error("unit.failed", stage=spec.name, unit=unit.id,
                                   error=error.describe().splitlines()[0])
                    if not self.options.keep_going:
                        raise error
                    continue
                blob = dumps(finished.result)
                digest = self.cache.put_blob(blob)
                self.cache.actions(spec.name).append(static, finished.reads, digest,
                                                     unit_digest, components)
                traces.update(finished.reads)
                results.add(unit.id, digest, finished.result, keep=len(blob) <= KEEP_IN_MEMORY_BYTES)
                outcome = UnitOutcome(spec.name, unit.id, False, why, finished.seconds,
                                      finished.worker, finished.start, result=digest)
                report.outcomes.append(outcome)
                report.built += 1
                if self.options.explain:
                    self.explained.append(outcome)
                    self.log.info("explain", unit=outcome_line(outcome))
        finally:
            progress.stop()
            self.cache.actions(spec.name).flush()
        if failures:
            raise failures[0]

    def _blobs_for(self, unit: Unit) -> LazyBlobs:
        return LazyBlobs(tuple(unit.blobs), self.load_result)

    def load_result(self, digest: str) -> Any:
        """A stored result; a corrupt blob is dropped and its unit recomputed in the driver."""
        try:
            return loads(self.cache.get_blob(digest))
        except CacheCorrupt:
            producer = self._producers.get(digest)
            if producer is None:
                raise
            self.log.warning("cache.recompute", digest=digest[:12])
            return self._recompute(*producer, digest)

    def _recompute(self, stage: Stage, ctx: Context, shared: Any, unit: Unit, static: str,
                   expected: str) -> Any:
        """Run a cached unit again in the driver (its stored result was damaged)."""
        item = WorkItem(unit.id, unit.payload, self._blobs_for(unit), want=unit.files)
        finished = run_item(stage.module.run, item, shared, ctx.root, True, "driver")
        if finished.error is not None:
            raise finished.error
        digest = self.cache.put_blob(dumps(finished.result))
        self.cache.actions(stage.name).append(static, finished.reads, digest)
        if digest != expected:  # not reproducible: restart so every key sees the new value
            raise CacheCorrupt(f"unit {unit.id!r} of {stage.name!r} recomputed differently")
        return finished.result


class DryRunStop(Exception):
    """A dry run reached a stage with work to do; the stages after it cannot be planned."""

    def __init__(self, stage: str) -> None:
        self.stage = stage
        super().__init__(stage)


def _key_parts(key: Any) -> dict[str, str]:
    """Digest of each top-level field of a unit's key, so --explain can name what changed."""
    if isinstance(key, Mapping):
        return {str(k): digest_value(v) for k, v in sorted(key.items(), key=lambda kv: str(kv[0]))}
    return {"key": digest_value(key)}


def run_build(build: Build, options: RunOptions, log, stage_modules=None) -> RunResult:
    """Run a build; a corrupt cache entry found mid-run is dropped and the run restarted, then
    without skipping whole stages, so that every damaged unit result is recomputed in place."""
    for attempt in range(3):
        scheduler = Scheduler(build, options, log, stage_modules, skip_stages=attempt == 0)
        try:
            result = scheduler.run()
            result.explained = scheduler.explained
            result.dry_run_stopped_at = scheduler.dry_run_stopped_at
            result.outputs.repair = lambda name: run_build(build, options, log,
                                                           stage_modules).outputs[name]
            return result
        except CacheCorrupt as exc:
            log.warning("cache.corrupt", message=exc.message, action="dropped; rerunning")
            if attempt == 2:
                raise
    raise AssertionError("unreachable")
