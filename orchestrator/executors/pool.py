"""Which executor runs a stage's misses, made once per run and closed at its end.

`auto` decides from the work left after the cache and the machine: a named cluster gets any
work; a local Ray is started for large work only when workers were asked for or the machine has
cores to spare; everything else runs in the driver and in copies of it forked to use the other
cores (executors/forked.py), and a run with nothing to do never imports Ray.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

from . import Executor, Workplace, make_executor

#: Below this many units left to run, `auto` stays in the driver: starting Ray costs seconds.
AUTO_LOCAL_MAX_UNITS = 400
#: Without a cluster address, `auto` starts a local Ray only on a machine with at least this many
#: cores: the driver keeps one busy (digests, the store, assembling results), and on 2 cores the
#: local executor measured faster at every size (docs/benchmarks.md: 8.3 s against 21.9 s for a
#: cold build of 10,000 resources; 188 s against 316 s at 100,000).
AUTO_LOCAL_RAY_MIN_CPUS = 4


class Chosen(NamedTuple):
    executor: Executor
    startup: float  # seconds spent starting it just now


class ExecutorPool:
    """The executors of one run, by kind; Ray's startup time is kept for the summary."""

    def __init__(
        self, kind: str | None, place: Workplace, settings: Any, workers: int | None, log
    ) -> None:
        self.kind = kind or settings.kind  # the build file's `executor.kind` unless asked
        self.place = place
        self.settings = settings  # the build file's `executor` section
        self.workers = workers or settings.workers
        self.log = log
        self.ray_startup: float | None = None
        self._made: dict[str, Executor] = {}

    def for_units(self, count: int) -> Chosen:
        """The executor for `count` units."""
        kind = self.kind
        helpers = 0
        if kind == "auto":
            kind = "ray" if self.ray_pays_off(count) else "local"
            # In the driver, and in a forked helper for each other core (executors/forked.py).
            helpers = max(0, (os.cpu_count() or 1) - 1)
        if kind in self._made:
            return Chosen(self._made[kind], 0.0)
        executor = make_executor(
            kind,
            self.place,
            workers=self.workers,
            address=self.settings.address,
            shared_paths=self.settings.shared_paths,
            log=self.log,
            helpers=helpers,
        )
        self._made[kind] = executor
        startup = 0.0
        if kind == "ray":
            self.ray_startup = getattr(executor, "startup_seconds", None)
            startup = self.ray_startup or 0.0
        return Chosen(executor, startup)

    def ray_pays_off(self, units: int) -> bool:
        """`auto`'s choice: a cluster whenever one is named; a local Ray for big work when
        workers were asked for, or on a machine with cores to spare."""
        if self.settings.address or os.environ.get("RAY_ADDRESS"):
            return True
        roomy = (os.cpu_count() or 1) >= AUTO_LOCAL_RAY_MIN_CPUS
        return units > AUTO_LOCAL_MAX_UNITS and bool(self.workers or roomy)

    def close(self) -> None:
        for executor in self._made.values():
            executor.close()
