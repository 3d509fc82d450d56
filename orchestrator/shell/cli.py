"""The `orchestrate` command: parse, call, map errors to exit codes. Thin by design.

click gives subcommands, typed options and help text for free; rich renders tables on terminals.
Ray is never imported here: only an executor that has work to do imports it.
"""

from __future__ import annotations

import atexit
import errno
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn

import click

from ..errors import ConfigError, OrchestrateError
from ..version import __version__
from .arguments import build_file_argument
from .runs import load
from .switches import SwitchedCommand

ISSUES_URL = "the orchestrate issue tracker"
OUT_OF_SPACE = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exceeded"}


def _fail(error: OrchestrateError) -> NoReturn:
    click.echo(f"error: {error.describe()}", err=True)
    sys.exit(error.exit_code)


def main(argv: list[str] | None = None) -> None:
    """Entry point: runs the click group and turns errors into exit codes without tracebacks."""
    try:
        cli.main(args=argv, prog_name="orchestrate", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except OrchestrateError as exc:
        _fail(exc)
    except KeyboardInterrupt:
        click.echo(
            "interrupted; the cache is consistent and the next run resumes from it", err=True
        )
        sys.exit(130)
    except OSError as exc:
        full = OUT_OF_SPACE.get(exc.errno or 0)
        if full is not None:  # outside the project's content: exit 4, as for a failed tool
            click.echo(f"error: {full}: {exc.filename or ''} {exc.strerror}", err=True)
            sys.exit(4)
        _internal(exc)
    except Exception as exc:  # a bug: show where, so it can be reported
        _internal(exc)
    sys.exit(0)


def entry() -> NoReturn:
    """The console script: `main`, then an exit that skips tearing the heap down.

    After a build the driver holds millions of objects (the index, plans, values); freeing them
    one by one at interpreter shutdown took 1.4 s of a 10 s incremental build at 100,000 assets,
    after everything was written. Exit handlers still run (Ray and custom-code workers are
    shut down), and the standard streams are flushed first.
    """
    code: int
    try:
        main()
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    leave(code)


def leave(code: int) -> NoReturn:
    """End the process now: exit handlers run and the streams are flushed, the heap is not
    torn down object by object (see `entry`)."""
    try:
        atexit._run_exitfuncs()  # CPython's own: what a normal exit runs first
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _internal(exc: BaseException) -> NoReturn:
    traceback.print_exc()
    click.echo(
        f"internal error (a bug in orchestrate {__version__}): {exc}\n"
        f"please report it, with the trace above, at {ISSUES_URL}",
        err=True,
    )
    sys.exit(3)


class PluginGroup(click.Group):
    """The engine's commands, and those registered packages add (`orchestrate.commands`), each
    imported only when it is invoked or help lists it."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from ..core.registry import registered_commands

        return sorted(set(super().list_commands(ctx)) | set(registered_commands()))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = super().get_command(ctx, name)
        if command is None:
            from ..core.registry import registered_commands

            entry = registered_commands().get(name)
            command = entry.load() if entry is not None else None
        return command


@click.group(cls=PluginGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="orchestrate")
def cli() -> None:
    """Parallel, cached build pipeline for game content: collect, validate, cook, pack, write."""


# -- run -------------------------------------------------------------------------------------
def unit_options(command: Callable) -> Callable:
    """Where units run and which: the options `run` and `watch` share."""
    options = [
        click.option(
            "--executor",
            type=click.Choice(["auto", "local", "ray"]),
            default=None,
            help="Where units run (default: the build file's executor.kind, else auto).",
        ),
        click.option(
            "--workers",
            type=click.IntRange(min=1),
            default=None,
            help="Ray worker processes for a local Ray.",
        ),
        click.option(
            "--stages", default=None, help="Comma-separated stages to run (and what they need)."
        ),
        click.option("--explain", is_flag=True, help="Say why each unit ran."),
    ]
    for option in reversed(options):  # the first named is the first shown
        command = option(command)
    return command


@cli.command(cls=SwitchedCommand)
@build_file_argument()
@unit_options
@click.option(
    "--profile",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write a Chrome trace-event JSON of the run (open in Perfetto).",
)
@click.option("--log-format", type=click.Choice(["console", "json"]), default="console")
@click.option("--no-cache", is_flag=True, help="Run every unit (results are still stored).")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Name the units a run would run, and why; writes nothing (units whose results later "
    "stages are planned from run in scratch).",
)
@click.option("--keep-going", is_flag=True, help="Other units go on after a unit fails.")
@click.option(
    "--wait",
    type=float,
    is_flag=False,
    flag_value=float("inf"),
    default=0.0,
    metavar="[SECONDS]",
    help="While another command (`orchestrate watch`) holds the output folder, wait for it "
    "(as long as it takes, or SECONDS) instead of refusing at once.",
)
@click.option("-v", "--verbose", is_flag=True)
def run(
    build_file,
    executor,
    workers,
    stages,
    explain,
    profile,
    log_format,
    no_cache,
    dry_run,
    keep_going,
    wait,
    verbose,
) -> None:
    """Build everything the build file describes."""
    from ..core.options import RunOptions
    from .runs import run_command

    options = RunOptions(
        executor=executor,
        workers=workers,
        stages=stages.split(",") if stages else None,
        explain=explain,
        no_cache=no_cache,
        dry_run=dry_run,
        keep_going=keep_going,
        profile=profile,
        log_format=log_format,
        verbose=verbose,
    )
    sys.exit(run_command(build_file, options, wait=wait))


@cli.command(cls=SwitchedCommand)
@build_file_argument()
@unit_options
@click.option("--log-format", type=click.Choice(["console", "json"]), default="console")
@click.option("--keep-going", is_flag=True, help="Other units go on after a unit fails.")
@click.option("-v", "--verbose", is_flag=True)
def watch(build_file, executor, workers, stages, explain, log_format, keep_going, verbose) -> None:
    """Build, then build again on every save until Ctrl-C (a line per build)."""
    from ..core.options import RunOptions
    from .watch import watch_command

    options = RunOptions(
        executor=executor,
        workers=workers,
        stages=stages.split(",") if stages else None,
        explain=explain,
        keep_going=keep_going,
        progress=False,
        log_format=log_format,
        verbose=verbose,
    )
    sys.exit(watch_command(build_file, options))


# -- cache -----------------------------------------------------------------------------------
@cli.group()
def cache() -> None:
    """Inspect and bound the cache."""


@cache.command("stats")
@build_file_argument()
def cache_stats(build_file) -> None:
    """Entries and bytes per area of the cache."""
    from ..cache import Cache

    build = load(build_file)
    stats = Cache(build.cache_dir).stats()
    click.echo(f"cache: {build.cache_dir}")
    for area, figures in stats.items():
        click.echo(f"  {area:<5} {figures['files']:>9} files  {figures['bytes'] / 2**20:>10.1f} MB")


@cache.command("gc")
@build_file_argument()
@click.option("--max-size", default="10G", help="Bound the cache to this size (e.g. 500M, 10G).")
@click.option("--max-age", default=30.0, type=float, help="Drop entries unused for this many days.")
@click.option("--wait", default=0.0, type=float, help="Wait this many seconds for running builds.")
def cache_gc(build_file, max_size, max_age, wait) -> None:
    """Drop old entries, then least recently used ones until the cache fits."""
    from ..cache import Cache
    from ..files.lock import CacheLock

    build = load(build_file)
    limit = _parse_size(max_size)
    with CacheLock(build.cache_dir, exclusive=True, wait=wait):
        outcome = Cache(build.cache_dir).gc(limit, max_age)
    click.echo(
        f"removed {outcome['removed']} files ({outcome['freed_bytes'] / 2**20:.1f} MB); "
        f"{outcome['remaining_bytes'] / 2**20:.1f} MB remain"
    )


def _parse_size(text: str) -> int:
    units = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    text = text.strip().upper().rstrip("B")
    try:
        if text and text[-1] in units:
            return int(float(text[:-1]) * units[text[-1]])
        return int(text)
    except ValueError:
        raise ConfigError(
            f"not a size: {text!r} (expected e.g. 500M or 10G)", key="--max-size"
        ) from None


@cache.command("clear")
@build_file_argument()
@click.option("--wait", default=0.0, type=float, help="Wait this many seconds for running builds.")
def cache_clear(build_file, wait) -> None:
    """Delete the whole cache folder."""
    from ..cache import Cache
    from ..files.lock import CacheLock

    build = load(build_file)
    with CacheLock(build.cache_dir, exclusive=True, wait=wait):
        Cache(build.cache_dir).clear()
    click.echo(f"cleared {build.cache_dir}")


@cli.command()
@build_file_argument()
def clean(build_file) -> None:
    """Delete what builds published into the output folder (the cache is kept)."""
    from ..files.lock import OutputLock
    from ..files.outputs import LEDGER, clean_output

    build = load(build_file)
    if not build.output_dir.exists():
        click.echo(f"nothing to remove: {build.output_dir} does not exist")
        return
    with OutputLock(build.output_dir):
        cleaned = clean_output(build.output_dir)
    if not cleaned.ledger_found:
        click.echo(
            f"nothing removed: {build.output_dir} has no list of published files ({LEDGER}); "
            "delete the folder by hand if it holds only build outputs"
        )
        return
    click.echo(f"removed {len(cleaned.removed)} published files from {build.output_dir}")
    if cleaned.kept:
        plural = "" if cleaned.kept == 1 else "s"
        click.echo(f"kept {cleaned.kept} file{plural} builds did not publish there")


# -- the registered stages ---------------------------------------------------------------------
@cli.command("stages")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def list_stages(fmt) -> None:
    """The registered stages in graph order: version, inputs, outputs, build-file keys."""
    from ..core.graph import order
    from ..core.registry import registered_stages

    stages = order(list(registered_stages()))
    if fmt == "json":
        click.echo(
            json.dumps(
                [
                    {
                        "name": s.spec.name,
                        "version": s.spec.version,
                        "inputs": list(s.spec.inputs),
                        "outputs": list(s.spec.outputs),
                        "config_keys": list(s.spec.config_keys),
                        "module": getattr(s.module, "__name__", ""),
                        "description": s.spec.description,
                    }
                    for s in stages
                ],
                indent=2,
            )
        )
        return
    for stage in stages:
        spec = stage.spec
        click.echo(f"{spec.name} (version {spec.version}): {spec.description}")
        click.echo(f"  inputs:  {', '.join(spec.inputs) or '-'}")
        click.echo(f"  outputs: {', '.join(spec.outputs)}")
        if spec.config_keys:
            click.echo(f"  reads:   {', '.join(spec.config_keys)}")
