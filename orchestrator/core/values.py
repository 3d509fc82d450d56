"""The values a run passes between stages, and the unit results a stage's `finish` reads; both
come from memory when this run made them, else from the build state, decoded on first use."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..cache.entries import WHOLE, ValueStore
from ..keyed import Keyed, KeyedPatch
from ..typing import Plan

UNCHANGED = object()
"""What `finish` may return for an output that is exactly as the last run stored it."""


class Results(Mapping):
    """Unit id → result, loaded lazily from the store; `digest(id)` without loading; the plan
    the stage made this run; after an incremental update, the units whose result `changed`
    (new ones included), the units `removed` and the results they had `before`."""

    def __init__(
        self,
        plan: Plan,
        load: Callable[[str], Any],
        digests: dict[str, str],
        *,
        changed: set[str] | None = None,
        removed: set[str] | None = None,
        before: dict[str, str] | None = None,
    ) -> None:
        self.plan = plan
        self._load = load
        self._digests = digests
        self.changed = changed
        self.removed = removed
        self.before = before or {}

    def digest(self, unit_id: str) -> str:
        return self._digests[unit_id]

    def digests(self) -> dict[str, str]:
        return dict(self._digests)

    def __getitem__(self, unit_id: str) -> Any:
        return self._load(self._digests[unit_id])

    def __iter__(self) -> Iterator[str]:
        return iter(self._digests)

    def __len__(self) -> int:
        return len(self._digests)

    def __contains__(self, unit_id: object) -> bool:
        return unit_id in self._digests


class RunValues(Mapping):
    """Every value by name: what stages returned in this run, or what the state holds."""

    def __init__(self, store: ValueStore, keyed: set[str], names: list[str]) -> None:
        self._store = store
        self._keyed = keyed  # names of keyed values (declared by their producers)
        self._names = names  # every value the run's stages produce, in graph order
        self._memory: dict[str, Any] = {}

    def add(self, name: str, value: Any) -> None:
        """A value a stage returned in this run (a mapping, a patch, or a plain value)."""
        if value is UNCHANGED:
            self._memory.pop(name, None)
        elif name in self._keyed and isinstance(value, KeyedPatch):
            self._memory[name] = Keyed(name, self._store, overlay=value)
        elif name in self._keyed and isinstance(value, Mapping) and not isinstance(value, Keyed):
            self._memory[name] = Keyed(name, self._store, memory=value)
        else:
            self._memory[name] = value

    def release(self, name: str) -> None:
        """Forget a value's in-memory copy (no stage left in the run reads it)."""
        self._memory.pop(name, None)

    def __getitem__(self, name: str) -> Any:
        if name not in self._memory:
            if name in self._keyed:
                self._memory[name] = Keyed(name, self._store)
            else:
                self._memory[name] = self._store.entry(name, WHOLE)
        return self._memory[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._memory or (isinstance(name, str) and self._store.has(name))


class StageInputs(Mapping):
    """A stage's inputs, each decoded the first time the stage asks for it."""

    def __init__(self, values: RunValues, names: list[str]) -> None:
        self._values = values
        self._names = names

    def __getitem__(self, name: str) -> Any:
        if name not in self._names:
            raise KeyError(name)
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)
