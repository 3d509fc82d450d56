"""What the engine reports while it runs: progress per stage, the resources it uses (sampled in
a thread), the line --explain logs for a unit. What a user reads after the run (the log's
format, the summary table, the profile) is the command line's: shell/present.py."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import Any

import psutil

from ..cache.records import UnitRecord

REFRESH_SECONDS = 0.1  # how often a terminal's progress bar is drawn again, at most


def is_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def interactive() -> bool:
    return sys.stderr.isatty() and not is_ci()


class Progress:
    """Per-stage progress: a rich bar on a terminal, a few plain lines otherwise."""

    def __init__(self, enabled: bool = True) -> None:
        self.rich = enabled and interactive()
        self._progress: Any = None
        self._task: Any = None
        self._plain_next = 0.0
        self._drawn = 0.0  # when the bar was last drawn
        self._name = ""
        self._total = 0
        self._done = 0

    def start(self, stage: str, total: int) -> None:
        self._name, self._total, self._done = stage, total, 0
        if self.rich and total:
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as RichProgress

            self._progress = RichProgress(
                TextColumn("{task.description:<12}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                transient=True,
                # Drawn from `advance`, not from a thread of its own: a thread holding the
                # terminal's lock would keep the executor from forking helpers (forked.py).
                auto_refresh=False,
            )
            self._progress.start()
            self._task = self._progress.add_task(stage, total=total)
        self._plain_next = time.monotonic() + 5.0

    def advance(self, n: int = 1) -> None:
        self._done += n
        if self._progress is not None:
            self._progress.advance(self._task, n)
            if time.monotonic() - self._drawn >= REFRESH_SECONDS or self._done >= self._total:
                self._progress.refresh()
                self._drawn = time.monotonic()
        elif self._total and time.monotonic() >= self._plain_next:
            print(f"  {self._name}: {self._done}/{self._total} units", file=sys.stderr)
            self._plain_next = time.monotonic() + 10.0

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


class _SamplerThread(threading.Thread):
    #: It takes no lock a forked helper needs (it reads /proc; its own lock is the sampler's,
    #: which a helper never uses): executors/forked.py forks while it runs.
    fork_safe = True


class ResourceSampler:
    """Samples CPU and RSS of the driver and its child processes (Ray workers) in a thread."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.driver_peak = 0
        # RSS less the pages shared with other processes: on Linux, what Ray's object store maps
        # into the driver (objects it put or read) is resident but shared, and counted in RSS.
        self.driver_private_peak = 0
        self.workers_peak = 0
        self._window_peak = 0
        self._cpu: list[float] = []
        self._me = psutil.Process()
        self._last_total = 0  # driver + workers at the last sample
        self._last_at = -1.0

    def __enter__(self) -> ResourceSampler:
        self._me.cpu_percent(None)
        self._thread = _SamplerThread(target=self._loop, daemon=True, name="rss-sampler")
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        try:
            info = self._me.memory_info()
            driver = info.rss
            private = driver - getattr(info, "shared", 0)
            workers = 0
            for child in self._me.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    workers += child.memory_info().rss
            cpu = self._me.cpu_percent(None)
        except psutil.Error:
            return
        with self._lock:
            self.driver_peak = max(self.driver_peak, driver)
            self.driver_private_peak = max(self.driver_private_peak, private)
            self.workers_peak = max(self.workers_peak, workers)
            self._window_peak = max(self._window_peak, driver + workers)
            self._cpu.append(cpu)
            self._last_total, self._last_at = driver + workers, time.monotonic()

    def window(self) -> tuple[int, float]:
        """Peak RSS (driver + workers) and mean driver CPU% since the last call. A window
        that a sample just ended is not sampled again: listing the process tree costs ~7 ms,
        and most stages of an incremental build (`watch`'s every save) take a few."""
        if time.monotonic() - self._last_at > min(self.interval, 0.05):
            self.sample()
        with self._lock:
            peak, cpu = self._window_peak or self._last_total, self._cpu
            self._window_peak, self._cpu = 0, []
        return peak, (sum(cpu) / len(cpu) if cpu else 0.0)


def outcome_line(record: UnitRecord) -> str:
    return f"{record.stage}: {record.id}: {record.reason}"
