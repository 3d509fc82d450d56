"""What outlives one build in a resident process: a session of one build file.

`orchestrate run` opens a session, builds once and closes it; `orchestrate watch` keeps one
open and builds in it on every save. A session holds what costs time to make again and stays
true between builds: the stages selected and their packages allowed, the project's files and
the policy they are read under, the executors (a Ray started for one build stays warm for the
next), the cache (its databases and pack files open) and the project's file table as the last
build saved it. With that table in memory, a build told which paths moved (by a file watcher)
`stat`s only those and their folders instead of every file of the project.

What a session does not keep is a build's: the build state is opened for each build (each has
a generation of its own, cache/state.py), and so is the rebuilder (a run's results in memory).
While open, a session holds the cache folder as a running build does (files/lock.py): cache
housekeeping waits for it, and never pulls a blob from under the indexes it keeps open.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..cache import Cache
from ..cache.resident import DecodedEntries, KeptDigests, KeptResults
from ..cache.state import BuildState
from ..codec import allow_package
from ..executors import Workplace
from ..executors.pool import ExecutorPool
from ..files.filetable import FileTable
from ..files.lock import CacheLock
from ..files.projectfiles import ProjectFiles
from .config import Build
from .graph import Stage, select
from .identity import code_digest
from .options import RunOptions
from .registry import code_roots, registered_stages


class Session:
    """The builds of one build file with one set of options, in one process (see the
    module's docstring). Use it as a context manager: it holds the cache folder while open."""

    def __init__(
        self,
        build: Build,
        options: RunOptions,
        log,
        stages: Sequence[Stage] | None = None,
        resident: bool = False,
    ) -> None:
        self.build = build
        # Builds again on every save (`orchestrate watch`): entries decoded by one build serve
        # the next (the stages are told, StageContext.resident, and may keep what is theirs).
        self.resident = resident
        self.decoded = DecodedEntries() if resident else None
        # Entry digests of keyed values, by generation: a build reading a value's digests (which
        # entries a unit's reads name) and its fingerprint (whether the whole changed) reads
        # its rows once, a resident session's next builds only the rows changed since.
        self.digests = KeptDigests()
        self.results = KeptResults() if resident else None  # and the large results stored
        self.warmed: set[str] = set()  # stages whose `warm` hook ran (`warm`)
        self.options = options
        self.log = log
        self.root = str(build.project_root).replace("\\", "/")
        if stages is None:
            stages = registered_stages()
        self.stages = select(list(stages), options.stages)
        for stage in self.stages:  # their results may hold records of their packages' types
            allow_package(module_name(stage))
        self.files = ProjectFiles(self.root, build.file_policy)
        place = Workplace(
            self.root,
            str(build.cache_dir),
            build.file_policy,
            tuple(code_roots(self.stages)),
            files=self.files,
        )
        settings = build.config.executor  # type: ignore[attr-defined]
        self.executors = ExecutorPool(options.executor, place, settings, options.workers, log)
        self.code = code_digest(module_name(s) for s in self.stages)
        self.cache = self._open_cache()
        self._table: FileTable | None = None  # as the last build saved it
        self._lock = CacheLock(build.cache_dir)

    def __enter__(self) -> Session:
        self._lock.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.close()
        finally:
            self._lock.__exit__(*exc)

    def _open_cache(self) -> Cache:
        # A dry run is a run with nothing kept: the state and the cache in scratch.
        options, build = self.options, self.build
        return Cache(
            build.cache_dir,
            log=self.log,
            scratch=options.dry_run,
            key=build.cache_key(),
            remote=build.cache_remote(),
        )

    def open_state(self) -> BuildState:
        """The build state for one build: a generation of its own."""
        return BuildState(
            self.build.cache_dir,
            self.root,
            str(self.build.output_dir),
            self.cache,
            self.log,
            scratch=self.options.dry_run,
            key=self.cache.key,
            decoded=self.decoded,
            kept=self.digests,
        )

    # -- the file table ----------------------------------------------------------------------
    def take_table(self) -> FileTable | None:
        """The file table as the last build saved it (None: not held; load it from the
        state), handed to the build that starts: a scan patches it in place, so the session
        holds it no more until the build gives it back saved (`keep_table`)."""
        table, self._table = self._table, None
        return table

    def keep_table(self, table: FileTable) -> None:
        """The table a build just saved in the state: the next build starts from it."""
        self._table = table

    @property
    def holds_table(self) -> bool:
        return self._table is not None

    def warm(self, stage: Stage, ctx, inputs, state) -> None:
        """A resident session's first skip of a stage lets its optional `warm(ctx, inputs,
        state)` hook make ready what the stage's next run reads (an index to patch rather than
        decode, worker processes), so that the first edit after a watch starts costs what later
        ones do. It changes nothing a build makes: one that fails is logged and forgotten (the
        next run does that work itself)."""
        warm, name = getattr(stage.module, "warm", None), stage.spec.name
        if warm is None or not self.resident or name in self.warmed:
            return
        self.warmed.add(name)
        try:
            warm(ctx, inputs, state)
        except Exception as exc:  # an optimisation: the build stands without it
            self.log.warning("stage.warm_failed", stage=name, error=f"{type(exc).__name__}: {exc}")

    # -- damage and the end ------------------------------------------------------------------
    def reopen_cache(self) -> None:
        """After damage was found and set aside: the cache opened afresh (its indexes read
        again), and the file table read again from the state."""
        self._table = None
        if self.decoded is not None:
            self.decoded.clear()
        if self.digests is not None:
            self.digests.clear()
        if self.results is not None:
            self.results.clear()
        try:
            self.cache.close()
        finally:
            self.cache = self._open_cache()

    def close(self) -> None:
        try:
            self.cache.close()
        finally:
            self.executors.close()


def module_name(stage: Stage) -> str:
    """The module a stage is written in (its package's records may be in its results)."""
    return getattr(stage.module, "__name__", type(stage.module).__module__)
