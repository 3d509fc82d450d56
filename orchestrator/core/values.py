"""The values a run passes between stages, and the unit results a stage's `finish` reads; both
come from memory when this run made them, else from the build state, decoded on first use."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ..cache.entries import WHOLE, ValueStore
from ..errors import InternalError
from ..files.reads import ENTRY_MARK, FOUND, EntryRead, entry_path, whole_path
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
        digests: Mapping[str, str],
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


class UpdatedDigests(Mapping):
    """Unit id → result digest of a stage after an incremental update, without reading every
    unit's row: the units the update looked at are `known` (their new results over their
    stored ones), and the rest is read from the state, once, only if a `finish` asks for a
    unit outside them or for all of them. Most finishes of an update read just the units that
    changed; reading the keys of a stage's 6,555 units every build was a fifth of a `watch`
    build after an attribute edit at 100,000 resources."""

    def __init__(
        self, known: dict[str, str], removed: set[str], stored: Callable[[], dict[str, str]]
    ) -> None:
        self._known = known
        self._removed = removed
        self._stored = stored
        self._all: dict[str, str] | None = None

    def everything(self) -> dict[str, str]:
        if self._all is None:
            found = self._stored()
            found.update(self._known)
            for unit_id in self._removed:
                found.pop(unit_id, None)
            self._all = found
        return self._all

    def __getitem__(self, unit_id: str) -> str:
        found = self._known.get(unit_id)
        if found is not None:
            return found
        return self.everything()[unit_id]

    def __contains__(self, unit_id: object) -> bool:
        return unit_id in self._known or unit_id in self.everything()

    def __iter__(self) -> Iterator[str]:
        return iter(self.everything())

    def __len__(self) -> int:
        return len(self.everything())


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


class EntryDigests:
    """The digests of stage values' entries as the build state holds them, for the entry reads
    of units' traces (files/reads.py): what a read found is filled in after the unit ran, and an
    action entry's reads are checked against it. Read from the state once per value and run (a
    few keys by key; many, or a whole value's fingerprint, in one pass), and forgotten when the
    value is stored again."""

    #: Up to this many keys not yet known, their digests are looked up by key; more, and the
    #: value's every digest is read in one pass.
    FEW = 2000

    def __init__(self, store: ValueStore) -> None:
        self._store = store
        self._known: dict[str, dict[str, str | None]] = {}
        self._complete: set[str] = set()  # values whose every digest is in _known
        self._fingerprints: dict[str, str] = {}

    @property
    def notes(self) -> Mapping[tuple[str, str], str]:
        """How the entries stored in this process changed, in words (for --explain)."""
        return self._store.notes

    def forget(self, value: str) -> None:
        """The value was stored again: what was read of it is stale."""
        self._known.pop(value, None)
        self._complete.discard(value)
        self._fingerprints.pop(value, None)

    def digest(self, read: EntryRead) -> str | None:
        """The digest of an entry (None: absent), or a whole value's fingerprint."""
        if read.key is None:
            return self.fingerprint(read.value)
        return self.of(read.value, [read.key])[read.key]

    def fingerprint(self, value: str) -> str:
        if value not in self._fingerprints:
            self._fingerprints[value] = self._store.fingerprint(value)
        return self._fingerprints[value]

    def of(self, value: str, keys: list[str]) -> dict[str, str | None]:
        """key → the digest of its entry, None for a key the value does not hold."""
        known = self._known_for(value, keys)
        return {key: known.get(key) for key in keys}

    def _known_for(self, value: str, keys: list[str]) -> dict[str, str | None]:
        """The digests known of the value's entries, `keys` among them (absent: None)."""
        known = self._known.setdefault(value, {})
        if value not in self._complete:
            wanted = [key for key in keys if key not in known]
            if len(wanted) > self.FEW:
                known.clear()
                known.update(self._store.digests(value))
                self._complete.add(value)
            elif wanted:
                found = self._store.digests_of(value, wanted)
                known.update((key, found.get(key)) for key in wanted)
        return known

    # A unit checking a repository reads a hundred thousand index entries: the two passes
    # below go value by value over its trace in comprehensions (no record per read), which
    # made them three times faster than reading each path on its own.

    def resolve(self, reads: dict[str, str | None], inputs: Iterable[str]) -> dict[str, str | None]:
        """A unit's reads with each entry it found given its stored digest; InternalError for
        an entry read of a value the stage does not consume (no change to it would reach it)."""
        entries = [path for path in reads if path.startswith(ENTRY_MARK)]
        if not entries:
            return reads
        resolved = dict(reads)
        matched = 0
        consumed = set(inputs)
        for value, paths in _by_value(entries, consumed):
            matched += len(paths)
            found = [path for path in paths if reads[path] == FOUND]
            whole, start = whole_path(value), len(entry_path(value, ""))
            keyed = [path for path in found if path != whole]
            if keyed:
                keys = [path[start:] for path in keyed]
                known = self._known_for(value, keys)
                resolved.update(zip(keyed, map(known.get, keys)))
            if len(keyed) != len(found):  # the whole value was read
                resolved[whole] = self.fingerprint(value)
        if matched != len(entries):
            stray = {path[1:].partition("/")[0] for path in entries} - consumed
            raise InternalError(
                f"a unit read entries of {min(stray)!r}, which its stage does not take as input"
            )
        return resolved

    def changed(self, reads: Iterable[tuple[str, str | None]]) -> str | None:
        """The first entry read (of `(path, digest)` pairs, files left out) whose entry no longer
        has the digest recorded; None when every one still has it."""
        recorded = dict(pair for pair in reads if pair[0].startswith(ENTRY_MARK))
        values = {path[1:].partition("/")[0] for path in recorded}
        for value, paths in _by_value(list(recorded), values):
            whole, start = whole_path(value), len(entry_path(value, ""))
            keyed = [path for path in paths if path != whole]
            if len(keyed) != len(paths) and recorded[whole] != self.fingerprint(value):
                return whole
            keys = [path[start:] for path in keyed]
            known = self._known_for(value, keys)
            for path, now in zip(keyed, map(known.get, keys)):
                if now != recorded[path]:
                    return path
        return None


def _by_value(paths: list[str], values: Iterable[str]) -> Iterator[tuple[str, list[str]]]:
    """Entry-read paths grouped by the value they read, for each of `values` (in order)."""
    for value in sorted(values):
        whole, prefix = whole_path(value), entry_path(value, "")
        mine = [path for path in paths if path.startswith(prefix) or path == whole]
        if mine:
            yield value, mine


class PreviousValues:
    """A stage's outputs as the last run stored them (`ctx.previous[name]`)."""

    def __init__(self, values: ValueStore, keyed: tuple[str, ...]) -> None:
        self._values = values
        self._keyed = keyed
        self._whole: dict[str, Any] = {}  # decoded once: `update` and `finish` may both read it

    def __getitem__(self, name: str) -> Any:
        if name in self._keyed:
            return Keyed(name, self._values)
        if name not in self._whole:
            self._whole[name] = self._values.entry(name, WHOLE)
        return self._whole[name]
