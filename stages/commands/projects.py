"""`orchestrate generate` and `orchestrate demo`: generated projects (Messiah-style with planted
defects, or Cocos Creator) to build."""

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
@click.option(
    "--engine",
    type=click.Choice(["messiah", "cocos"]),
    default="messiah",
    help="The kind of project: Messiah-style (default) or Cocos Creator 3.x.",
)
def generate(dest, assets, seed, engine) -> None:
    """Write a project (Messiah-style or Cocos Creator) with a build file and a rule library."""
    started = time.perf_counter()
    if engine == "cocos":
        from stages.sources.cocos.generator import generate_cocos_project

        build_file = generate_cocos_project(dest, assets, seed).build_file
    else:
        from stages.sources.messiah.generator import generate_project

        build_file = generate_project(dest, assets, seed).build_file
    click.echo(
        f"generated {assets} resources in {time.perf_counter() - started:.1f} s; "
        f"build with: orchestrate run {build_file}"
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
