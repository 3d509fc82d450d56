"""What a resident session (`orchestrate watch`) keeps from one build to the next: the entries
of keyed values it decoded and the large unit results it stored or read (by digest), and the
entry digests of keyed values it read (by generation; every session keeps those within a
build too)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any


class DecodedEntries:
    """Entries of keyed values as decoded, by digest, kept from one build to the next by a
    resident session (`orchestrate watch`): an edit then decodes the entries it changed, not the
    hundred thousand a stage reading a whole value reads. Least recently used ones go past
    `limit`. Sound because an entry's value is its digest's, and values are never changed in
    place (a stage makes new ones); a whole value (not keyed) is not kept."""

    def __init__(self, limit: int = 400_000) -> None:
        self.limit = limit
        self._values: OrderedDict[bytes, Any] = OrderedDict()

    def get(self, digest: bytes) -> Any:
        """The value decoded for `digest`, or MISSING."""
        value = self._values.get(digest, MISSING)
        if value is not MISSING:
            self._values.move_to_end(digest)
        return value

    def put(self, digest: bytes, value: Any) -> None:
        self._values[digest] = value
        if len(self._values) > self.limit:
            self._values.popitem(last=False)

    def clear(self) -> None:
        self._values.clear()


MISSING = object()


class KeptDigests:
    """The entry digests of keyed values as the session last read them, each with the
    generation of the value they are: a build that reads every digest of the index (which of
    100,000 entries a unit's reads name) and then its fingerprint (whether the whole changed)
    reads the rows once, and a resident session's next build (`orchestrate watch`) reads only
    the rows changed since (cache/entries.py `ValueStore.digests`). A rollback takes rows back
    and a later build may write others under the same generation: it forgets them all
    (`clear`)."""

    def __init__(self) -> None:
        self._values: dict[str, Digests] = {}

    def get(self, value: str) -> Digests | None:
        return self._values.get(value)

    def put(self, value: str, digests: Digests) -> None:
        self._values[value] = digests

    def drop(self, value: str) -> None:
        self._values.pop(value, None)

    def clear(self) -> None:
        self._values.clear()


class Digests:
    """One value's entry digests (hex, in key order) at a generation, and its fingerprint,
    computed once (by cache/taken.py's `fingerprint_of`, which the caller hands in)."""

    __slots__ = ("generation", "by_key", "_fingerprint")

    def __init__(self, generation: int, by_key: dict[str, str]) -> None:
        self.generation = generation
        self.by_key = by_key
        self._fingerprint: str | None = None

    def fingerprint(self, fingerprint_of: Callable[[Iterable[tuple[str, bytes]]], str]) -> str:
        if self._fingerprint is None:
            self._fingerprint = fingerprint_of(
                (key, bytes.fromhex(digest)) for key, digest in self.by_key.items()
            )
        return self._fingerprint


class KeptResults:
    """Large unit results a resident session (`orchestrate watch`) stored or loaded, by digest,
    kept from one build to the next: the manifest stage's documents (24 MB at 100,000 assets)
    are stored by one build, published by it and patched by the next, and reading them back
    each time cost a read, a digest and a decode of them. Only values no stage can change in
    place are kept (bytes, text, numbers, and tuples, records and frozensets of them), so what
    is handed out is what decoding the stored bytes gives; values under `smallest` bytes cost
    little to read again and are not kept; the least recently used go past `limit` bytes."""

    def __init__(self, limit: int = 128 << 20, smallest: int = 64 << 10) -> None:
        self.limit = limit
        self.smallest = smallest
        self._values: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._bytes = 0

    def get(self, digest: str) -> Any:
        """The value kept for `digest`, or MISSING."""
        found = self._values.get(digest)
        if found is None:
            return MISSING
        self._values.move_to_end(digest)
        return found[0]

    def offer(self, digest: str, value: Any, size: int) -> None:
        """Keep a value stored (or read) under `digest` as `size` bytes, if it is worth it."""
        if size < self.smallest or size > self.limit or digest in self._values:
            return
        if not unchangeable(value):
            return
        self._values[digest] = (value, size)
        self._bytes += size
        while self._bytes > self.limit:
            _, (_, gone) = self._values.popitem(last=False)
            self._bytes -= gone

    def clear(self) -> None:
        self._values.clear()
        self._bytes = 0


#: Types whose values never change in place (exact types: a subclass may add state).
ATOMS = (bytes, str, int, float, bool, type(None))


def unchangeable(value: Any) -> bool:
    """Whether a stored value cannot be changed in place, nor anything inside it: bytes, text,
    numbers, None, and tuples (records are NamedTuples) and frozensets of such values."""
    if type(value) in ATOMS:
        return True
    if isinstance(value, (tuple, frozenset)):  # a storable one: a plain one or a record
        return all(unchangeable(item) for item in value)
    return False
