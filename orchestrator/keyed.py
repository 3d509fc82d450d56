"""Keyed values: stage outputs that are collections (asset id → asset, bundle → file), stored
entry by entry, read entry by entry, and diffed per key, so a change to one entry reaches only
what depends on that entry (Skyframe's, DICE's and Salsa's model, at the grain of a stage's
output).

The most common incremental stage maps one: one unit per entry of a keyed input, one output
entry per unit (write, archive and hash over bundles); `map_update` and `map_finish` give such a
stage its `update` and its `finish` in a line each."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from .hashing import digest_bytes
from .typing import Plan, Unit


class KeyedPatch(NamedTuple):
    """What an incremental `finish` returns for a keyed output: entries set and keys removed;
    the rest of the value stays as the last run left it."""

    set: dict[str, Any]
    removed: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.set or self.removed)


class Changes(NamedTuple):
    """What changed in one input since the stage last ran."""

    changed: frozenset[str]  # keys added or changed (for a value that is not keyed: {""})
    removed: frozenset[str]
    everything: bool = False  # the stage has no record: treat every key as new

    def __bool__(self) -> bool:
        return self.everything or bool(self.changed or self.removed)

    @property
    def touched(self) -> frozenset[str]:
        return self.changed | self.removed


NOTHING = Changes(frozenset(), frozenset())


def what_changed(old: Any, new: Any) -> str:
    """An entry's change in words, for --explain: the fields of a record (or of the records of
    a sequence) that differ (`Name changed`), else what kind of change it was."""
    fields = sorted(_changed_fields(old, new))
    if fields:
        return ", ".join(fields) + " changed"
    if isinstance(old, (list, tuple)) and isinstance(new, (list, tuple)) and len(old) != len(new):
        return f"{len(old)} → {len(new)} items"
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        keys = sorted(str(k) for k in old.keys() ^ new.keys() | _differing(old, new))
        return ", ".join(keys[:3]) + (" …" if len(keys) > 3 else "") + " changed"
    return "changed"


def _record_fields(value: Any) -> tuple[str, ...]:
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return value._fields
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return tuple(field.name for field in dataclasses.fields(value))
    return ()


def _changed_fields(old: Any, new: Any) -> set[str]:
    """The names of the fields that differ, when both are records of one type (or sequences
    of as many)."""
    if type(old) is type(new) and _record_fields(old):
        return {name for name in _record_fields(old) if getattr(old, name) != getattr(new, name)}
    if isinstance(old, (list, tuple)) and isinstance(new, (list, tuple)) and len(old) == len(new):
        found: set[str] = set()
        for before, after in zip(old, new, strict=True):
            if before != after and not _record_fields(before):
                return set()  # not records: no field to name
            found |= _changed_fields(before, after)
        return found
    return set()


def _differing(old: Mapping, new: Mapping) -> set[str]:
    return {str(key) for key in old.keys() & new.keys() if old[key] != new[key]}


class Keyed(Mapping):
    """A keyed value as a consumer sees it: entries decoded on first use, digests without
    decoding. Backed by the build state (a value the last run stored) or by a mapping a stage
    just returned in this run; either way its keys come in sorted order, so what a consumer
    builds by iterating does not depend on which run made the value."""

    def __init__(
        self,
        name: str,
        state: Any = None,
        memory: Mapping[str, Any] | None = None,
        overlay: KeyedPatch | None = None,
    ) -> None:
        self.name = name
        self._state = state
        self._memory = memory
        self._overlay = overlay
        self._decoded: dict[str, Any] = {}
        self._keys: list[str] | None = None
        self._digests: dict[str, str] | None = None
        # The stored entries as `encoded_items` read and checked them, until `items` decodes
        # them: a run that sends the index to custom code, then decodes it, reads it once.
        self._encoded: list[tuple[str, bytes]] | None = None

    def __getitem__(self, key: str) -> Any:
        if self._memory is not None:
            return self._memory[key]
        if self._overlay is not None:
            if key in self._overlay.set:
                return self._overlay.set[key]
            if key in self._overlay.removed:
                raise KeyError(key)
        if key not in self._decoded:
            self._decoded[key] = self._state.entry(self.name, key)
        return self._decoded[key]

    def __contains__(self, key: object) -> bool:
        if self._memory is not None:
            return key in self._memory
        if not isinstance(key, str):
            return False
        if self._overlay is not None:
            if key in self._overlay.set:
                return True
            if key in self._overlay.removed:
                return False
        return key in self._decoded or self._state.entry_digest(self.name, key) is not None

    def _key_list(self) -> list[str]:
        if self._keys is None:
            if self._memory is not None:
                self._keys = sorted(self._memory)
            else:
                keys = set(self._state.keys(self.name))
                if self._overlay is not None:
                    keys = (keys | set(self._overlay.set)) - set(self._overlay.removed)
                self._keys = sorted(keys)
        return self._keys

    def __iter__(self) -> Iterator[str]:
        return iter(self._key_list())

    def __len__(self) -> int:
        return len(self._key_list())

    def fingerprint(self) -> str:
        """A digest of every entry's digest (what a unit keyed on the whole value uses)."""
        if self._state is not None:
            return self._state.fingerprint(self.name)
        return digest_bytes(
            b"\n".join(
                key.encode("utf-8", "surrogateescape") + b"\0" + bytes.fromhex(digest)
                for key, digest in self.digests().items()
            )
        )

    def digests(self) -> dict[str, str]:
        """Every entry's digest by key: what the state stored, without decoding (a patch's
        entries digested, a value held in memory digested whole). Read once; not to be
        changed by the caller."""
        if self._digests is None:
            from .codec import digest

            if self._memory is not None:
                found = {key: digest(self._memory[key]) for key in self._key_list()}
            else:
                found = self._state.digests(self.name)
                if self._overlay is not None:
                    found = dict(found)  # the state's may be kept for the next build
                    for key in self._overlay.removed:
                        found.pop(key, None)
                    found.update((key, digest(entry)) for key, entry in self._overlay.set.items())
            self._digests = found
        return self._digests

    def digests_of(self, keys: Iterable[str]) -> dict[str, str]:
        """The digests of some entries by key, those that exist (keys absent are left out):
        one who knows which keys changed since an earlier value need not read every digest."""
        keys = sorted(set(keys))
        if self._digests is not None:
            return {key: self._digests[key] for key in keys if key in self._digests}
        from .codec import digest

        if self._memory is not None:
            return {key: digest(self._memory[key]) for key in keys if key in self._memory}
        found: dict[str, str] = {}
        stored = keys
        if self._overlay is not None:
            patch = self._overlay
            found = {key: digest(patch.set[key]) for key in keys if key in patch.set}
            stored = [key for key in keys if key not in patch.set and key not in patch.removed]
        if stored:
            found.update(self._state.digests_of(self.name, stored))
        return found

    def encoded_items(self) -> list[tuple[str, bytes]] | None:
        """Every entry as the state stored it (codec bytes, checked against its digest, in key
        order), for a process that decodes them itself; a patch made in this run encoded
        afresh (it is few entries). None for a value held in memory."""
        if self._state is None:
            return None
        stored = self._encoded = self._encoded or self._state.encoded_items(self.name)
        if self._overlay is None:
            return stored
        from .codec import dumps

        entries = dict(stored)
        for key in self._overlay.removed:
            entries.pop(key, None)
        entries.update((key, dumps(entry)) for key, entry in self._overlay.set.items())
        return sorted(entries.items())

    def as_dict(self) -> dict[str, Any]:
        """The whole value as a dict in key order (decoding every entry a run did not make)."""
        if isinstance(self._memory, dict) and list(self._memory) == self._key_list():
            return self._memory
        return dict(self.items())

    def items(self):
        """Every entry, decoded in one pass (a consumer that reads the whole value)."""
        if self._memory is not None:
            return [(key, self._memory[key]) for key in self._key_list()]
        # Every entry decoded before, by key; not asked otherwise: listing the keys to count
        # them is a query and a sort of them all (a second at 100,000 resources).
        if self._decoded and self._keys is not None and len(self._decoded) == len(self._keys):
            return [(key, self._decoded[key]) for key in self._keys]
        encoded, self._encoded = self._encoded, None
        if self._overlay is None:
            found = list(self._state.items(self.name, encoded))
            self._remember(dict(found))
            return found
        merged = dict(self._state.items(self.name, encoded))  # one pass, then the patch
        for key in self._overlay.removed:
            merged.pop(key, None)
        merged.update(self._overlay.set)
        self._remember(merged)
        return [(key, merged[key]) for key in self._key_list()]

    def _remember(self, entries: dict[str, Any]) -> None:
        """Keep every entry just decoded in one pass, and its keys: a consumer that reads the
        whole value and another that then looks entries up one by one (the dependency stage,
        then cook and pack, over 100,000 assets) decode each entry once, not once a pass plus
        a query a key (1.7 s at 100,000)."""
        self._decoded = entries
        if self._keys is None:  # the keys are those just read (not read again)
            self._keys = sorted(entries)

    def values(self):
        return [value for _, value in self.items()]


def decoded_entries(encoded: Iterable[tuple[str, bytes]]) -> list[tuple[str, Any]]:
    """Entries given as `Keyed.encoded_items` gives them, decoded (in the process that reads
    them; the codec builds records and plain data only, never runs code)."""
    from .codec import loads

    return [(key, loads(data)) for key, data in encoded]


def map_update(
    changes: Changes,
    make_units: Callable[[list[str]], list[Unit]],
    reason: str = "{key} changed",
    state: Any = None,
) -> Plan:
    """Units for the keys that changed, and the units of keys that went away removed."""
    keys = sorted(changes.changed)
    return Plan(
        units=make_units(keys),
        removed=tuple(sorted(changes.removed)),
        state=state,
        reasons={key: reason.format(key=key) for key in keys},
    )


def map_finish(results: Any, keys: Iterable[str], value: Callable[[str], Any]) -> Any:
    """The output: every key's entry after a full plan, the changed ones after an update."""
    if results.changed is None:
        return {key: value(key) for key in keys}
    return KeyedPatch(
        {key: value(key) for key in sorted(results.changed)}, tuple(sorted(results.removed or ()))
    )
