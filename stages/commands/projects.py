"""`orchestrate generate` and `orchestrate demo`: Messiah-style projects with planted defects."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from orchestrator.switches import SwitchedCommand


@click.command()
@click.argument("dest", type=click.Path(file_okay=False))
@click.option(
    "--assets",
    default=1000,
    type=click.IntRange(min=100),
    help="Number of resources (at least 100).",
)
@click.option("--seed", default=1, type=int, help="Random seed (same seed, same bytes).")
def generate(dest, assets, seed) -> None:
    """Write a Messiah-style project with a build file and a rule library."""
    from stages.sources.messiah.generator import generate_project

    started = time.perf_counter()
    project = generate_project(dest, assets, seed)
    click.echo(
        f"generated {assets} resources in {time.perf_counter() - started:.1f} s; "
        f"build with: orchestrate run {project.build_file}"
    )


@click.command(cls=SwitchedCommand)
@click.argument("dest", type=click.Path(file_okay=False), required=False)
@click.option("--assets", default=300, type=click.IntRange(min=100))
@click.option("--executor", type=click.Choice(["auto", "local", "ray"]), default=None)
def demo(dest, assets, executor) -> None:
    """Generate a small project and build it end to end (rule failures shown, exit 0)."""
    from orchestrator.runs import run_command
    from stages.sources.messiah.generator import generate_project

    dest = Path(dest or "orchestrate-demo")
    project = generate_project(dest, assets, 7)
    build_file = Path(project.build_file)
    text = build_file.read_text(encoding="utf-8")
    demo_file = build_file.with_name("demo.yaml")
    demo_file.write_text(text.replace("fail_on: error", "fail_on: never"), encoding="utf-8")
    click.echo(f"generated {assets} resources under {dest}; building {demo_file}")
    sys.exit(run_command(str(demo_file), executor=executor))
