"""What happened in a run, unit by unit and stage by stage: the summary, --explain, the profile."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class UnitOutcome:
    """What happened to a unit in a run, for the summary, --explain and the profile."""

    stage: str
    unit: str
    cached: bool
    reason: str  # why it ran ("no entry", "input changed: Levels/a.ilevel", …) or "cached"
    seconds: float = 0.0
    worker: str = "driver"
    start: float = 0.0
    result: str = ""  # digest of the unit's stored result


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
    outcomes: list[UnitOutcome] = field(default_factory=list)


StageCallback = Callable[[Any, dict[str, Any]], None]
