"""The run record: what a `run` did, as data (`reports/run.json`), and the report renderers.

The summary table and `--profile` serve the person at the terminal; the run record serves whatever
looks later: the HTML report, a CI dashboard, `orchestrate report`. It is schema-versioned, its
fields come in a fixed order, and it is aggregated so that it stays small at 100,000 units: per
stage, per (stage, worker) slice, the reasons units ran counted per stage, and the first
`RAN_LIMIT` units that ran with their reasons; the problems the stages found in the project,
counted by kind, the first `PROBLEMS_PER_KIND` of each listed. It holds timings, so it lives
in `reports/`, outside the byte-identical outputs. Writing it moves the previous run's record to
`reports/run.previous.json`, for "what changed since the last build".

Renderers are registered under the entry-point group `orchestrate.reports` (registry.py): each is
`render(output_dir, record) -> list of files written`, reads what else it needs from the output
folder, and is called after every run (not a dry run) and by `orchestrate report`.
"""

from __future__ import annotations

import errno
import json
import time
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..cache import atomic_write
from ..cache.records import UnitRecord
from ..core.outcomes import StageReport
from ..errors import OrchestrateError
from ..typing import Problem, ReportFiles

SCHEMA = 1
RECORD = "reports/run.json"
PREVIOUS = "reports/run.previous.json"
OUT_OF_SPACE = (errno.ENOSPC, errno.EDQUOT)
#: Units listed one by one (with the reason each ran); beyond this they are only counted.
RAN_LIMIT = 1000
#: Problems of one kind listed one by one; beyond this they are only counted.
PROBLEMS_PER_KIND = 500


def iso_time(seconds: float) -> str:
    """A wall-clock time as ISO 8601 in UTC, to the microsecond (it also names the run)."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="microseconds")


def offset(moment: float, started: float) -> float:
    """Seconds since the run started, to the millisecond."""
    return round(max(moment - started, 0.0), 3)


def reason_kind(reason: str) -> str:
    """What a unit's reason says without its particulars: "input changed: a/b.xml" → "input
    changed", so 100,000 reasons count in a handful of groups."""
    return reason.split(":", 1)[0].strip() or reason


def stage_entries(reports: Iterable[StageReport], started: float) -> list[dict]:
    """One entry per stage the run took part in, in the order they ran."""
    entries = []
    for report in reports:
        entries.append(
            {
                "name": report.name,
                "units": report.units,
                "cached": report.cached,
                "built": report.built,
                # a stage whose record said nothing changed: no unit was even looked up
                "skipped": report.skipped,
                "why": report.why,  # why it was not skipped ("" when it was)
                "start": offset(report.start, started),
                "seconds": round(report.seconds, 3),
                "peak_rss_mb": report.peak_rss >> 20,
                "cpu_percent": round(report.cpu_percent, 1),
            }
        )
    return entries


def worker_slices(reports: Iterable[StageReport], started: float) -> list[dict]:
    """For each stage and worker, when the worker began and ended its units, how many it ran and
    for how long: a timeline that does not grow with the number of units."""
    slices: dict[tuple[str, str], dict] = {}
    for report in reports:
        for outcome in report.outcomes:
            key = (report.name, outcome.worker)
            entry = slices.get(key)
            end = outcome.start + outcome.seconds
            if entry is None:
                slices[key] = entry = {
                    "stage": report.name,
                    "worker": outcome.worker,
                    "units": 0,
                    "start": outcome.start,
                    "end": end,
                    "busy": 0.0,
                }
            entry["units"] += 1
            entry["start"] = min(entry["start"], outcome.start)
            entry["end"] = max(entry["end"], end)
            entry["busy"] += outcome.seconds
    for entry in slices.values():
        entry["start"] = offset(entry["start"], started)
        entry["end"] = offset(entry["end"], started)
        entry["busy"] = round(entry["busy"], 3)
    return list(slices.values())


def ran_units(reports: Iterable[StageReport], started: float, limit: int = RAN_LIMIT) -> dict:
    """The units that ran and why: counted by stage and kind of reason, and the first `limit`
    listed (in stage order, then by unit id) with their reason, worker and timing."""
    ran: list[UnitRecord] = []
    counts: Counter[tuple[str, str]] = Counter()
    examples: dict[tuple[str, str], str] = {}
    for report in reports:
        outcomes = sorted(report.outcomes, key=lambda o: o.id)
        for outcome in outcomes:
            key = (report.name, reason_kind(outcome.reason))
            counts[key] += 1
            examples.setdefault(key, outcome.reason)
        ran.extend(outcomes)
    return {
        "total": len(ran),
        "listed": min(len(ran), limit),
        "reasons": [
            {"stage": stage, "kind": kind, "count": count, "example": examples[(stage, kind)]}
            for (stage, kind), count in counts.items()
        ],
        "units": [
            {
                "stage": o.stage,
                "unit": o.id,
                "reason": o.reason,
                "worker": o.worker,
                "start": offset(o.start, started),
                "seconds": round(o.seconds, 4),
            }
            for o in ran[:limit]
        ],
    }


def problem_entries(problems: Iterable[Problem], per_kind: int = PROBLEMS_PER_KIND) -> list[dict]:
    """The first `per_kind` problems of each kind (in the order given), as the record lists them."""
    listed: Counter[str] = Counter()
    entries = []
    for problem in problems:
        listed[problem.kind] += 1
        if listed[problem.kind] <= per_kind:
            entries.append(
                {
                    "kind": problem.kind,
                    "file": problem.file,
                    "line": problem.line,
                    "message": problem.message,
                }
            )
    return entries


