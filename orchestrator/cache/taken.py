"""Stages the build state holds by reference: what a checkout with no build state of its own
took whole from the action cache (core/stageentries.py) stays in the blob it came in.

Copying a taken stage's rows into the state cost most of a fresh checkout's build: at 100,000
resources 675,000 value entries and 663,000 read rows, 9.6 s of a 28.4 s run, and SQLite has no
faster way to write them (7.5 s at best, measured). So the state keeps one row per taken part,
the units of a stage (with what they read) or one of its large output values (state.HELD_ENTRIES:
small ones are written at once), naming the blob of its `StageRows` and the generation that
took it. What only reads a part is served from the blob
(a no-op reads none of it; the run that took it has it in memory); what changes a part, or asks
the reverse index what read a file, first writes its rows into the state as they would have been
written when it was taken ("settles" it): a value's entries keep the generation that took them,
so consumers see exactly the changes they would have seen.

The blob is checked against its digest when read, and the row naming it against its check (as a
record's: bit rot in a generation would go unseen); a blob that is gone (`cache gc` keeps those
that states name: housekeeping.taken_blobs) or damaged makes the run start again with every
stage planned afresh, as a missing unit result does.

Here are the parts as the stores see them; the build state's `TakenStore` (cache/state.py)
keeps the table and reads the blobs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, Protocol

from ..hashing import digest_bytes

UNITS = "units"  # the kind of a part: a stage's units and their reads
VALUE = "value"  # one output value's entries


class TakenPart(NamedTuple):
    """A part of a taken stage the state names: the blob of its stage's rows (a digest) and
    the generation that took it."""

    stage: str
    blob: str
    generation: int


class TakenValue:
    """One output value of a taken stage, as its stage's rows hold it: live entries (key,
    digest, data) in key order, every one of the generation that took it."""

    def __init__(self, generation: int, rows: Sequence[Sequence]) -> None:
        self.generation = generation
        self.rows = rows
        self._by_key: dict[str, Sequence] | None = None

    def live(self, data: bool) -> list[tuple[str, int, Any, Any]]:
        """Every entry as a state's query gives it: (key, generation, digest, data or None)."""
        gen = self.generation
        if data:
            return [(key, gen, digest, stored) for key, digest, stored in self.rows]
        return [(key, gen, digest, None) for key, digest, _ in self.rows]

    def of(self, keys: Iterable[str], data: bool) -> list[tuple[str, int, Any, Any]]:
        """The entries of those keys the value holds, as `live` gives them."""
        if self._by_key is None:
            self._by_key = {row[0]: row for row in self.rows}
        found = (self._by_key.get(key) for key in keys)
        gen = self.generation
        return [(row[0], gen, row[1], row[2] if data else None) for row in found if row]

    @functools.cached_property
    def fingerprint(self) -> str:
        return fingerprint_of((key, digest) for key, digest, _ in self.rows)

    def changed_since(self, since: int) -> frozenset[str]:
        """The keys changed after generation `since`: every key was added at the generation
        that took it (and none removed)."""
        if self.generation <= since:
            return frozenset()
        return frozenset(row[0] for row in self.rows)


def fingerprint_of(entries: Iterable[tuple[str, bytes]]) -> str:
    """A value's fingerprint: a digest of every live entry's key and digest, in key order."""
    return digest_bytes(
        b"\n".join(
            key.encode("utf-8", "surrogateescape") + b"\0" + digest for key, digest in entries
        )
    )


class TakenUnits(NamedTuple):
    """A taken stage's units as stored rows ([id, key, result, digest, data] each) and what
    each read ([path, unit id])."""

    units: Sequence[Sequence]
    reads: Sequence[Sequence]


class TakenParts(Protocol):
    """What the value and unit stores ask of the taken parts (state.TakenStore keeps them)."""

    def holds(self, kind: str, name: str) -> bool: ...

    def generation(self, value: str) -> int | None: ...

    def value(self, name: str) -> TakenValue | None: ...

    def units(self, stage: str) -> TakenUnits | None: ...

    def settle(self, kind: str, name: str, write: Callable[[], None]) -> None: ...

    def drop(self, kind: str, name: str) -> None: ...
