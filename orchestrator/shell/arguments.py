"""Where a command finds its build file: the one named, a folder's `build.yaml`, or
`./build.yaml` when none is named (as `make` finds its Makefile).

Every command that reads a build file takes it through `build_file_argument`, so they all answer
the same way; a build file that is not there is refused by `load_build`, naming the path.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

DEFAULT_BUILD_FILE = "build.yaml"


class BuildFilePath(click.ParamType):
    """A build file's path as given, or the `build.yaml` of a folder given."""

    name = "build_file"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        path = Path(value)
        return str(path / DEFAULT_BUILD_FILE) if path.is_dir() else str(value)


def build_file_argument() -> Callable:
    """`BUILD_FILE`, optional: a file, a folder (its build.yaml), or ./build.yaml."""
    return click.argument(
        "build_file",
        type=BuildFilePath(),
        default=DEFAULT_BUILD_FILE,
        required=False,
        metavar="[BUILD_FILE]",
    )


def split_build_file(words: tuple[str, ...], what: str) -> tuple[str, str]:
    """(build file, the one other argument) of a command called `CMD [BUILD_FILE] WHAT`."""
    if len(words) == 1:
        return BuildFilePath().convert(DEFAULT_BUILD_FILE, None, None), words[0]
    if len(words) == 2:
        return BuildFilePath().convert(words[0], None, None), words[1]
    raise click.UsageError(f"expected [BUILD_FILE] {what}, got {len(words)} arguments")
