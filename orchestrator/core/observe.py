"""What a user sees: structured logs, progress, resource sampling, the profile and the summary."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import structlog

from ..typing import Problem
from .outcomes import StageReport, UnitOutcome


def setup_logging(log_format: str = "console", verbose: bool = False) -> structlog.BoundLogger:
    """structlog to stderr: a console renderer for people, JSON lines for machines."""
    level = logging.DEBUG if verbose else logging.INFO
    renderer = (
        structlog.processors.JSONRenderer(sort_keys=True)
        if log_format == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty() and not is_ci())
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    return structlog.get_logger("orchestrate")


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
            )
            self._progress.start()
            self._task = self._progress.add_task(stage, total=total)
        self._plain_next = time.monotonic() + 5.0

    def advance(self, n: int = 1) -> None:
        self._done += n
        if self._progress is not None:
            self._progress.advance(self._task, n)
        elif self._total and time.monotonic() >= self._plain_next:
            print(f"  {self._name}: {self._done}/{self._total} units", file=sys.stderr)
            self._plain_next = time.monotonic() + 10.0

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


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

    def __enter__(self) -> ResourceSampler:
        self._me.cpu_percent(None)
        self._thread = threading.Thread(target=self._loop, daemon=True, name="rss-sampler")
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

    def window(self) -> tuple[int, float]:
        """Peak RSS (driver + workers) and mean driver CPU% since the last call."""
        self.sample()
        with self._lock:
            peak, cpu = self._window_peak, self._cpu
            self._window_peak, self._cpu = 0, []
        return peak, (sum(cpu) / len(cpu) if cpu else 0.0)


def write_profile(path: str | Path, reports: list[StageReport], t0: float) -> None:
    """Chrome trace-event JSON: one slice per unit, one track per worker, one per stage."""
    events = []
    tracks: dict[str, int] = {}
    for report in reports:
        for outcome in report.outcomes:
            if outcome.cached:
                continue
            tid = tracks.setdefault(outcome.worker, len(tracks) + 1)
            events.append(
                {
                    "name": outcome.unit,
                    "cat": outcome.stage,
                    "ph": "X",
                    "ts": round((outcome.start - t0) * 1e6),
                    "dur": round(outcome.seconds * 1e6),
                    "pid": 1,
                    "tid": tid,
                    "args": {"reason": outcome.reason},
                }
            )
    stage_track = len(tracks) + 1
    for report in reports:
        events.append(
            {
                "name": report.name,
                "cat": "stage",
                "ph": "X",
                "ts": round((report.start - t0) * 1e6),
                "dur": round(report.seconds * 1e6),
                "pid": 1,
                "tid": stage_track,
                "args": {
                    "units": report.units,
                    "cached": report.cached,
                    "built": report.built,
                    "peak_rss_mb": report.peak_rss >> 20,
                },
            }
        )
    tracks["stages"] = stage_track
    for worker, tid in tracks.items():
        events.append(
            {"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": worker}}
        )
    Path(path).write_text(
        json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}), encoding="utf-8"
    )


def summary_table(reports: list[StageReport]) -> str:
    """The end-of-run table as plain text (rich renders it on a terminal)."""
    header = ("stage", "units", "cached", "built", "seconds", "peak RSS MB")
    rows = [
        (
            r.name,
            str(r.units),
            str(r.cached),
            str(r.built),
            f"{r.seconds:.2f}",
            f"{r.peak_rss / 2**20:.0f}",
        )
        for r in reports
    ]
    widths = [
        max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
        for i, h in enumerate(header)
    ]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
        for row in rows
    ]
    return "\n".join(out)


def outcome_line(outcome: UnitOutcome) -> str:
    return f"{outcome.stage}: {outcome.unit}: {outcome.reason}"


def problem_lines(problems: list[Problem], first: int = 3) -> list[str]:
    """The end of a run's word on the problems found in the project: counts by kind, and the
    first few of each (the run record and the report list them all)."""
    if not problems:
        return []
    by_kind: dict[str, list[Problem]] = {}
    for problem in problems:
        by_kind.setdefault(problem.kind, []).append(problem)
    counts = ", ".join(f"{len(found)} {kind}" for kind, found in by_kind.items())
    lines = [f"problems in the project: {counts} (listed in the report and reports/run.json)"]
    for kind, found in by_kind.items():
        for problem in found[:first]:
            where = f"{problem.file}:{problem.line}" if problem.line else problem.file
            lines.append(f"  {kind}: {where + ': ' if where else ''}{problem.message}")
        if len(found) > first:
            lines.append(f"  {kind}: … and {len(found) - first} more")
    return lines
