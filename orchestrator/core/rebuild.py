"""The rebuilder: units that must run are looked up in the action cache, and the misses run.

A unit is keyed by a static key (stage, versions, the product's code, build-file slice, the
unit's declared key material) plus the files it read, each re-checked against its current
digest ("Build Systems à la Carte"'s constructive traces), so a second checkout, another output
folder or an edit undone hits what was built before. Misses go to an executor; their results
are stored by digest and their traces recorded. Every unit that runs carries the reason why
(`--explain`). Each unit's `UnitRecord` is filled in as this happens: its result, its reads,
whether and where it ran.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..cache import KEEP_IN_MEMORY_BYTES, ActionEntry, Cache, StoredResult
from ..cache.records import Fingerprint, UnitRecord
from ..cache.resident import MISSING, KeptResults
from ..codec import dumps, loads
from ..errors import CacheCorrupt, CodecError, DryRunNamed, InternalError, OrchestrateError
from ..executors import LazyBlobs, WorkItem, run_item
from ..executors.pool import ExecutorPool
from ..files.projectfiles import ProjectFiles
from ..files.reads import ENTRY_MARK, describe_read
from ..hashing import canonical_json, digest_bytes, digest_value
from ..typing import Parts, StageSpec, StoredParts, Unit
from ..version import __version__
from .context import Context
from .graph import Stage
from .observe import Progress, outcome_line
from .options import RunOptions
from .outcomes import StageReport


@dataclass
class RunningStage:
    """One stage in this run, as its units are planned and run: its declaration and module,
    the key prefix its units share, its report, its progress, and whether a later stage of the
    run reads its values (a dry run runs only the stages whose values later stages need)."""

    stage: Stage
    prefix: bytes
    report: StageReport
    progress: Progress
    needed_later: bool = True

    @property
    def name(self) -> str:
        return self.stage.spec.name


@dataclass(frozen=True)
class StagePlan:
    """What runs a unit of a stage again, should its stored result turn out damaged."""

    stage: Stage
    project: ProjectFiles
    shared: Any


def library_versions() -> dict[str, str]:
    """Versions of the libraries that shape outputs; they enter every key."""
    import blake3
    import lxml.etree
    import lz4
    import msgpack
    import zstandard

    return {
        "python": "{}.{}".format(*sys.version_info[:2]),
        "lxml": lxml.etree.__version__,
        "zstandard": zstandard.__version__,
        "lz4": lz4.__version__,
        "msgpack": ".".join(map(str, msgpack.version)),
        "blake3": getattr(blake3, "__version__", "?"),
        "orchestrate": __version__,
    }


class StageKeys(NamedTuple):
    """A stage's fingerprint and its unit keys' shared prefix (Rebuilder.stage_keys)."""

    fingerprint: Fingerprint
    prefix: bytes


def stage_keys(spec: StageSpec, libs: dict[str, str], slice_value: Any) -> StageKeys:
    """What a stage's results depend on besides its inputs: its fingerprint (by part, for
    --explain) and what every unit key of the stage shares, serialized once (`libs`: the
    product's code digest and the versions of the libraries that shape outputs)."""
    others = dict(libs)
    code = others.pop("code")
    sliced = digest_value(slice_value)
    fingerprint = Fingerprint(spec.version, digest_value(others)[:16], code[:16], sliced[:16])
    prefix = canonical_json(
        {"stage": spec.name, "version": spec.version, "libs": libs, "slice": sliced}
    )
    return StageKeys(fingerprint, prefix)


class Rebuilder:
    """Runs units through the action cache and an executor, for one run."""

    def __init__(
        self,
        cache: Cache,
        executors: ExecutorPool,
        log,
        code: str,
        options: RunOptions,
        keep_producers: bool = False,
        kept: KeptResults | None = None,
    ) -> None:
        self.cache = cache
        self.kept = kept  # a resident session's large results, from one build to the next
        self.executors = executors
        self.log = log
        self.options = options
        self.libs = {**library_versions(), "code": code}
        self.explained: list[UnitRecord] = []
        self._startup = 0.0  # Ray's startup inside the current stage, reported apart
        self._plans: dict[str, StagePlan] = {}  # stage name → what re-runs its units
        self._producers: dict[str, UnitRecord] = {}  # result digest → the unit that made it
        # A run restarted after damage keeps them all: several damaged blobs are then mended
        # in one pass instead of one restart each.
        self.keep_producers = keep_producers
        self._memory: dict[str, Any] = {}  # small results made in this run, by digest

    @staticmethod
    def static_key(prefix: bytes, unit: Unit) -> str:
        return digest_bytes(prefix + canonical_json([unit.key, unit.id]))

    def begin(self, run: RunningStage, project: ProjectFiles, shared: Any) -> None:
        """The stage's plan is made: its units may run, or be run again if damaged."""
        self._plans[run.name] = StagePlan(run.stage, project, shared)

    def take_startup(self) -> float:
        """The seconds spent starting an executor since last asked (reported on their own)."""
        startup, self._startup = self._startup, 0.0
        return startup

    # -- running ---------------------------------------------------------------------------------
    def execute(self, run: RunningStage, ctx: Context, due: list[UnitRecord]) -> None:
        """Give every due unit its result: from the action cache when a trace still matches,
        else run (in a dry run, the due units of a stage no later stage reads are only named)."""
        misses: list[UnitRecord] = []
        for record in due:
            entry, reason = (
                (None, None) if self.options.no_cache else self.lookup(ctx, run.name, record.static)
            )
            if entry is not None:
                record.found(entry.result, dict(entry.reads))
                self._producers[entry.result] = record
                continue
            if reason:
                record.explain(reason)
            misses.append(record)
        if self.options.dry_run and misses and not run.needed_later:
            run.report.ran(misses)
            self.explained.extend(misses)
            raise DryRunNamed(run.name)
        if misses:
            self._run(run, ctx, misses)

    def _run(self, run: RunningStage, ctx: Context, misses: list[UnitRecord]) -> None:
        executor, startup = self.executors.for_units(len(misses))
        self._startup += startup
        by_id = {record.id: record for record in misses}
        items = [
            WorkItem(
                record.id,
                record.planned.payload,
                self.blobs_for(record.planned),
                want=record.planned.files,
                cost=record.planned.cost,
                pinned=record.planned.pinned,
            )
            for record in misses
        ]
        run.progress.start(run.name, len(items))
        # Units run elsewhere store what they make themselves (cache/workers.py): a local run
        # writes no probe file and flushes no pack for them.
        target = None if executor.in_driver else self.cache.store_target()
        if target is not None:  # what workers read by digest is in the pack files by now
            self.cache.packs.flush()
        failures: list[OrchestrateError] = []
        try:
            for finished in executor.execute(
                run.stage.module.run, items, self._plans[run.name].shared, target
            ):
                record = by_id[finished.unit_id]
                run.progress.advance()
                if finished.error is not None:
                    error = finished.error
                    if not isinstance(error, OrchestrateError):
                        error = InternalError(
                            f"stage {run.name!r} failed on unit {record.id!r}: "
                            f"{type(error).__name__}: {error}\n{finished.error_text}"
                        )
                    failures.append(error)
                    self.log.error(
                        "unit.failed",
                        stage=run.name,
                        unit=record.id,
                        error=error.describe().splitlines()[0],
                    )
                    if not self.options.keep_going:
                        raise error
                    continue
                if finished.stored is not None:
                    digest = self.stored(finished.stored, record)
                else:
                    digest, _ = self.store(finished.result, record)
                reads = ctx.entries.resolve(finished.reads, run.stage.spec.inputs)
                self.cache.actions.put(run.name, record.static, reads, digest)
                ctx.note_reads(reads, finished.signatures)
                record.finished(digest, reads, finished.seconds, finished.worker, finished.start)
                run.report.ran([record])
                if self.options.explain or self.options.dry_run:  # a dry run names what it ran
                    self.explained.append(record)
                if self.options.explain:
                    self.log.info("explain", unit=outcome_line(record))
        finally:
            run.progress.stop()
            self.cache.flush()
        if failures:
            raise failures[0]

    def store(self, result: Any, record: UnitRecord) -> tuple[str, dict[str, Any]]:
        """Store a unit's result, each of its `Parts` first as a result of its own; its digest,
        and each stored value by digest (what `recompute` may be asked for)."""
        made: dict[str, Any] = {}
        if isinstance(result, Parts):
            digests = {}
            for name, value in result.values.items():
                digests[name] = self._put(value, record, made, keep=False)
            result = StoredParts(digests)
        return self._put(result, record, made, keep=True), made

    def stored(self, stored: StoredResult, record: UnitRecord) -> str:
        """Record a result its worker stored (cache/workers.py): where its blobs went, who made
        them, and the result itself when small; its digest."""
        self.cache.learn_blobs(stored.packed)
        for digest in (*stored.parts, stored.digest):
            self._producers[digest] = record
        if stored.small:
            self._memory[stored.digest] = stored.value
        return stored.digest

    def _put(self, value: Any, record: UnitRecord, made: dict[str, Any], keep: bool) -> str:
        try:
            blob = dumps(value)
        except TypeError as exc:
            raise InternalError(
                f"stage {record.stage!r}: unit {record.id!r} returned "
                f"a value that cannot be stored: {exc}"
            ) from None
        digest = self.cache.put_blob(blob)
        if keep and len(blob) <= KEEP_IN_MEMORY_BYTES:
            self._memory[digest] = value
        if keep and self.kept is not None:
            self.kept.offer(digest, value, len(blob))
        self._producers[digest] = record
        made[digest] = value
        return digest

    # -- the action cache ------------------------------------------------------------------------
    def lookup(
        self, ctx: Context, stage_name: str, static: str
    ) -> tuple[ActionEntry | None, str | None]:
        """(entry, None) on a hit; (None, reason) when the trace no longer matches."""
        reason = None
        # the remote cache, if any, is asked only when no entry of the folder matches
        for entry in self.cache.actions.candidates(stage_name, static):
            changed = next(
                (
                    path
                    for path, digest in entry.reads
                    if not path.startswith(ENTRY_MARK) and ctx.digest_of(path) != digest
                ),
                None,
            ) or ctx.entries.changed(entry.reads)
            if changed is None:
                if self.cache.has_blob(entry.result):
                    self.cache.actions.touch(stage_name, static, entry.result)
                    return entry, None
                reason = "cached result was dropped from the store"
            elif reason is None:
                reason = f"input changed: {describe_read(changed, ctx.entries.notes)}"
        return None, reason

    # -- results -----------------------------------------------------------------------------------
    def blobs_for(self, unit: Unit) -> LazyBlobs:
        return LazyBlobs(tuple(unit.blobs), self.load_result, self.cache.locate)

    def end_stage(self) -> None:
        """Let go of the stage's results and producers: what later stages read comes from the
        store (a damaged blob found then restarts the run, which recomputes it). Holding them
        for the whole run kept every unit's payload and small result alive: a gigabyte at
        100,000 assets."""
        self._memory.clear()
        if not self.keep_producers:
            self._producers.clear()
            self._plans.clear()

    def remember(self, record: UnitRecord) -> None:
        """How to recompute a stored result found through the state, should it be damaged."""
        self._producers[record.result] = record

    def load_result(self, digest: str) -> Any:
        """A stored result; a damaged one is dropped and its unit recomputed in the driver."""
        if digest in self._memory:
            return self._memory[digest]
        kept = self.kept.get(digest) if self.kept is not None else MISSING
        if kept is not MISSING:
            return kept
        try:
            data = self.cache.get_blob(digest)
            value = loads(data)
            if self.kept is not None:
                self.kept.offer(digest, value, len(data))
        except (CacheCorrupt, CodecError) as exc:
            if isinstance(exc, CodecError):  # intact bytes, but no value: never trust it again
                self.cache.refuse(digest, str(exc))
            producer = self._producers.get(digest)
            if producer is None:
                # The run starts again (run_build): no action entry may lead it back here.
                self.cache.actions.drop_result(digest)
                raise CacheCorrupt(f"stored result {digest[:12]} is damaged or gone") from None
            self.log.warning("cache.recompute", digest=digest[:12])
            value = self.recompute(producer, digest)
        if isinstance(value, StoredParts):
            # A part found damaged later is recomputed by the unit that made it.
            producer = self._producers.get(digest)
            if producer is not None:
                for part in value.digests.values():
                    self._producers.setdefault(part, producer)
        return value

    def recompute(self, record: UnitRecord, expected: str) -> Any:
        """Run a unit again in the driver (its stored result was damaged or gone)."""
        unit, plan = record.planned, self._plans[record.stage]
        item = WorkItem(unit.id, unit.payload, self.blobs_for(unit), want=unit.files)
        project = plan.project
        finished = run_item(
            plan.stage.module.run,
            item,
            plan.shared,
            project.root,
            True,
            "driver",
            policy=project.policy,
        )
        if finished.error is not None:
            raise finished.error
        _, made = self.store(finished.result, record)
        if expected not in made:  # not reproducible: restart so every key sees the new value
            raise CacheCorrupt(f"unit {unit.id!r} of {record.stage!r} recomputed differently")
        return made[expected]
