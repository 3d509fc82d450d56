"""`orchestrate validate`: check the project against the rule library, as a report."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from orchestrator import RunOptions, SwitchedCommand, build_file_argument, run_stages

# `collect` as `validate` runs it after a project file did not parse: going on without it.
GO_ON_WITHOUT_BROKEN_FILES = {"collect": {"skip_broken": True}}


@click.command(cls=SwitchedCommand)
@build_file_argument()
@click.option("--format", "fmt", type=click.Choice(["text", "json", "junit"]), default="text")
@click.option(
    "--output",
    "output",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the report here instead of standard output.",
)
@click.option("--executor", type=click.Choice(["auto", "local", "ray"]), default=None)
def validate(build_file, fmt, output, executor) -> None:
    """Check the project against the rule library; exit 1 if failures reach rules.fail_on."""
    from stages import validate as stage
    from stages.rules.report import render

    build, result = run_validation(build_file, executor)
    data = render(result.outputs["validation"], fmt)
    if output:
        from orchestrator import ConfinedFolder, atomic_write

        target = Path(output).resolve()  # the user's path: its folder as they named it
        atomic_write(ConfinedFolder(target.parent, "folder"), target.name, data)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    sys.exit(1 if stage.verdict(build, result.outputs) else 0)


def run_validation(build_file: str, executor: str | None):
    """Collect and validate. For `validate` a project file that does not parse is a finding,
    not bad input (spec/pipeline.md, exit codes): when collect stops on one, collect runs again
    going on without it, as `collect.skip_broken` does, so its items are absent from the index,
    every rule that selects it fails on it with its line (spec/rules.md, parse failures), and
    every other file is checked. The first attempt runs the build file as written, so a clean
    project shares every cached unit with `orchestrate run`."""
    from stages.sources import BrokenProjectFile

    options = RunOptions(executor=executor, stages=["validate"])
    try:
        return run_stages(build_file, options)
    except BrokenProjectFile:
        return run_stages(build_file, options, overrides=GO_ON_WITHOUT_BROKEN_FILES)
