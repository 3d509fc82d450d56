"""Action logs: per stage, key → files read with their digests → result digest (ninja's build log)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson

from .atomic import append_lines, line_checksum

ENTRIES_PER_KEY = 4


class Owner(Protocol):
    """What a log or pack reports damage to and flushes before itself (the Cache)."""

    log: Any
    corrupt_dropped: int

    def flush_blobs(self) -> None: ...


@dataclass
class ActionEntry:
    reads: list  # [path, digest or None] pairs, sorted by path
    result: str


class ActionLog:
    """One stage's action entries: an append-only log, like ninja's build log.

    A line is `<checksum> <key> <unit digest or -> <json>`, the json being {"r": reads, "d":
    result digest, "c": key components for --explain}, the checksum a CRC-32 of everything after
    it (`line_checksum`). Loading only splits lines and files them under their key and
    unit: a rerun of 100,000 units looks up every key but parses (and verifies) only the lines
    of keys it asks for. The newest entries of a key come first; a damaged or truncated line (a
    killed run, two machines appending over a network file system) fails its checksum when read
    and is skipped — it only costs a recomputation. New entries are appended in batches with one
    `write` on an O_APPEND file, so concurrent runs interleave whole lines. One file per stage
    means a rerun reads the stage's entries in one go instead of opening a file per unit.
    """

    FLUSH_EVERY = 256
    FLUSH_SECONDS = 2.0

    def __init__(self, path: Path, cache: Owner) -> None:
        self.path = path
        self._cache = cache
        self._raw: dict[bytes, list[bytes]] | None = None  # key → its lines, oldest first
        self._raw_unit: dict[bytes, bytes] = {}  # unit digest → its newest line
        self._pending: list[bytes] = []
        self._last_flush = time.monotonic()
        self._lines = 0

    def _load(self) -> None:
        raw: dict[bytes, list[bytes]] = {}
        try:
            data = self.path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            data = b""
        by_unit = self._raw_unit
        for line in data.split(b"\n"):
            fields = line.split(b" ", 3)
            if len(fields) != 4 or len(fields[0]) != 8:  # damaged, or an earlier format's line
                continue
            self._lines += 1
            raw.setdefault(fields[1], []).append(line)
            if fields[2] != b"-":
                by_unit[fields[2]] = line
        self._raw = raw

    def _parse(self, line: bytes) -> dict | None:
        check, _, rest = line.partition(b" ")
        try:
            if line_checksum(rest) != check:
                raise ValueError("checksum")
            return orjson.loads(rest.split(b" ", 2)[2])
        except (ValueError, IndexError, orjson.JSONDecodeError):
            self._cache.corrupt_dropped += 1
            if self._cache.log is not None:
                self._cache.log.warning(
                    "cache.dropped", file=str(self.path), reason="a damaged action line was skipped"
                )
            return None

    def get(self, key: str) -> list[ActionEntry]:
        """The newest entries of `key` (distinct results, at most a few), parsed now: a run
        looks each key up once."""
        if self._raw is None:
            self._load()
        entries: list[ActionEntry] = []
        raw = self._raw or {}
        for line in reversed(raw.get(key.encode("ascii"), ())):
            entry = self._parse(line)
            try:
                action = ActionEntry(entry["r"], entry["d"])  # type: ignore[index]
            except (TypeError, KeyError):
                continue  # damaged (already counted) or not an entry
            if all(e.result != action.result for e in entries):
                entries.append(action)
            if len(entries) == ENTRIES_PER_KEY:
                break
        return entries

    def last(self, unit_digest: str) -> dict | None:
        """The key components the unit had when it last ran (for --explain)."""
        if self._raw is None:
            self._load()
        line = self._raw_unit.get(unit_digest.encode("ascii"))
        entry = self._parse(line) if line is not None else None
        return (entry.get("c") or {}) if isinstance(entry, dict) else None

    def append(
        self,
        key: str,
        reads: dict[str, str | None],
        result: str,
        unit: str | None = None,
        components: dict | None = None,
    ) -> None:
        """Log a new entry. It is not kept in memory: a run looks each key up before it runs the
        unit, and the entries it found then stay valid (a later run reads the new one)."""
        document: dict[str, Any] = {"r": sorted(reads.items()), "d": result}
        if unit is not None:
            document["c"] = components or {}
        rest = b" ".join(
            (key.encode("ascii"), (unit or "-").encode("ascii"), orjson.dumps(document))
        )
        line = line_checksum(rest) + b" " + rest
        self._pending.append(line + b"\n")
        if (
            len(self._pending) >= self.FLUSH_EVERY
            or time.monotonic() - self._last_flush > self.FLUSH_SECONDS
        ):
            self.flush()

    def release(self) -> None:
        """Flush, and forget what was loaded (the stage is done with its lookups)."""
        self.flush()
        self._raw = None
        self._raw_unit = {}

    def flush(self) -> None:
        self._last_flush = time.monotonic()
        if not self._pending:
            return
        self._cache.flush_blobs()  # the results these entries point to go first
        data = b"".join(self._pending)
        self._pending.clear()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        append_lines(self.path, data)
        self._lines += data.count(b"\n")
