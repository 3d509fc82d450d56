"""What happened to each stage in a run, for the summary, the run record and the profile (what
happened to each unit is its `UnitRecord`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..cache.records import UnitRecord


@dataclass
class StageReport:
    """Per-stage figures for the summary table."""

    name: str
    units: int = 0
    cached: int = 0
    built: int = 0
    start: float = 0.0  # wall-clock time the stage began
    seconds: float = 0.0
    peak_rss: int = 0
    cpu_percent: float = 0.0
    skipped: bool = False  # its record said nothing it depends on moved: no unit looked up
    why: str = ""  # why it was not skipped (--explain, the run record)
    outcomes: list[UnitRecord] = field(default_factory=list)  # the units that ran (dry run: due)


StageCallback = Callable[[Any, dict[str, Any]], None]
