"""Stage records: a stage whose every input is unchanged is skipped whole, units unvisited.

Per-unit lookups make a one-file edit cheap; they still cost a key and a lookup per unit, which
on a no-op rerun of 100,000 assets dwarfs the stat of every input that ninja pays. So after a
stage runs, its record keeps (like ninja's build log) everything the stage as a whole depended
on — its fingerprint (version, libraries, build-file slice, the digests of its input values),
whether it listed the project tree, every project file its units and its driver code read with
the digests seen, outside files it tracked (rule files), the files it published with their stat
signatures — and where its outputs are stored. A rerun that finds all of that unchanged loads
the outputs (lazily: only if something downstream runs and needs them) and moves on.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from .cache import Cache, _sealed, _unseal, atomic_write
from .hashing import digest_bytes, digest_value


@dataclass
class StageRecord:
    fingerprint: str
    listing: str | None  # digest of the project listing, when the stage walked it
    reads: dict[str, str | None]  # project-relative path → digest (None: looked for, absent)
    external: dict[str, str | None]  # absolute path → digest (rule files and the like)
    published: dict[str, tuple[int, int]]  # output-relative path → (size, mtime_ns)
    values: dict[str, str]  # output value name → value digest
    outputs: dict[str, str] | None  # value name → blob of the pickled value (None: not picklable)
    units: int = 0
    unit_results: list = field(default_factory=list)  # [(unit id, result digest)], for reuse

    def to_json(self) -> bytes:
        return orjson.dumps(self.__dict__, option=orjson.OPT_SORT_KEYS)


class StageRecords:
    """Records kept in the cache folder, one per (project checkout, output folder, stage)."""

    def __init__(self, cache: Cache, project_root: str, output_dir: str) -> None:
        self.cache = cache
        self._scope = digest_value([project_root, output_dir])[:24]

    def _path(self, stage: str) -> Path:
        return self.cache.root / "stages" / self._scope / digest_bytes(stage.encode())[:24]

    def get(self, stage: str) -> StageRecord | None:
        try:
            data = self._path(stage).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            return StageRecord(**orjson.loads(_unseal(data)))
        except (TypeError, ValueError):  # damaged, or written by another version: start over
            self.drop(stage)
            return None

    def put(self, stage: str, record: StageRecord) -> None:
        atomic_write(self._path(stage), _sealed(record.to_json()))

    def drop(self, stage: str) -> None:
        try:
            os.unlink(self._path(stage))
        except FileNotFoundError:
            pass


def listing_digest(entries) -> str:
    """Digest of the project tree's file names (content is covered by the reads)."""
    return digest_bytes("\n".join(entry.path for entry in entries).encode("utf-8"))


def published_signature(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return (st.st_size, st.st_mtime_ns)
