"""What every command that builds does around the build: load the build file (with the
switches in force), hold the output folder, judge the run, write its record and reports, and
remove what earlier builds published and it no longer does.

Whether a build passed is the stages' to say: each may declare `verdict(build, outputs)` (the
reasons it fails the build), `summary(build, outputs)` (lines for the end of the run) and
`problems(build, outputs)` (the problems it found in the project: listed in the record and
counted at the end of every run). Every build but a dry run ends by writing its record and the
registered reports (runrecord.py), whether it passed, failed a gate or stopped on an error.
`orchestrate run` (runs.py) and `orchestrate watch` (watch.py) both end a build here.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import click

from ..core.config import Build, load_build
from ..core.graph import Stage
from ..core.options import RunOptions
from ..errors import OrchestrateError
from ..typing import Problem, ReportFiles


@dataclass
class Verdict:
    exit_code: int = 0
    reasons: list[str] = field(default_factory=list)


def load(build_file: str, executor: str | None = None, overrides: dict | None = None) -> Build:
    """The build file, with the switches in force (orchestrator/switches.py), a command's own
    `overrides` (section → keys) and `--executor` (when given) in place of `executor.kind`."""
    from .switches import active_overrides

    switched = active_overrides()
    merged = {section: dict(keys) for section, keys in switched.values.items()}
    for section, keys in (overrides or {}).items():
        merged.setdefault(section, {}).update(keys)
    if executor:
        merged.setdefault("executor", {})["kind"] = executor
    return load_build(build_file, merged or None, set_by=switched.set_by)


def log_switches(build: Build, log: Any) -> None:
    """Say which build-file keys a switch set for this run (the report shows only the value)."""
    for key, by in sorted(build.set_by.items()):
        log.info("build.switch", key=key, set_by=by)


def hook_results(hook: str, build: Build, stages: list[Stage], outputs: Any) -> list:
    """What the stages that ran return from a hook (`verdict`, `summary`, `problems`), in
    graph order; a stage without the hook has nothing to say."""
    found: list = []
    for stage in stages:
        function = getattr(stage.module, hook, None)
        if function is not None:
            found.extend(function(build, outputs))
    return found


def judge(build: Build, stages: list[Stage], outputs: Any) -> Verdict:
    """Exit 1 when any stage that ran says the build failed (its `verdict` hook)."""
    reasons = hook_results("verdict", build, stages, outputs)
    return Verdict(1 if reasons else 0, reasons)


def summary_lines(build: Build, stages: list[Stage], outputs: Any) -> list[str]:
    """What the stages that ran have to tell (their `summary` hooks)."""
    return hook_results("summary", build, stages, outputs)


class Conclusion(NamedTuple):
    verdict: Verdict
    summary: list[str]
    problems: list[Problem]  # sorted by kind, file, line


def conclude(build: Build, result: Any) -> Conclusion:
    """The verdict, the summary and the problems of a run: what its stages make of the values
    it left (read while the run still holds the cache, so a damaged stored value makes it
    start again)."""
    problems: list[Problem] = hook_results("problems", build, result.stages, result.outputs)
    return Conclusion(
        judge(build, result.stages, result.outputs),
        summary_lines(build, result.stages, result.outputs),
        sorted(problems, key=lambda p: (p.kind, p.file, p.line or 0, p.message)),
    )


def output_lock(
    build: Build,
    holder: str,
    stop_hint: str | None = None,
    wait: float = 0.0,
    wait_option: str | None = None,
):
    """The output folder's lock for a command that publishes into it: refused at once while
    another command holds it, unless `wait` (then waiting, saying once for whom);
    `wait_option`, the command's option that waits, is named when it refuses."""
    from ..files.lock import OutputLock

    def waiting(other: str) -> None:
        click.echo(f"waiting for the output folder: it is in use by {other}", err=True)

    return OutputLock(
        build.output_dir,
        keep=(build.cache_dir,),
        holder=holder,
        stop_hint=stop_hint or "wait for it to finish",
        wait=wait,
        waiting=waiting,
        wait_option=wait_option,
    )


class Recorded(NamedTuple):
    """A build as `build_and_record` left it: the run, what its stages made of it, the record
    and reports written, and the stale outputs removed."""

    result: Any  # core.scheduler.RunResult
    conclusion: Conclusion
    reports: ReportFiles
    pruned: list[str]


def build_and_record(
    build: Build,
    options: RunOptions,
    log: Any,
    started: float,
    run: Callable[[Callable[[Any], Conclusion]], Any],
) -> Recorded:
    """Run a build (`run(judge)`: `judge` concludes it while the run holds the cache), write
    its record and reports, and remove what earlier builds published and a whole build no
    longer does; an error stops it after the record says so (and the page shows what is
    there), and is raised."""
    try:
        result = run(lambda made: conclude(build, made))
    except OrchestrateError as error:
        with contextlib.suppress(OSError):  # never hide the error that stopped the run
            record_run(build, options, started, error.exit_code, [error.describe()], None, log)
        raise
    verdict, _, problems = result.concluded
    written = record_run(
        build, options, started, verdict.exit_code, verdict.reasons, result, log, problems
    )
    pruned: list[str] = []
    if not options.stages:  # the whole build ran: what earlier builds published and it did not
        pruned = prune_stale(build, result.context.published, written, log)
    return Recorded(result, result.concluded, written, pruned)


def record_run(
    build: Build,
    options: RunOptions,
    started: float,
    exit_code: int,
    reasons: list[str],
    result: Any,
    log: Any,
    problems: list[Problem] | None = None,
) -> ReportFiles:
    """Write the run record (reports/run.json) and call the registered report renderers; the
    files they wrote. `result` is None when the run stopped on an error (and `problems` then
    unknown)."""
    from .runrecord import make_record, previous_record, render_reports, write_record

    record = make_record(
        build,
        options,
        started=started,
        seconds=time.time() - started,
        exit_code=exit_code,
        reasons=reasons,
        result=result,
        previous=previous_record(build.output_dir),
        problems=problems or [],
    )
    write_record(build.output_dir, record)
    return render_reports(build.output_dir, record, log)


def prune_stale(build: Build, published: set[str], reports: ReportFiles, log: Any) -> list[str]:
    """Remove from the output folder what earlier builds published and this complete run did
    not (its stages' files, found right or written; its record and reports), from the ledger:
    a bundle a lost or truncated manifest no longer names is found there too."""
    from ..files.outputs import OutputFolder, prune_output
    from .runrecord import PREVIOUS, RECORD

    folder = OutputFolder(build.output_dir)
    kept = set(published) | {RECORD, PREVIOUS}
    written = (*reports.pages, *reports.kept)
    kept.update(relpath for path in written if (relpath := folder.relative(path)) is not None)
    removed = prune_output(folder, kept)
    if removed:
        log.info("outputs.pruned", removed=len(removed), files=removed[:20])
    return removed
