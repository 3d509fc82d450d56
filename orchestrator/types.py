"""The engine's shared vocabulary: small, frozen, picklable value objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

Digest = str  # hex BLAKE3


@dataclass(frozen=True, slots=True)
class StageSpec:
    """What a stage declares: the graph and the cache key are derived from this."""

    name: str
    version: int
    inputs: tuple[str, ...]  # values consumed (produced by other stages)
    outputs: tuple[str, ...]  # values produced
    config_keys: tuple[str, ...] = ()  # top-level build-file keys read: the stage's slice
    description: str = ""


@dataclass(frozen=True, slots=True)
class Unit:
    """One unit of work: `run(payload, shared, reader)` is its whole computation.

    `key` is JSON-able key material naming everything the unit depends on besides the files it
    reads through the reader (those are traced) — upstream content digests, options, its own id.
    `files` are the project files it is known to read (preloaded for workers without the project).
    `cost` is a size estimate used to batch work for remote executors.
    """

    id: str
    payload: Any
    key: Any
    files: tuple[str, ...] = ()
    blobs: tuple[str, ...] = ()  # digests of stored results it needs: `reader.blob(digest)`
    cost: int = 1


@dataclass
class Plan:
    """A stage's units for this run, and read-only data every unit shares (sent to workers once)."""

    units: list[Unit]
    shared: Any = None


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
    outcomes: list[UnitOutcome] = field(default_factory=list)


StageCallback = Callable[[Any, dict[str, Any]], None]
