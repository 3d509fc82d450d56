"""`orchestrate inspect`: list a bundle file's entries, or extract one."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click


@click.command()
@click.argument("bundle", type=click.Path(dir_okay=False))
@click.option("--extract", "entry", default=None, help="Entry id (or unique name) to extract.")
@click.option(
    "--to",
    "dest",
    type=click.Path(dir_okay=False),
    default=None,
    help="Where to write the extracted entry (default: stdout).",
)
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
