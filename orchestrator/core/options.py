"""The options of one run: made once by the command line (or a test, or a benchmark) and
passed down as one value to everything that reads them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RunOptions:
    """What a run is asked to do, besides what the build file says."""

    executor: str = "auto"  # auto | local | ray (the build file's `executor.kind` unless given)
    workers: int | None = None
    stages: list[str] | None = None  # just these stages and what they need
    explain: bool = False  # say why each unit runs
    no_cache: bool = False  # run every unit (results are still stored)
    dry_run: bool = False  # the run with nothing kept: what would run, and why
    keep_going: bool = False  # a failed unit does not stop its stage's other units
    progress: bool = True  # progress bars on a terminal
    # stage name → functions called with (ctx, outputs) after the stage (tests, benchmarks)
    callbacks: dict[str, list[Callable]] = field(default_factory=dict)
    # What the command prints and keeps (the engine reads none of these).
    profile: str | None = None  # write a Perfetto trace here
    log_format: str = "console"  # console | json
    verbose: bool = False
    quiet: bool = False
