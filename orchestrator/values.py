"""The values a run passes between stages, and the unit results a stage's `finish` reads; both
load from the store on first use."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .cache import Cache, StageRecords
from .errors import CacheCorrupt
from .hashing import loads
from .typing import Plan


class Results(Mapping):
    """Unit id → result, loaded lazily from the store; `digest(id)` without loading; and the
    plan the stage made this run (`plan.state` is what planning learned)."""

    def __init__(self, plan: Plan, load: Callable[[str], Any]) -> None:
        self.plan = plan
        self._load = load
        self._digests: dict[str, str] = {}
        self._memory: dict[str, Any] = {}

    def add(self, unit_id: str, digest: str, value: Any = None, keep: bool = False) -> None:
        self._digests[unit_id] = digest
        if keep:
            self._memory[unit_id] = value

    def digest(self, unit_id: str) -> str:
        return self._digests[unit_id]

    def __getitem__(self, unit_id: str) -> Any:
        if unit_id in self._memory:
            return self._memory[unit_id]
        return self._load(self._digests[unit_id])

    def __iter__(self) -> Iterator[str]:
        return iter(self._digests)

    def __len__(self) -> int:
        return len(self._digests)


class StageValues(Mapping):
    """The values stages produced; a skipped stage's values load from the store on first use."""

    def __init__(self, cache: Cache, records: StageRecords) -> None:
        self._cache = cache
        self._records = records
        self._values: dict[str, Any] = {}
        self._stored: dict[str, tuple[str, str]] = {}  # value → (stage, its stored blob)
        # After the run: how to get a value whose stored copy turns out corrupt (build again).
        self.repair: Callable[[str], Any] | None = None

    def add(self, outputs: dict[str, Any]) -> None:
        self._values.update(outputs)

    def add_stored(self, stage: str, blobs: dict[str, str]) -> None:
        for name, blob in blobs.items():
            self._stored[name] = (stage, blob)

    def __getitem__(self, name: str) -> Any:
        if name not in self._values:
            stage, blob = self._stored[name]
            try:
                self._values[name] = loads(self._cache.get_blob(blob))
            except CacheCorrupt:
                self._records.drop(stage)  # the rerun runs the stage instead
                if self.repair is None:
                    raise
                self._values[name] = self.repair(name)
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(self._stored), **dict.fromkeys(self._values)})

    def __len__(self) -> int:
        return len(set(self._stored) | set(self._values))
