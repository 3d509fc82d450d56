"""Stage values in the build state, entry by entry: a keyed value is one row per key, a plain
value one row; each row carries its digest and the generation at which it last changed, and a
removed key stays as a tombstone until every stage has seen it go. Every row read is verified
against its check (keyed with the farm's key; none without one): the check covers the entry's
digest, and its data, inline or in the blob store, is checked against that digest."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from operator import itemgetter
from typing import Any

from ..codec import dumps, loads
from ..errors import CacheCorrupt, CodecError
from ..hashing import digest_bytes
from ..keyed import Changes, what_changed
from .resident import MISSING, DecodedEntries, Digests, KeptDigests
from .statedb import StateDatabase
from .taken import VALUE, TakenParts, fingerprint_of

INLINE_MAX_BYTES = 256 * 1024  # larger values live in the blob store
STORED_PREFIX = b"blob:"
WHOLE = ""  # the key of a value that is not keyed
#: Up to this many keys, a patch looks up their stored digests by key rather than reading all
#: of the value's (SQLite binds at most 999 parameters by default in older builds).
FEW_KEYS = 500
#: Up to this many entries changed by one store, each change is also put in words (--explain:
#: `index entry repo/1027c4d1-…: Name changed`); more, and only the keys are named.
NOTED_KEYS = 64


def named_blobs(rows: Iterable[Sequence]) -> list[str]:
    """The blobs stored entries (key, digest, data) name: the values too large to be inline."""
    skip = len(STORED_PREFIX)
    return [data[skip:].decode("ascii") for _, _, data in rows if data.startswith(STORED_PREFIX)]


def decode_entry(data: bytes) -> Any:
    """An entry's value from its bytes as `Keyed.encoded_items` checked them; CacheCorrupt
    (the run starts again, stages planned afresh) if they are no value this process knows."""
    try:
        return loads(data)
    except CodecError as exc:
        raise CacheCorrupt(f"a stored value cannot be decoded: {exc}") from None


class ValueStore:
    """The stage values, entry by entry (the `entries` table of the build state; values large
    enough go to `blobs`, the content-addressed store). A value of a stage taken whole is read
    from its stage's rows until something changes it (cache/taken.py)."""

    def __init__(
        self,
        db: StateDatabase,
        blobs: Any,
        taken: TakenParts,
        decoded: DecodedEntries | None = None,
        kept: KeptDigests | None = None,
    ) -> None:
        self.db = db
        self.blobs = blobs
        self.taken = taken
        self.decoded = decoded  # a resident session's (None: every entry read is decoded)
        self.kept = kept  # the session's digests of values read before (in earlier builds too)
        # (value, key) → how the entry changed, for the entries stored in this process
        self.notes: dict[tuple[str, str], str] = {}

    def encode(self, value: Any) -> tuple[bytes, bytes]:
        """(digest, stored data) of a value: inline, or a reference into the blob store."""
        data = dumps(value)
        digest = bytes.fromhex(digest_bytes(data))
        if len(data) > INLINE_MAX_BYTES:
            return digest, STORED_PREFIX + self.blobs.put_blob(data).encode("ascii")
        return digest, data

    def decode(self, digest: bytes, data: Any) -> Any:
        """The value of a live entry, its data checked against its digest."""
        data, stored = self._checked(digest, data)
        try:
            return loads(data)
        except CodecError as exc:
            if stored is not None:  # intact, but no value: no run may find it again
                self.blobs.refuse(stored, str(exc))
            raise CacheCorrupt(f"a stored value cannot be decoded: {exc}") from None

    def _checked(self, digest: bytes, data: Any) -> tuple[bytes, str | None]:
        """A live entry's bytes checked against its digest, and its blob's name if stored so."""
        stored = None
        if not isinstance(data, bytes):
            raise CacheCorrupt("a stored value is no bytes")
        if data.startswith(STORED_PREFIX):
            stored = data[len(STORED_PREFIX) :].decode("ascii")
            data = self.blobs.get_blob(stored)
        if digest_bytes(data) != digest.hex():
            raise CacheCorrupt("a stored value does not match its digest")
        return data, stored

    def _entry(self, key: str, digest: bytes, data: Any) -> Any:
        """A keyed value's entry: decoded, or as a resident session decoded it before."""
        if self.decoded is None or key == WHOLE:
            return self.decode(digest, data)
        found = self.decoded.get(digest)
        if found is MISSING:
            found = self.decode(digest, data)
            self.decoded.put(digest, found)
        return found

    def _rows(
        self, value: str, where: str, args: Iterable = (), data: bool = False
    ) -> list[tuple[str, int, Any, Any]]:
        """(key, gen, digest or None for a tombstone, data if asked for) of the value's rows
        that match `where` (SQL after the value's condition), each verified against its check:
        CacheCorrupt if one fails (the run starts again, every stage planned afresh: a stage
        would trust the entry, or miss that it changed). Tuples, not records: a keyed value
        can have a hundred thousand entries, read at each run."""
        db = self.db
        checked = db.checks.checked("entries")
        rows = db.execute(
            "SELECT key, gen, digest, "
            + ("data" if data else "NULL")
            + (", data IS NOT NULL, check_" if checked else "")
            + f" FROM entries WHERE value = ? {where}",
            (value, *args),
        )
        if checked:
            for key, gen, digest, _, live, check in rows:
                if not db.checks.verify("entries", check, value, key, gen, digest, live):
                    then = "the run starts again with every stage planned afresh"
                    raise CacheCorrupt(db.untrusted("entries", f"an entry of {value}", then))
        return [row[:4] for row in rows]

    def _live(self, value: str, data: bool = False) -> list[tuple[str, int, Any, Any]]:
        """The value's live rows (`_rows`) in key order: a taken value's from its stage's."""
        taken = self.taken.value(value)
        if taken is not None:
            return taken.live(data)
        return self._rows(value, "AND data IS NOT NULL ORDER BY key", data=data)

    def _settle(self, value: str) -> None:
        """Write a taken value's entries into the state as they were taken (their generation
        kept), before something changes the value (cache/taken.py)."""
        taken = self.taken.value(value)
        if taken is not None:
            rows, gen = taken.rows, taken.generation
            self.taken.settle(VALUE, value, lambda: self._insert(value, rows, gen))

    def _insert(self, value: str, rows: Iterable[Sequence], gen: int) -> None:
        """Store entries (key, digest, data) as they are, under generation `gen`."""
        self._written(value, gen)
        checks = self.db.checks
        self.db.execute_many(
            "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?)",
            (
                (value, key, gen, digest, data, checks.check("entries", value, key, gen, digest, 1))
                for key, digest, data in rows
            ),
        )

    def entry(self, value: str, key: str = WHOLE) -> Any:
        """One entry of a value (KeyError when absent)."""
        rows = list(self._rows_of(value, [key], data=True))
        if not rows:
            raise KeyError(key)
        _, _, digest, data = rows[0]
        return self._entry(key, digest, data)

    def entry_digest(self, value: str, key: str = WHOLE) -> str | None:
        rows = list(self._rows_of(value, [key]))
        return rows[0][2].hex() if rows else None

    def keys(self, value: str) -> list[str]:
        return [key for key, *_ in self._live(value)]

    def digests(self, value: str) -> dict[str, str]:
        """Every live entry's digest (hex) by key, in key order; not to be changed by the
        caller (a resident session keeps it for the next build)."""
        if self.kept is None or self.taken.value(value) is not None:
            return {key: digest.hex() for key, _, digest, _ in self._live(value)}
        return self._kept(value).by_key

    def _kept(self, value: str) -> Digests:
        """The value's digests as a resident session keeps them: those it read before,
        advanced by the rows changed since (their generation is newer), or read whole."""
        assert self.kept is not None
        generation = self.generation(value)
        known = self.kept.get(value)
        if known is not None and known.generation == generation:
            return known
        if known is not None and known.generation < generation:
            by_key = dict(known.by_key)
            added = False
            for key, _, digest, _ in self._rows(value, "AND gen > ?", (known.generation,)):
                if digest is None:
                    by_key.pop(key, None)
                else:
                    added = added or key not in by_key
                    by_key[key] = digest.hex()
            found = Digests(generation, dict(sorted(by_key.items())) if added else by_key)
        else:
            found = Digests(
                generation, {key: digest.hex() for key, _, digest, _ in self._live(value)}
            )
        self.kept.put(value, found)
        return found

    def digests_of(self, value: str, keys: list[str]) -> dict[str, str]:
        """The stored digests of some keys (a patch of a few entries need not read them all)."""
        return {key: digest.hex() for key, _, digest, _ in self._rows_of(value, keys)}

    def _rows_of(
        self, value: str, keys: list[str], data: bool = False
    ) -> Iterator[tuple[str, int, Any, Any]]:
        """The live rows of some keys (`_rows`), looked up by key, FEW_KEYS at a time."""
        taken = self.taken.value(value)
        if taken is not None:
            yield from taken.of(keys, data)
            return
        for start in range(0, len(keys), FEW_KEYS):
            chunk = keys[start : start + FEW_KEYS]
            marks = ", ".join("?" * len(chunk))
            yield from self._rows(value, f"AND key IN ({marks}) AND data IS NOT NULL", chunk, data)

    def fingerprint(self, value: str) -> str:
        """A digest of every live entry's key and digest, in key order."""
        taken = self.taken.value(value)
        if taken is not None:
            return taken.fingerprint  # computed once: a taken value does not change
        if self.kept is not None:
            return self._kept(value).fingerprint(fingerprint_of)
        return fingerprint_of((key, digest) for key, _, digest, _ in self._live(value))

    def encoded_items(self, value: str) -> list[tuple[str, bytes]]:
        """Every live entry as its codec bytes (orchestrator.codec), in key order: each checked
        against its digest, none decoded (a process that decodes them itself, a custom-code
        worker, is sent them: the data it gets is what the build state signed)."""
        rows = self._live(value, data=True)
        return [(key, self._checked(digest, data)[0]) for key, _, digest, data in rows]

    def items(
        self, value: str, encoded: list[tuple[str, bytes]] | None = None
    ) -> Iterator[tuple[str, Any]]:
        """Every live entry, decoded, in key order; `encoded`: them as `encoded_items` just read
        and checked them, decoded, not read again (a resident session ignores them)."""
        if self.decoded is not None:  # a resident session: read the data of new entries only
            yield from self._items_decoded(value, self.decoded)
            return
        if encoded is not None:
            yield from ((key, decode_entry(data)) for key, data in encoded)
            return
        for key, _, digest, data in self._live(value, data=True):
            yield key, self._entry(key, digest, data)

    def _items_decoded(self, value: str, decoded: DecodedEntries) -> Iterator[tuple[str, Any]]:
        rows = self._live(value)
        found = {key: decoded.get(digest) for key, _, digest, _ in rows if key != WHOLE}
        missing = [key for key, _, _, _ in rows if found.get(key, MISSING) is MISSING]
        for key, _, digest, data in self._rows_of(value, missing, data=True):
            found[key] = self._entry(key, digest, data)
        for key, _, _, _ in rows:
            yield key, found[key]

    def has(self, value: str) -> bool:
        return self.taken.holds(VALUE, value) or bool(self._rows(value, "LIMIT 1"))

    def generation(self, value: str) -> int:
        """The generation at which any entry of the value last changed (0: never stored)."""
        taken = self.taken.generation(value)
        if taken is not None:
            return taken
        rows = self._rows(value, "ORDER BY gen DESC LIMIT 1")
        return rows[0][1] if rows else 0

    def changes(self, value: str, since: int) -> Changes:
        """The keys added or changed, and removed, after generation `since`."""
        taken = self.taken.value(value)
        if taken is not None:
            return Changes(taken.changed_since(since), frozenset())
        changed: set[str] = set()
        removed: set[str] = set()
        for key, _, digest, _ in self._rows(value, "AND gen > ?", (since,)):
            (changed if digest is not None else removed).add(key)
        return Changes(frozenset(changed), frozenset(removed))

    def put_entries(
        self,
        value: str,
        entries: Iterable[tuple[str, Any]],
        known: dict[str, str] | None = None,
        encoded: list[list] | None = None,
    ) -> list[str]:
        """Store entries whose digest differs from what is stored; returns the keys changed.
        `encoded`, when given, gets each entry as `rows` gives it ([key, digest, data]), in the
        order of `entries`: one that did not change is stored so already (its data is what
        its digest names)."""
        self._settle(value)
        entries = list(entries)
        if known is None:
            known = (
                self.digests_of(value, [key for key, _ in entries])
                if len(entries) <= FEW_KEYS
                else self.digests(value)
            )
        rows, changed = [], []
        for key, entry in entries:
            digest, data = self.encode(entry)
            if encoded is not None:
                encoded.append([key, digest, data])
            if known.get(key) == digest.hex():
                continue
            gen = self.db.generation
            check = self.db.checks.check("entries", value, key, gen, digest, 1)
            rows.append((value, key, gen, digest, data, check))
            changed.append(key)
        if 0 < len(changed) <= NOTED_KEYS:
            noted = set(changed)
            self._note(value, [(key, entry) for key, entry in entries if key in noted], known)
        rows.sort()
        self._written(value, self.db.generation)
        self.db.execute_many("INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?)", rows)
        return changed

    def remove_entries(self, value: str, keys: Iterable[str]) -> list[str]:
        """Tombstone entries (the removal is a change consumers see); returns the keys removed."""
        self._settle(value)
        gen = self.db.generation
        self._written(value, gen)
        rows = sorted(
            (gen, self.db.checks.check("entries", value, key, gen, None, 0), value, key)
            for key in keys
        )
        self.db.execute_many(
            "UPDATE entries SET gen = ?, digest = NULL, data = NULL, check_ = ? WHERE value = ? "
            "AND key = ? AND data IS NOT NULL",
            rows,
        )
        if len(rows) <= NOTED_KEYS:
            self.notes.update(((value, key), "removed") for _, _, _, key in rows)
        return [key for _, _, _, key in rows]

    def _note(self, value: str, entries: list[tuple[str, Any]], known: dict[str, str]) -> None:
        """Put each entry's change in words, against the entry stored before it (read before
        it is replaced)."""
        for key, entry in entries:
            if known.get(key) is None:
                self.notes[value, key] = "added"
                continue
            try:
                self.notes[value, key] = what_changed(self.entry(value, key), entry)
            except (KeyError, CacheCorrupt):  # no earlier entry to compare: name the key only
                continue

    def replace_entries(
        self, value: str, entries: dict[str, Any], live: list[list] | None = None
    ) -> list[str]:
        """Make the value exactly `entries`; returns the keys that changed or went away.
        `live`, when given, gets the value's live entries then, as `rows` gives them (in key
        order), without reading back what was just written."""
        self._settle(value)
        known = self.digests(value)
        changed = self.put_entries(value, entries.items(), known, live)
        gone = [key for key in known if key not in entries]
        if live is not None:
            live.sort(key=itemgetter(0))  # the keys are distinct: `rows` orders by key
        return changed + self.remove_entries(value, gone)

    def rows(self, value: str) -> list[tuple[str, bytes, bytes]]:
        """The value's live entries as stored (key, digest, data), in key order: what another
        build of the stage takes with `put_rows` (cache snapshots, core/stageentries.py)."""
        return [(key, digest, data) for key, _, digest, data in self._live(value, data=True)]

    def put_rows(self, value: str, rows: Sequence[Sequence]) -> list[str]:
        """Make the value exactly these stored entries (key, digest, data), as another build
        stored them: in bulk, nothing decoded, encoded or hashed (the data is checked against
        its digest when read, as every entry's is). An entry whose digest is the stored one is
        left as it is, so consumers see only what changed; keys not among them are removed.
        Returns the keys that changed or went away."""
        self._settle(value)
        known = self.digests(value)
        new = [row for row in rows if known.get(row[0]) != row[1].hex()]
        self._insert(value, new, self.db.generation)
        changed = [row[0] for row in new]
        kept = {key for key, _, _ in rows}
        return changed + self.remove_entries(value, [key for key in known if key not in kept])

    def prune_tombstones(self, before: int) -> None:
        self.forget_unsaved()  # digests kept are advanced by the tombstones this removes
        self.db.execute("DELETE FROM entries WHERE data IS NULL AND gen < ?", (before,))

    def _written(self, value: str, gen: int) -> None:
        """Rows of `value` are written under generation `gen`: digests kept of it at that very
        generation would miss them (rows of a newer generation than those kept are found)."""
        if self.kept is not None:
            known = self.kept.get(value)
            if known is not None and known.generation >= gen:
                self.kept.drop(value)

    def forget_unsaved(self) -> None:
        """A rollback takes rows back: the digests kept of them are read again."""
        if self.kept is not None:
            self.kept.clear()
