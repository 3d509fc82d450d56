"""The rebuilder: units that must run are looked up in the action cache, and the misses run.

A unit is keyed by a static key (stage, versions, the product's code, build-file slice, the
unit's declared key material) plus the files it read, each re-checked against its current
digest ("Build Systems à la Carte"'s constructive traces), so a second checkout, another output
folder or an edit undone hits what was built before. Misses go to an executor; their results
are stored by digest and their traces recorded. Every unit that runs carries the reason why
(`--explain`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, NamedTuple

from .. import __version__
from ..cache import ActionEntry, Cache
from ..codec import CodecError, dumps, loads
from ..errors import CacheCorrupt, InternalError, OrchestrateError
from ..executors import LazyBlobs, WorkItem, run_item
from ..executors.pool import ExecutorPool
from ..files.projectfiles import ProjectFiles
from ..hashing import canonical_json, digest_bytes, digest_value
from ..typing import Parts, StoredParts, Unit
from .context import Context
from .graph import Stage
from .observe import Progress, outcome_line
from .outcomes import StageReport, UnitOutcome

#: Results smaller than this stay in memory for `finish`; larger ones (cooked payloads: a few KB
#: each, 100,000 of them) are reloaded from the store only if `finish` asks for them.
KEEP_IN_MEMORY_BYTES = 4 * 1024


class DryRunNamed(Exception):
    """A dry run named the units of a stage no later stage reads without running them: the
    stage has no values to finish and store."""


class Pending(NamedTuple):
    """A unit that must run (unless the action cache has it), with its keys and the reason."""

    unit: Unit
    static: str  # the digest its action entries are filed under
    parts: dict[str, str]  # digests of the key's parts, so --explain can say which changed
    why: str


class Done(NamedTuple):
    """A unit's result digest and what it read (path → digest, None for a file looked for)."""

    result: str
    reads: dict[str, str | None]
    ran: bool  # executed now (not found in the action cache)


class Producer(NamedTuple):
    """What recomputes a stored result should its blob turn out damaged."""

    stage: Stage
    project: ProjectFiles
    shared: Any
    unit: Unit


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


def key_parts(key: Any) -> dict[str, str]:
    """Digest of each top-level field of a unit's key, so --explain can name what changed."""
    if isinstance(key, Mapping):
        return {
            str(k): digest_value(v)[:16] for k, v in sorted(key.items(), key=lambda kv: str(kv[0]))
        }
    return {"key": digest_value(key)[:16]}


