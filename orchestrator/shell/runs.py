"""Running a build as a command does: load, lock the output, run, judge, tell the user.

`run_command` is `orchestrate run`; `run_stages` runs some stages quietly for commands that
query a build (`cooklist`, `why`, `validate`). What every build command does around the build
(the stages' verdicts, the record and reports, the outputs no longer published) is builds.py's.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import click

from ..core.config import Build
from ..core.options import RunOptions
from .builds import build_and_record, conclude, judge, load, log_switches, output_lock

__all__ = ["conclude", "judge", "load", "run_command", "run_stages"]


def run_command(build_file: str, options: RunOptions, wait: float = 0.0) -> int:
    """Run a build, record it, render its reports and print its summary; returns the exit code
    (0 or 1; errors are raised, after the record of the run is written). `wait`: seconds to
    wait for the output folder while another command (`orchestrate watch`) holds it."""
    from ..core.observe import interactive
    from ..core.scheduler import run_build
    from .present import print_summary, problem_lines, setup_logging, summary_rows, write_profile

    log = setup_logging(options.log_format, options.verbose)
    build = load(build_file, options.executor)
    log_switches(build, log)
    options = replace(
        options,
        executor=build.config.executor.kind,  # type: ignore[attr-defined]
        progress=options.progress and not options.quiet and options.log_format == "console",
    )
    t0 = time.time()
    with output_lock(build, "orchestrate run", wait=wait, wait_option="--wait"):
        if options.dry_run:
            result = run_build(build, options, log)
            if options.profile:
                write_profile(options.profile, result.reports, t0)
            for outcome in result.explained:
                click.echo(f"would run {outcome.stage}: {outcome.id} ({outcome.reason})")
            if not result.explained:
                click.echo("nothing to do")
            return 0
        recorded = build_and_record(
            build, options, log, t0, lambda judge: run_build(build, options, log, conclude=judge)
        )
        result, (verdict, lines, problems) = recorded.result, recorded.conclusion
        if options.profile:
            write_profile(options.profile, result.reports, t0)
    if not options.quiet:
        print_summary(summary_rows(result.reports), interactive())
        reports = build.output_dir / "reports"
        lines = [*lines, *problem_lines(problems)]
        for line in [*lines, f"reports: {reports}"] if reports.exists() else lines:
            click.echo(line)
        for path in recorded.reports.pages:  # the caches beside them are the renderers' business
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


def run_stages(
    build_file: str, options: RunOptions, overrides: dict | None = None
) -> tuple[Build, Any]:
    """Run the stages `options.stages` names (and what they need) without the summary or the
    progress bars: (build, run).

    `overrides` (section → keys) are merged over the build file, as the command's own settings.
    """
    from ..core.scheduler import run_build
    from .present import setup_logging

    log = setup_logging(options.log_format, options.verbose)
    build = load(build_file, options.executor, overrides)
    log_switches(build, log)
    options = replace(
        options,
        executor=build.config.executor.kind,  # type: ignore[attr-defined]
        progress=False,
    )
    with output_lock(build, "orchestrate"):
        return build, run_build(build, options, log)
