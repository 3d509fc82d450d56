"""`orchestrate report OUT [--open]` and `orchestrate diff OUT_A OUT_B`: the build report made
again from an output folder's files, and what a patch between two builds ships."""

from __future__ import annotations

import json
import sys
import webbrowser
from pathlib import Path

import click


@click.command()
@click.argument("output", type=click.Path(file_okay=False))
@click.option("--open", "open_page", is_flag=True, help="Open the page in the default browser.")
def report(output, open_page) -> None:
    """Render the build report (OUTPUT/reports/index.html) again from OUTPUT's files."""
    from orchestrator import RECORD, OutputLock, read_record, render_reports
    from stages.reports.outputs import NotABuildOutput, read_manifest

    folder = Path(output)
    record = read_record(folder / RECORD)
    if record is None:
        read_manifest(folder)  # a folder with neither a record nor a manifest is no build's
    elif not folder.is_dir():
        raise NotABuildOutput("not a folder", file=str(folder))
    with OutputLock(folder):
        written = render_reports(folder, record)
    for path in written.pages:
        click.echo(f"report: {path}")
    if open_page and written.pages:
        page = Path(written.pages[0]).resolve()
        if not webbrowser.open(page.as_uri()):
            click.echo(f"no browser could be started; open {page} by hand", err=True)


@click.command()
@click.argument("old", type=click.Path(file_okay=False))
@click.argument("new", type=click.Path(file_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def diff(old, new, fmt) -> None:
    """What a patch from build OLD to build NEW ships: exit 0 identical, 1 different, 2 when a
    folder is not a build output."""
    from stages.reports.diff import diff_states, diff_text
    from stages.reports.state import state_of

    patch = diff_states(state_of(Path(old)), state_of(Path(new)))
    if fmt == "json":
        click.echo(json.dumps(patch.to_json(old, new), indent=2, ensure_ascii=False))
    else:
        click.echo(diff_text(patch, old, new), nl=False)
    sys.exit(0 if patch.identical else 1)
