"""`orchestrate generate` and `orchestrate demo`: generated projects (Messiah-style with planted
defects, or Cocos Creator) to build.

Both write a build file and a rule library into their folder; a person may have edited them
since, so an existing one is replaced only with `--force`."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from pathlib import Path

import click

from orchestrator import ConfigError, SwitchedCommand

#: The files `generate` writes that a person edits; `demo` writes DEMO_BUILD_FILE too.
WRITTEN_FILES = ("build.yaml", "rules.yaml")
DEMO_BUILD_FILE = "demo.yaml"
FORCE_HELP = "Replace the build file and rule library a project there already has."


def refuse_to_overwrite(dest: Path, names: Iterable[str], command: str, force: bool) -> None:
    """Exit 2 naming the first of `names` that exists in `dest`, unless `force`."""
    if force:
        return
    for name in names:
        path = dest / name
        if path.exists():
            raise ConfigError(
                f"exists; `orchestrate {command}` would overwrite it: pass --force to replace "
                "it, or choose another folder",
                file=str(path),
            )


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
@click.option("--force", is_flag=True, help=FORCE_HELP)
def generate(dest, assets, seed, engine, force) -> None:
    """Write a project (Messiah-style or Cocos Creator) with a build file and a rule library."""
    refuse_to_overwrite(Path(dest), WRITTEN_FILES, "generate", force)
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
@click.option("--force", is_flag=True, help=FORCE_HELP)
def demo(dest, assets, executor, force) -> None:
    """Generate a small project and build it end to end (rule failures shown, exit 0)."""
    from orchestrator import RunOptions, run_command
    from stages.sources.messiah.generator import generate_project

    dest = Path(dest or "orchestrate-demo")
    refuse_to_overwrite(dest, (*WRITTEN_FILES, DEMO_BUILD_FILE), "demo", force)
    project = generate_project(dest, assets, 7)
    build_file = Path(project.build_file)
    text = build_file.read_text(encoding="utf-8")
    demo_file = build_file.with_name(DEMO_BUILD_FILE)
    demo_file.write_text(text.replace("fail_on: error", "fail_on: never"), encoding="utf-8")
    click.echo(f"generated {assets} resources under {dest}; building {demo_file}")
    sys.exit(run_command(str(demo_file), RunOptions(executor=executor)))
