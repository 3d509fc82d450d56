"""The `orchestrate` command: parse, call, map errors to exit codes. Thin by design.

click gives subcommands, typed options and help text for free; rich renders tables on terminals.
Ray is never imported here: only an executor that has work to do imports it.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

import click

from . import __version__
from .errors import ConfigError, OrchestrateError

ISSUES_URL = "the orchestrate issue tracker"


def _fail(error: OrchestrateError) -> "NoReturn":
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
        click.echo("interrupted; the cache is consistent and the next run resumes from it",
                   err=True)
        sys.exit(130)
    except OSError as exc:
        if exc.errno == 28:  # ENOSPC
            click.echo(f"error: the disk is full: {exc.filename or ''} {exc.strerror}", err=True)
            sys.exit(4)
        _internal(exc)
    except Exception as exc:  # a bug: show where, so it can be reported
        _internal(exc)
    sys.exit(0)


def _internal(exc: BaseException) -> "NoReturn":
    traceback.print_exc()
    click.echo(f"internal error (a bug in orchestrate {__version__}): {exc}\n"
               f"please report it, with the trace above, at {ISSUES_URL}", err=True)
    sys.exit(3)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="orchestrate")
def cli() -> None:
    """Parallel, cached build pipeline for game content: collect, validate, cook, pack, write."""


def _load(build_file: str, executor: str | None = None):
    from .config import load_build
    overrides = {"executor": {"kind": executor}} if executor else None
    return load_build(build_file, overrides)


def _log(log_format: str = "console", verbose: bool = False):
    from .observe import setup_logging
    return setup_logging(log_format, verbose)


# -- run -------------------------------------------------------------------------------------
@cli.command()
@click.argument("build_file", type=click.Path(dir_okay=False))
@click.option("--executor", type=click.Choice(["auto", "local", "ray"]), default=None,
              help="Where units run (default: the build file's executor.kind, else auto).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Ray worker processes for a local Ray.")
@click.option("--stages", default=None, help="Comma-separated stages to run (and what they need).")
@click.option("--explain", is_flag=True, help="Say why each unit ran.")
@click.option("--profile", type=click.Path(dir_okay=False), default=None,
              help="Write a Chrome trace-event JSON of the run (open in Perfetto).")
@click.option("--log-format", type=click.Choice(["console", "json"]), default="console")
@click.option("--no-cache", is_flag=True, help="Run every unit (results are still stored).")
@click.option("--dry-run", is_flag=True, help="Say what would run, and why, without running it.")
@click.option("--keep-going", is_flag=True, help="Other units go on after a unit fails.")
@click.option("-v", "--verbose", is_flag=True)
def run(build_file, executor, workers, stages, explain, profile, log_format, no_cache, dry_run,
        keep_going, verbose) -> None:
    """Build everything the build file describes."""
    code = run_command(build_file, executor=executor, workers=workers,
                       stages=stages.split(",") if stages else None, explain=explain,
                       profile=profile, log_format=log_format, no_cache=no_cache,
                       dry_run=dry_run, keep_going=keep_going, verbose=verbose)
    sys.exit(code)


def run_command(build_file, *, executor=None, workers=None, stages=None, explain=False,
                profile=None, log_format="console", no_cache=False, dry_run=False,
                keep_going=False, verbose=False, quiet=False) -> int:
    """Run a build and print its summary; returns the exit code (0 or 1)."""
    from .lock import OutputLock
    from .observe import interactive, summary_table, write_profile
    from .scheduler import RunOptions, run_build
    from stages.gates import build_verdict, summary_lines

    log = _log(log_format, verbose)
    build = _load(build_file, executor)
    options = RunOptions(executor=build.config.executor.kind, workers=workers, stages=stages,
                         explain=explain, no_cache=no_cache, dry_run=dry_run,
                         keep_going=keep_going, progress=not quiet and log_format == "console")
    t0 = time.time()
    with OutputLock(build.output_dir, keep=(build.cache_dir,)):
        result = run_build(build, options, log)
    if profile:
        write_profile(profile, result.reports, t0)
    if dry_run:
        for outcome in result.explained:
            click.echo(f"would run {outcome.stage}: {outcome.unit} ({outcome.reason})")
        if result.dry_run_stopped_at:
            click.echo(f"(stages after {result.dry_run_stopped_at} depend on its results and "
                       f"cannot be planned before it runs)")
        elif not result.explained:
            click.echo("nothing to do")
        return 0
    verdict = build_verdict(build, result.outputs)
    if not quiet:
        _print_summary(summary_table(result.reports), interactive())
        for line in summary_lines(build, result.outputs):
            click.echo(line)
        if result.ray_startup is not None:
            click.echo(f"ray startup: {result.ray_startup:.2f} s (not counted above)")
    log.info("build.done", exit_code=verdict.exit_code, reasons=verdict.reasons,
             seconds=round(time.time() - t0, 3))
    for reason in verdict.reasons:
        click.echo(f"build failed: {reason}", err=True)
    return verdict.exit_code


def _print_summary(table: str, rich_output: bool) -> None:
    if rich_output:
        from rich.console import Console
        from rich.table import Table
        lines = table.splitlines()
        header = lines[0].split()
        header = [header[0], header[1], header[2], header[3], header[4], " ".join(header[5:])]
        grid = Table(*header)
        for line in lines[2:]:
            grid.add_row(*line.split())
        Console(stderr=False).print(grid)
    else:
        click.echo(table)


# -- cache -----------------------------------------------------------------------------------
@cli.group()
def cache() -> None:
    """Inspect and bound the cache."""


@cache.command("stats")
@click.argument("build_file", type=click.Path(dir_okay=False))
def cache_stats(build_file) -> None:
    """Entries and bytes per area of the cache."""
    from .cache import Cache
    build = _load(build_file)
    stats = Cache(build.cache_dir).stats()
    click.echo(f"cache: {build.cache_dir}")
    for area, figures in stats.items():
        click.echo(f"  {area:<5} {figures['files']:>9} files  {figures['bytes'] / 2**20:>10.1f} MB")


@cache.command("gc")
@click.argument("build_file", type=click.Path(dir_okay=False))
@click.option("--max-size", default="10G", help="Bound the cache to this size (e.g. 500M, 10G).")
@click.option("--max-age", default=30.0, type=float, help="Drop entries unused for this many days.")
def cache_gc(build_file, max_size, max_age) -> None:
    """Drop old entries, then least recently used ones until the cache fits."""
    from .cache import Cache
    build = _load(build_file)
    outcome = Cache(build.cache_dir).gc(_parse_size(max_size), max_age)
    click.echo(f"removed {outcome['removed']} files ({outcome['freed_bytes'] / 2**20:.1f} MB); "
               f"{outcome['remaining_bytes'] / 2**20:.1f} MB remain")


def _parse_size(text: str) -> int:
    units = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    text = text.strip().upper().rstrip("B")
    try:
        if text and text[-1] in units:
            return int(float(text[:-1]) * units[text[-1]])
        return int(text)
    except ValueError:
        raise ConfigError(f"not a size: {text!r} (expected e.g. 500M or 10G)",
                          key="--max-size") from None


@cache.command("clear")
@click.argument("build_file", type=click.Path(dir_okay=False))
def cache_clear(build_file) -> None:
    """Delete the whole cache folder."""
    from .cache import Cache
    build = _load(build_file)
    Cache(build.cache_dir).clear()
    click.echo(f"cleared {build.cache_dir}")


@cli.command()
@click.argument("build_file", type=click.Path(dir_okay=False))
def clean(build_file) -> None:
    """Delete the output folder (the cache is kept)."""
    import shutil
    from .lock import OutputLock
    build = _load(build_file)
    if build.output_dir.exists():
        with OutputLock(build.output_dir):
            for child in build.output_dir.iterdir():
                if child.name == "reports":
                    continue
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        shutil.rmtree(build.output_dir)
    click.echo(f"removed {build.output_dir}")


# -- projects --------------------------------------------------------------------------------
@cli.command()
@click.argument("dest", type=click.Path(file_okay=False))
@click.option("--assets", default=1000, type=click.IntRange(min=100), help="Number of resources (at least 100).")
@click.option("--seed", default=1, type=int, help="Random seed (same seed, same bytes).")
def generate(dest, assets, seed) -> None:
    """Write a Messiah-style project with a build file and a rule library."""
    from stages.sources.messiah.generate import generate_project
    started = time.perf_counter()
    project = generate_project(dest, assets, seed)
    click.echo(f"generated {assets} resources in {time.perf_counter() - started:.1f} s; "
               f"build with: orchestrate run {project.build_file}")


@cli.command()
@click.argument("dest", type=click.Path(file_okay=False), required=False)
@click.option("--assets", default=300, type=click.IntRange(min=100))
@click.option("--executor", type=click.Choice(["auto", "local", "ray"]), default=None)
def demo(dest, assets, executor) -> None:
    """Generate a small project and build it end to end (rule failures shown, exit 0)."""
    from stages.sources.messiah.generate import generate_project
    dest = Path(dest or "orchestrate-demo")
    project = generate_project(dest, assets, 7)
    build_file = Path(project.build_file)
    text = build_file.read_text(encoding="utf-8")
    demo_file = build_file.with_name("demo.yaml")
    demo_file.write_text(text.replace("fail_on: error", "fail_on: never"), encoding="utf-8")
    click.echo(f"generated {assets} resources under {dest}; building {demo_file}")
    code = run_command(str(demo_file), executor=executor)
    sys.exit(code)


# -- queries over a built cook list ------------------------------------------------------------
def run_quiet(build_file: str, stages: list[str], executor: str | None = None,
              log_format: str = "console"):
    """Run just the named stages (and what they need) without the summary; returns the run."""
    from .lock import OutputLock
    from .scheduler import RunOptions, run_build
    log = _log(log_format)
    build = _load(build_file, executor)
    options = RunOptions(executor=build.config.executor.kind, stages=stages, progress=False)
    with OutputLock(build.output_dir, keep=(build.cache_dir,)):
        return build, run_build(build, options, log)


@cli.command()
@click.argument("build_file", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def cooklist(build_file, fmt) -> None:
    """What is cooked and why; missing, ambiguous and never-cook references; cycles."""
    from stages.cooklist.closure import cooklist_text
    build, result = run_quiet(build_file, ["dependency"])
    cooked = result.outputs["cooklist"]
    if fmt == "json":
        click.echo(json.dumps(cooked.to_json(), indent=2, ensure_ascii=False))
    else:
        click.echo(cooklist_text(cooked), nl=False)
    sys.exit(1 if build.config.cook.fail_on_missing and cooked.missing else 0)


@cli.command()
@click.argument("build_file", type=click.Path(dir_okay=False))
@click.argument("asset")
def why(build_file, asset) -> None:
    """The chain from a root to ASSET (GUID, virtual path or path), or why it is not cooked."""
    from stages.cooklist.closure import why as why_answers, why_text
    build, result = run_quiet(build_file, ["dependency"])
    answers = why_answers(result.outputs["source"].assets, result.outputs["cooklist"], asset,
                          build.section("cook"))
    click.echo(why_text(answers), nl=False)


@cli.command()
@click.argument("build_file", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["dot", "json"]), default="dot")
@click.option("--cooked-only", is_flag=True, help="Only assets in the cook list.")
def graph(build_file, fmt, cooked_only) -> None:
    """Export the asset reference graph (Graphviz DOT or JSON)."""
    from stages.cooklist.closure import graph_dot, graph_json
    build, result = run_quiet(build_file, ["dependency"])
    assets, cooked = result.outputs["source"].assets, result.outputs["cooklist"]
    if fmt == "json":
        click.echo(json.dumps(graph_json(assets, cooked, cooked_only), indent=2, ensure_ascii=False))
    else:
        click.echo(graph_dot(assets, cooked, cooked_only), nl=False)


@cli.command()
@click.argument("bundle", type=click.Path(dir_okay=False))
@click.option("--extract", "entry", default=None, help="Entry id (or unique name) to extract.")
@click.option("--to", "dest", type=click.Path(dir_okay=False), default=None,
              help="Where to write the extracted entry (default: stdout).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def inspect(bundle, entry, dest, fmt) -> None:
    """List a bundle's entries, or extract one entry's payload."""
    from stages.bundlefile.inspect import extract_entry, format_listing, inspect_bundle
    if entry is not None:
        if dest is None:
            import tempfile
            with tempfile.TemporaryDirectory() as tmp:
                target = Path(tmp) / "entry"
                extract_entry(bundle, entry, target)
                sys.stdout.buffer.write(target.read_bytes())
            return
        found = extract_entry(bundle, entry, dest)
        click.echo(f"extracted {found.id} ({found.size} bytes) to {dest}", err=True)
        return
    description = inspect_bundle(bundle)
    if fmt == "json":
        click.echo(json.dumps(description, indent=2, ensure_ascii=False))
    else:
        click.echo(format_listing(description), nl=False)


@cli.command()
@click.argument("build_file", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "junit"]), default="text")
@click.option("--output", "output", type=click.Path(dir_okay=False), default=None,
              help="Write the report here instead of standard output.")
@click.option("--executor", type=click.Choice(["auto", "local", "ray"]), default=None)
def validate(build_file, fmt, output, executor) -> None:
    """Check the project against the rule library; exit 1 if failures reach rules.fail_on."""
    from stages.gates import build_verdict
    from stages.rules.report import render
    build, result = run_quiet(build_file, ["validate"], executor)
    data = render(result.outputs["validation"], fmt)
    if output:
        from .cache import atomic_write
        atomic_write(Path(output).resolve(), data)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    verdict = build_verdict(build, {"validation": result.outputs["validation"]})
    sys.exit(verdict.exit_code)
