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

    def skip(self, units: int) -> None:
        """Skipped whole: its `units` all keep their results, none looked up."""
        self.units = self.cached = units
        self.skipped = True

    def runs_because(self, why: str) -> None:
        self.why = why

    def planned(self, units: int, kept: int) -> None:
        """It has `units`, of which `kept` keep their stored results without a lookup."""
        self.units, self.cached = units, kept

    def ran(self, records: list[UnitRecord]) -> None:
        """These units ran now (in a dry run: would run)."""
        self.outcomes.extend(records)
        self.built += len(records)

    def close(self, seconds: float, peak_rss: int, cpu_percent: float) -> None:
        self.seconds, self.peak_rss, self.cpu_percent = seconds, peak_rss, cpu_percent


StageCallback = Callable[[Any, dict[str, Any]], None]