class Rebuilder:
    """Runs units through the action cache and an executor, for one run."""

    def __init__(
        self,
        cache: Cache,
        executors: ExecutorPool,
        log,
        code: str,
        *,
        no_cache: bool = False,
        dry_run: bool = False,
        keep_going: bool = False,
        explain: bool = False,
        keep_producers: bool = False,
    ) -> None:
        self.cache = cache
        self.executors = executors
        self.log = log
        self.no_cache = no_cache
        self.dry_run = dry_run
        # In a dry run: whether a later stage reads the current stage's values. Its due units
        # then run (their results stored in scratch only), since the later stages' plans and
        # keys depend on them; a stage no later stage reads has its due units named only.
        self.needed_later = True
        self.keep_going = keep_going
        self.explain = explain
        self.libs = {**library_versions(), "code": code}
        self.explained: list[UnitOutcome] = []
        self.startup_unreported = 0.0  # Ray's startup inside the current stage, reported apart
        self._producers: dict[str, Producer] = {}  # result digest → what recomputes it
        # A run restarted after damage keeps them all: several damaged blobs are then mended
        # in one pass instead of one restart each.
        self.keep_producers = keep_producers
        self._memory: dict[str, Any] = {}  # small results made in this run, by digest

    def key_prefix(self, stage: Stage, slice_value: Any) -> bytes:
        """What every unit key of the stage shares, serialized once."""
        spec = stage.spec
        return canonical_json(
            {
                "stage": spec.name,
                "version": spec.version,
                "libs": self.libs,
                "slice": digest_value(slice_value),
            }
        )

    @staticmethod
    def static_key(prefix: bytes, unit: Unit) -> str:
        return digest_bytes(prefix + canonical_json([unit.key, unit.id]))

    # -- running ---------------------------------------------------------------------------------
    def execute(
        self,
        stage: Stage,
        ctx: Context,
        shared: Any,
        pending: list[Pending],
        report: StageReport,
        progress: Progress,
    ) -> dict[str, Done]:
        """Every pending unit's result: from the action cache when a trace still matches, else
        run (in a dry run, the due units of a stage no later stage reads are only named)."""
        spec = stage.spec
        done: dict[str, Done] = {}
        misses: list[Pending] = []
        for item in pending:
            entry, reason = (
                (None, None) if self.no_cache else self.lookup(ctx, spec.name, item.static)
            )
            if entry is not None:
                done[item.unit.id] = Done(entry.result, dict(entry.reads), False)
                self._producers[entry.result] = Producer(stage, ctx.project, shared, item.unit)
                continue
            misses.append(item._replace(why=reason or item.why) if reason else item)
        if self.dry_run and misses and not self.needed_later:
            for item in misses:
                outcome = UnitOutcome(spec.name, item.unit.id, False, item.why)
                report.outcomes.append(outcome)
                self.explained.append(outcome)
            report.built += len(misses)
            raise DryRunNamed(spec.name)
        if misses:
            done.update(self._run(stage, ctx, shared, misses, report, progress))
        return done

    def _run(
        self,
        stage: Stage,
        ctx: Context,
        shared: Any,
        misses: list[Pending],
        report: StageReport,
        progress: Progress,
    ) -> dict[str, Done]:
        spec = stage.spec
        executor, startup = self.executors.for_units(len(misses))
        self.startup_unreported += startup
        by_id = {item.unit.id: item for item in misses}
        items = [
            WorkItem(
                item.unit.id,
                item.unit.payload,
                self.blobs_for(item.unit),
                want=item.unit.files,
                cost=item.unit.cost,
            )
            for item in misses
        ]
        progress.start(spec.name, len(items))
        failures: list[OrchestrateError] = []
        done: dict[str, Done] = {}
        try:
            for finished in executor.execute(stage.module.run, items, shared):
                item = by_id[finished.unit_id]
                progress.advance()
                if finished.error is not None:
                    error = finished.error
                    if not isinstance(error, OrchestrateError):
                        error = InternalError(
                            f"stage {spec.name!r} failed on unit {item.unit.id!r}: "
                            f"{type(error).__name__}: {error}\n{finished.error_text}"
                        )
                    failures.append(error)
                    self.log.error(
                        "unit.failed",
                        stage=spec.name,
                        unit=item.unit.id,
                        error=error.describe().splitlines()[0],
                    )
                    if not self.keep_going:
                        raise error
                    continue
                producer = Producer(stage, ctx.project, shared, item.unit)
                digest, _ = self.store(finished.result, producer)
                self.cache.actions.put(spec.name, item.static, finished.reads, digest)
                ctx.note_reads(finished.reads, finished.signatures)
                done[item.unit.id] = Done(digest, finished.reads, True)
                outcome = UnitOutcome(
                    spec.name,
                    item.unit.id,
                    False,
                    item.why,
                    finished.seconds,
                    finished.worker,
                    finished.start,
                    result=digest,
                )
                report.outcomes.append(outcome)
                report.built += 1
                if self.explain or self.dry_run:  # a dry run names every unit it ran
                    self.explained.append(outcome)
                if self.explain:
                    self.log.info("explain", unit=outcome_line(outcome))
        finally:
            progress.stop()
            self.cache.flush()
        if failures:
            raise failures[0]
        return done

    def store(self, result: Any, producer: Producer) -> tuple[str, dict[str, Any]]:
        """Store a unit's result, each of its `Parts` first as a result of its own; its digest,
        and each stored value by digest (what `recompute` may be asked for)."""
        made: dict[str, Any] = {}
        if isinstance(result, Parts):
            digests = {}
            for name, value in result.values.items():
                digests[name] = self._put(value, producer, made, keep=False)
            result = StoredParts(digests)
        return self._put(result, producer, made, keep=True), made

    def _put(self, value: Any, producer: Producer, made: dict[str, Any], keep: bool) -> str:
        try:
            blob = dumps(value)
        except TypeError as exc:
            raise InternalError(
                f"stage {producer.stage.name!r}: unit {producer.unit.id!r} returned "
                f"a value that cannot be stored: {exc}"
            ) from None
        digest = self.cache.put_blob(blob)
        if keep and len(blob) <= KEEP_IN_MEMORY_BYTES:
            self._memory[digest] = value
        self._producers[digest] = producer
        made[digest] = value
        return digest

    # -- the action cache ------------------------------------------------------------------------
    def lookup(
        self, ctx: Context, stage_name: str, static: str
    ) -> tuple[ActionEntry | None, str | None]:
        """(entry, None) on a hit; (None, reason) when the trace no longer matches."""
        entries = self.cache.actions.get(stage_name, static)
        reason = None
        for entry in entries:
            changed = next(
                (path for path, digest in entry.reads if ctx.digest_of(path) != digest), None
            )
            if changed is None:
                if self.cache.has_blob(entry.result):
                    self.cache.actions.touch(stage_name, static, entry.result)
                    return entry, None
                reason = "cached result was dropped from the store"
            elif reason is None:
                reason = f"input changed: {changed}"
        return None, reason

    # -- results -----------------------------------------------------------------------------------
    def blobs_for(self, unit: Unit) -> LazyBlobs:
        return LazyBlobs(tuple(unit.blobs), self.load_result)

    def end_stage(self) -> None:
        """Let go of the stage's results and producers: what later stages read comes from the
        store (a damaged blob found then restarts the run, which recomputes it). Holding them
        for the whole run kept every unit's payload and small result alive: a gigabyte at
        100,000 assets."""
        self._memory.clear()
        if not self.keep_producers:
            self._producers.clear()

    def remember(self, digest: str, producer: Producer) -> None:
        """How to recompute a stored result found through the state, should it be damaged."""
        self._producers[digest] = producer

    def load_result(self, digest: str) -> Any:
        """A stored result; a damaged one is dropped and its unit recomputed in the driver."""
        if digest in self._memory:
            return self._memory[digest]
        try:
            value = loads(self.cache.get_blob(digest))
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

    def recompute(self, producer: Producer, expected: str) -> Any:
        """Run a unit again in the driver (its stored result was damaged or gone)."""
        unit = producer.unit
        item = WorkItem(unit.id, unit.payload, self.blobs_for(unit), want=unit.files)
        project = producer.project
        finished = run_item(
            producer.stage.module.run,
            item,
            producer.shared,
            project.root,
            True,
            "driver",
            policy=project.policy,
        )
        if finished.error is not None:
            raise finished.error
        _, made = self.store(finished.result, producer)
        if expected not in made:  # not reproducible: restart so every key sees the new value
            raise CacheCorrupt(
                f"unit {unit.id!r} of {producer.stage.name!r} recomputed differently"
            )
        return made[expected]
