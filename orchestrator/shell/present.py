"""What a user reads of a run besides its progress: the log, the summary table, the problems
found in the project, the profile. The engine calls none of it (core/observe.py holds what it
uses while it runs)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import click
import structlog

from ..core.observe import interactive
from ..core.outcomes import StageReport
from ..typing import Problem

if TYPE_CHECKING:  # rich is imported when a table is drawn on a terminal
    from rich.table import Table


def setup_logging(log_format: str = "console", verbose: bool = False) -> structlog.BoundLogger:
    """structlog to stderr: a console renderer for people, JSON lines for machines."""
    level = logging.DEBUG if verbose else logging.INFO
    renderer = (
        structlog.processors.JSONRenderer(sort_keys=True)
        if log_format == "json"
        else structlog.dev.ConsoleRenderer(colors=interactive())
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


class SummaryRow(NamedTuple):
    """One line of the end-of-run table: a stage's figures as they are shown."""

    stage: str
    units: str
    cached: str
    built: str
    seconds: str
    peak_rss_mb: str

    @classmethod
    def of(cls, report: StageReport) -> SummaryRow:
        return cls(
            report.name,
            str(report.units),
            str(report.cached),
            str(report.built),
            f"{report.seconds:.2f}",
            f"{report.peak_rss / 2**20:.0f}",
        )


SUMMARY_HEADER = SummaryRow("stage", "units", "cached", "built", "seconds", "peak RSS MB")


def summary_rows(reports: list[StageReport]) -> list[SummaryRow]:
    """The table's rows, one per stage that took part in the run, in graph order."""
    return [SummaryRow.of(report) for report in reports]


def summary_text(rows: list[SummaryRow]) -> str:
    """The table as plain text: the titles and the stage names to the left, the figures to the
    right, each column as wide as its widest cell."""
    widths = [max(len(cell) for cell in column) for column in zip(SUMMARY_HEADER, *rows)]
    lines = [
        "  ".join(title.ljust(width) for title, width in zip(SUMMARY_HEADER, widths)),
        "  ".join("-" * width for width in widths),
    ]
    for stage, *figures in rows:
        cells = [stage.ljust(widths[0]), *map(str.rjust, figures, widths[1:])]
        lines.append("  ".join(cells))
    return "\n".join(lines)


def summary_grid(rows: list[SummaryRow]) -> Table:
    """The table as rich draws it on a terminal, from the same rows."""
    from rich.table import Table

    grid = Table(*SUMMARY_HEADER)
    for row in rows:
        grid.add_row(*row)
    return grid


def print_summary(rows: list[SummaryRow], rich_output: bool) -> None:
    """The summary table: drawn by rich on a terminal, as plain text elsewhere."""
    if rich_output:
        from rich.console import Console

        Console(stderr=False).print(summary_grid(rows))
    else:
        click.echo(summary_text(rows))


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


def write_profile(path: str | Path, reports: list[StageReport], t0: float) -> None:
    """Chrome trace-event JSON: one slice per unit, one track per worker, one per stage."""
    events = []
    tracks: dict[str, int] = {}
    for report in reports:
        for outcome in report.outcomes:
            tid = tracks.setdefault(outcome.worker, len(tracks) + 1)
            events.append(
                {
                    "name": outcome.id,
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
