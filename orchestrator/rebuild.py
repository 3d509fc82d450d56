"""The rebuilder: a stage's units looked up under constructive traces, the misses run.

Each unit is keyed by a static key (stage, versions, build-file slice, the unit's declared key
material) plus the files it read last time, each re-checked against its current digest
("Build Systems à la Carte"). Misses go to an executor; their results and traces are recorded.
Unchanged outputs give unchanged downstream keys, so rebuilds stop early. Every miss carries the
reason it ran (`--explain`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, NamedTuple

from . import __version__
from .cache import ActionEntry, Cache
from .context import Context
from .errors import CacheCorrupt, OrchestrateError
from .executors import LazyBlobs, WorkItem, run_item
from .executors.pool import ExecutorPool
from .graph import Stage
from .hashing import canonical_json, digest_bytes, digest_value, dumps, loads
from .observe import Progress, outcome_line
from .outcomes import StageReport, UnitOutcome
from .typing import Plan, Unit
from .values import Results

#: Results smaller than this stay in memory for `finish`; larger ones (cooked payloads: a few KB
#: each, 100,000 of them) are reloaded from the store only if `finish` asks for them.
KEEP_IN_MEMORY_BYTES = 4 * 1024


class InternalError(OrchestrateError):
    """A stage raised something unexpected: a bug."""

    exit_code = 3


class DryRunStop(Exception):
    """A dry run reached a stage with work to do; the stages after it cannot be planned."""

    def __init__(self, stage: str) -> None:
        self.stage = stage
        super().__init__(stage)


class Miss(NamedTuple):
    """A unit that must run, with its keys and the reason."""

    unit: Unit
    static: str  # the digest its action entries are filed under
    unit_digest: str  # names the unit across runs (for --explain's last entry)
    components: dict  # digests of the key's parts, so --explain can say which changed
    why: str


class Producer(NamedTuple):
    """What recomputes a cached result should its stored blob turn out damaged."""

    stage: Stage
    ctx: Context
    shared: Any
    unit: Unit
    static: str


def library_versions() -> dict[str, str]:
    """Versions of the libraries that shape outputs; they enter every key."""
    import blake3
    import lxml.etree
    import lz4
    import zstandard

    return {
        "python": "{}.{}".format(*sys.version_info[:2]),
        "lxml": lxml.etree.__version__,
        "zstandard": zstandard.__version__,
        "lz4": lz4.__version__,
        "blake3": getattr(blake3, "__version__", "?"),
        "orchestrate": __version__,
    }


class Rebuilder:
    """Runs one stage's units through the cache for one run."""

    def __init__(
        self,
        cache: Cache,
        executors: ExecutorPool,
        log,
        *,
        no_cache: bool = False,
        dry_run: bool = False,
        keep_going: bool = False,
        explain: bool = False,
    ) -> None:
        self.cache = cache
        self.executors = executors
        self.log = log
        self.no_cache = no_cache
        self.dry_run = dry_run
        self.keep_going = keep_going
        self.explain = explain
        self.libs = library_versions()
        self.libs_digest = digest_value(self.libs)[:16]
        self.explained: list[UnitOutcome] = []
        self.startup_unreported = 0.0  # Ray's startup inside the current stage, reported apart
        self._producers: dict[str, Producer] = {}  # result digest → what recomputes it

    def results(
        self,
        stage: Stage,
        ctx: Context,
        plan: Plan,
        slice_value: Any,
        report: StageReport,
        progress: Progress,
    ) -> tuple[Results, dict]:
        """Every unit's result (looked up or run) and the files the units read."""
        spec = stage.spec
        slice_digest = digest_value(slice_value)
        results = Results(plan, self.load_result)
        traces: dict[str, str | None] = {}
        misses: list[Miss] = []
        report.units = len(plan.units)
        # What every unit's key shares, serialized once: the per-unit part is its key and id.
        prefix = canonical_json(
            {"stage": spec.name, "version": spec.version, "libs": self.libs, "slice": slice_digest}
        )
        for unit in plan.units:
            static = digest_bytes(prefix + canonical_json([unit.key, unit.id]))
            entry, why = (
                (None, "--no-cache") if self.no_cache else self.lookup(ctx, spec.name, static)
            )
            if entry is not None:
                traces.update(entry.reads)
                results.add(unit.id, entry.result)
                self._producers[entry.result] = Producer(stage, ctx, plan.shared, unit, static)
                report.cached += 1
                report.outcomes.append(
                    UnitOutcome(spec.name, unit.id, True, "cached", result=entry.result)
                )
                continue
            unit_digest = digest_value([spec.name, unit.id])
            components = {
                "version": spec.version,
                "libs": self.libs_digest,
                "slice": slice_digest[:16],
                "key": {field: value[:16] for field, value in key_parts(unit.key).items()},
            }
            if why is None:
                why = self.explain_miss(spec.name, unit_digest, components)
            misses.append(Miss(unit, static, unit_digest, components, why))
        if self.dry_run and misses:
            for miss in misses:
                outcome = UnitOutcome(spec.name, miss.unit.id, False, miss.why)
                report.outcomes.append(outcome)
                self.explained.append(outcome)
            report.built = len(misses)
            raise DryRunStop(spec.name)  # later stages need this stage's values to be planned
        if misses:
            self.execute(stage, plan.shared, misses, results, report, progress, traces)
        self.cache.actions(spec.name).release()  # 100 MB of log lines at 100,000 units
        return results, traces

    # -- cache lookups -------------------------------------------------------------------
    def lookup(
        self, ctx: Context, stage_name: str, static: str
    ) -> tuple[ActionEntry | None, str | None]:
        """(entry, None) on a hit; (None, reason) when the trace no longer matches."""
        entries = self.cache.actions(stage_name).get(static)
        if not entries:
            return None, None
        reason = None
        for entry in entries:
            changed = next(
                (path for path, digest in entry.reads if ctx.digest_of(path) != digest), None
            )
            if changed is None:
                if self.cache.has_blob(entry.result):
                    return entry, None
                reason = "cached result was dropped from the store"
            elif reason is None:
                reason = f"input changed: {changed}"
        return None, reason

    def explain_miss(self, stage_name: str, unit_digest: str, components: dict) -> str:
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
    def execute(
        self,
        stage: Stage,
        shared: Any,
        misses: list[Miss],
        results: Results,
        report: StageReport,
        progress: Progress,
        traces: dict,
    ) -> None:
        spec = stage.spec
        executor, startup = self.executors.for_units(len(misses))
        self.startup_unreported += startup
        by_id = {miss.unit.id: miss for miss in misses}
        items = [
            WorkItem(
                miss.unit.id,
                miss.unit.payload,
                self.blobs_for(miss.unit),
                want=miss.unit.files,
                cost=miss.unit.cost,
            )
            for miss in misses
        ]
        progress.start(spec.name, len(items))
        failures: list[OrchestrateError] = []
        try:
            for finished in executor.execute(stage.module.run, items, shared):
                miss = by_id[finished.unit_id]
                progress.advance()
                if finished.error is not None:
                    error = finished.error
                    if not isinstance(error, OrchestrateError):
                        error = InternalError(
                            f"stage {spec.name!r} failed on unit {miss.unit.id!r}: "
                            f"{type(error).__name__}: {error}\n{finished.error_text}"
                        )
                    failures.append(error)
                    self.log.error(
                        "unit.failed",
                        stage=spec.name,
                        unit=miss.unit.id,
                        error=error.describe().splitlines()[0],
                    )
                    if not self.keep_going:
                        raise error
                    continue
                blob = dumps(finished.result)
                digest = self.cache.put_blob(blob)
                self.cache.actions(spec.name).append(
                    miss.static, finished.reads, digest, miss.unit_digest, miss.components
                )
                traces.update(finished.reads)
                results.add(
                    miss.unit.id, digest, finished.result, keep=len(blob) <= KEEP_IN_MEMORY_BYTES
                )
                outcome = UnitOutcome(
                    spec.name,
                    miss.unit.id,
                    False,
                    miss.why,
                    finished.seconds,
                    finished.worker,
                    finished.start,
                    result=digest,
                )
                report.outcomes.append(outcome)
                report.built += 1
                if self.explain:
                    self.explained.append(outcome)
                    self.log.info("explain", unit=outcome_line(outcome))
        finally:
            progress.stop()
            self.cache.actions(spec.name).flush()
        if failures:
            raise failures[0]

    def blobs_for(self, unit: Unit) -> LazyBlobs:
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
            return self.recompute(producer, digest)

    def recompute(self, producer: Producer, expected: str) -> Any:
        """Run a cached unit again in the driver (its stored result was damaged)."""
        unit = producer.unit
        item = WorkItem(unit.id, unit.payload, self.blobs_for(unit), want=unit.files)
        finished = run_item(
            producer.stage.module.run, item, producer.shared, producer.ctx.root, True, "driver"
        )
        if finished.error is not None:
            raise finished.error
        digest = self.cache.put_blob(dumps(finished.result))
        self.cache.actions(producer.stage.name).append(producer.static, finished.reads, digest)
        if digest != expected:  # not reproducible: restart so every key sees the new value
            raise CacheCorrupt(
                f"unit {unit.id!r} of {producer.stage.name!r} recomputed differently"
            )
        return finished.result


def key_parts(key: Any) -> dict[str, str]:
    """Digest of each top-level field of a unit's key, so --explain can name what changed."""
    if isinstance(key, Mapping):
        return {str(k): digest_value(v) for k, v in sorted(key.items(), key=lambda kv: str(kv[0]))}
    return {"key": digest_value(key)}