def make_record(
    build: Any,
    options: Any,
    *,
    started: float,
    seconds: float,
    exit_code: int,
    reasons: list[str],
    result: Any = None,
    previous: dict | None = None,
    problems: list[Problem] | None = None,
) -> dict:
    """The record of one run. `result` is the scheduler's RunResult, or None when the run
    stopped on an error before its stages could report (exit 2, 3 or 4); `problems` what the
    stages found in the project (their `problems` hooks), sorted."""
    problems = problems or []
    reports = list(result.reports) if result is not None else []
    last = previous.get("run") if previous else None
    return {
        "schema": SCHEMA,
        "run": last + 1 if isinstance(last, int) else 1,
        "id": iso_time(started),
        "started": iso_time(started),
        "seconds": round(seconds, 3),
        "exit_code": exit_code,
        "reasons": list(reasons),
        "complete": result is not None,
        "build_file": str(build.path),
        "project": str(build.project_root),
        "output": str(build.output_dir),
        "options": {
            "executor": options.executor,
            "workers": options.workers,
            "stages": list(options.stages) if options.stages else None,
            "explain": options.explain,
            "no_cache": options.no_cache,
            "keep_going": options.keep_going,
        },
        "ray_startup": (
            round(result.ray_startup, 3)
            if result is not None and result.ray_startup is not None
            else None
        ),
        "peak_rss_mb": {
            "driver": (result.driver_peak_rss >> 20) if result is not None else None,
            "workers": (result.workers_peak_rss >> 20) if result is not None else None,
        },
        "stages": stage_entries(reports, started),
        "workers": worker_slices(reports, started),
        "ran": ran_units(reports, started),
        "problem_counts": dict(sorted(Counter(p.kind for p in problems).items())),
        "problems": problem_entries(problems),
    }


def read_record(path: Path) -> dict | None:
    """A record from its file; None when absent, unreadable or of another schema."""
    try:
        return _as_record(path.read_bytes())
    except OSError:
        return None


def previous_record(output_dir: Path) -> dict | None:
    """The record the last run left in the output folder (the one this run replaces)."""
    from ..files.outputs import OutputFolder

    try:
        return _as_record(OutputFolder(output_dir).read(RECORD))  # no link followed
    except (OSError, OrchestrateError):
        return None


def _as_record(data: bytes | None) -> dict | None:
    try:
        record = json.loads(data) if data is not None else None
    except ValueError:
        return None
    return record if isinstance(record, dict) and record.get("schema") == SCHEMA else None


def write_record(output_dir: Path, record: dict) -> Path:
    """Keep the last run's record as `run.previous.json`, then write this one (atomically)."""
    from ..files.outputs import OutputFolder

    folder = OutputFolder(output_dir)
    if folder.lstat(RECORD) is not None:
        _listed(output_dir, [folder.path(PREVIOUS)])
        folder.replace(RECORD, PREVIOUS)
    _listed(output_dir, [folder.path(RECORD)])
    data = json.dumps(record, indent=1, ensure_ascii=False) + "\n"
    atomic_write(folder, RECORD, data.encode("utf-8"))
    return folder.path(RECORD)


def render_reports(output_dir: Path, record: dict | None, log: Any = None) -> ReportFiles:
    """Call every registered renderer; a renderer that fails is logged and does not change the
    build's exit code (the outputs are published; only a view of them is missing), unless the
    disk or the quota is full: that fails the build as it would anywhere else (exit 4). Returns
    the pages and the kept files of all of them."""
    from ..core.registry import registered_reports
    from ..memory import relaxed_gc

    pages: list[Path] = []
    kept: list[Path] = []
    for name, entry in sorted(registered_reports().items()):
        began = time.perf_counter()
        try:
            with relaxed_gc():
                files = entry.load()(Path(output_dir), record)
        except OrchestrateError as exc:
            if log is None:
                raise
            log.warning("report.failed", report=name, error=exc.describe())
            continue
        except Exception as exc:  # a bug in a renderer must not hide a finished build
            if log is None or getattr(exc, "errno", None) in OUT_OF_SPACE:
                raise  # a full disk or quota fails the build (exit 4), as for any other file
            log.error("report.failed", report=name, error=f"{type(exc).__name__}: {exc}")
            continue
        if not isinstance(files, ReportFiles):
            files = ReportFiles(pages=tuple(files or ()))
        pages.extend(Path(f) for f in files.pages)
        kept.extend(Path(f) for f in files.kept)
        _listed(output_dir, [Path(f) for f in (*files.pages, *files.kept)])
        if log is not None:
            log.debug("report.done", report=name, seconds=round(time.perf_counter() - began, 3))
    return ReportFiles(tuple(pages), tuple(kept))


def _listed(output_dir: Path, paths: list[Path]) -> None:
    """Note report files in the output folder's ledger, so `clean` removes them too."""
    from ..files.outputs import Ledger, OutputFolder

    folder = OutputFolder(output_dir)
    ledger = Ledger(folder)
    for path in paths:
        relpath = folder.relative(path)
        if relpath is not None:
            ledger.record(relpath)
