"""`orchestrate validate`: check the project against the rule library, as a report."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from orchestrator.runs import run_stages
from orchestrator.switches import SwitchedCommand


@click.command(cls=SwitchedCommand)
@click.argument("build_file", type=click.Path(dir_okay=False))
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

    build, result = run_stages(build_file, ["validate"], executor)
    data = render(result.outputs["validation"], fmt)
    if output:
        from orchestrator.cache import atomic_write

        atomic_write(Path(output).resolve(), data)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    sys.exit(1 if stage.verdict(build, result.outputs) else 0)
