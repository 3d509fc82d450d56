"""Running a build as a command does: load, lock the output, run, judge, tell the user.

`run_command` is `orchestrate run`; `run_stages` runs some stages quietly for commands that
query a build (`cooklist`, `why`, `validate`). Whether a build passed is the stages' to say:
each may declare `verdict(build, outputs)` (the reasons it fails the build),
`summary(build, outputs)` (lines for the end of the run) and `problems(build, outputs)` (the
problems it found in the project: listed in the record and counted at the end of every run).
Every run but a dry run ends by writing its record and the registered reports (runrecord.py),
whether it passed, failed a gate or stopped on an error.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field, replace
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


def run_command(build_file: str, options: RunOptions) -> int:
    """Run a build, record it, render its reports and print its summary; returns the exit code
    (0 or 1; errors are raised, after the record of the run is written)."""
    from ..core.observe import interactive
    from ..core.scheduler import run_build
    from ..files.lock import OutputLock
    from .present import print_summary, problem_lines, setup_logging, summary_rows, write_profile

    log = setup_logging(options.log_format, options.verbose)
    build = load(build_file, options.executor)
    log_switches(build, log)
    options = replace(
        options,
        executor=build.config.executor.kind,  # type: ignore[attr-defined]
        progress=options.progress and not options.quiet and options.log_format == "console",
    )
    dry_run = options.dry_run
    t0 = time.time()
    with OutputLock(build.output_dir, keep=(build.cache_dir,)):
        try:
            result = run_build(
                build, options, log, conclude=None if dry_run else lambda run: conclude(build, run)
            )
        except OrchestrateError as error:
            if not dry_run:  # the record says how it ended, and the page shows what is there
                with contextlib.suppress(OSError):  # never hide the error that stopped the run
                    record_run(build, options, t0, error.exit_code, [error.describe()], None, log)
            raise
        if options.profile:
            write_profile(options.profile, result.reports, t0)
        if dry_run:
            for outcome in result.explained:
                click.echo(f"would run {outcome.stage}: {outcome.id} ({outcome.reason})")
            if not result.explained:
                click.echo("nothing to do")
            return 0
        verdict, lines, problems = result.concluded
        written = record_run(
            build, options, t0, verdict.exit_code, verdict.reasons, result, log, problems
        )
        if not options.stages:  # the whole build ran: what earlier builds published and it did not
            prune_stale(build, result.context.published, written, log)
    if not options.quiet:
        print_summary(summary_rows(result.reports), interactive())
        reports = build.output_dir / "reports"
        lines = [*lines, *problem_lines(problems)]
        for line in [*lines, f"reports: {reports}"] if reports.exists() else lines:
            click.echo(line)
        for path in written.pages:  # the caches beside them are the renderers' business
            click.echo(f"report: {path}")
        if result.ray_startup is not None:
            click.echo(f"ray startup: {result.ray_startup:.2f} s (not counted above)")
    log.info(
        "build.done",
        exit_code=verdict.exit_code,
        reasons=verdict.reasons,
        seconds=round(time.time() - t0, 3),
    )
    for reason in verdict.reasons:  # exit 1: the outputs are there, the gates said no
        click.echo(f"built and published, but failed a gate: {reason}", err=True)
    return verdict.exit_code


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


def prune_stale(build: Build, published: set[str], reports: ReportFiles, log: Any) -> None:
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


def run_stages(
    build_file: str, options: RunOptions, overrides: dict | None = None
) -> tuple[Build, Any]:
    """Run the stages `options.stages` names (and what they need) without the summary or the
    progress bars: (build, run).

    `overrides` (section → keys) are merged over the build file, as the command's own settings.
    """
    from ..core.scheduler import run_build
    from ..files.lock import OutputLock
    from .present import setup_logging

    log = setup_logging(options.log_format, options.verbose)
    build = load(build_file, options.executor, overrides)
    log_switches(build, log)
    options = replace(
        options,
        executor=build.config.executor.kind,  # type: ignore[attr-defined]
        progress=False,
    )
    with OutputLock(build.output_dir, keep=(build.cache_dir,)):
        return build, run_build(build, options, log)
