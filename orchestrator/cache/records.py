"""Stage records: a stage whose every input is unchanged is skipped whole, units unvisited.

Per-unit lookups make a one-file edit cheap; they still cost a key and a lookup per unit, which
on a no-op rerun of 100,000 assets dwarfs the stat of every input that ninja pays. So after a
stage runs, its record keeps (like ninja's build log) everything the stage as a whole depended
on — its fingerprint (version, libraries, build-file slice, the digests of its input values),
whether it listed the project tree, every project file its units and its driver code read with
the digests seen, outside files it tracked (rule files), the files it published with their stat
signatures — and where its outputs are stored. A rerun that finds all of that unchanged loads
the outputs (lazily: only if something downstream runs and needs them) and moves on.

The reads (every project file, for a stage that parses them all) sit in a file of their own,
loaded only when the project tree changed since the record was made (`tree`, see tree.py): a
no-op rerun compares one version string instead of 217,000 digests.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from ..hashing import digest_bytes, digest_value
from .atomic import atomic_write, seal, unseal

if TYPE_CHECKING:
    from . import Cache


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
    tree: str | None = None  # the project tree's version the reads were checked at (tree.py)
    reads_digest: str = ""  # of the reads file, so a record never pairs with another's reads

    def header_json(self) -> bytes:
        fields = {k: v for k, v in self.__dict__.items() if k != "reads"}
        return orjson.dumps(fields, option=orjson.OPT_SORT_KEYS)


class StageRecords:
    """Records kept in the cache folder, one per (project checkout, output folder, stage)."""

    def __init__(self, cache: Cache, project_root: str, output_dir: str) -> None:
        self.cache = cache
        self._scope = digest_value([project_root, output_dir])[:24]

    def _path(self, stage: str) -> Path:
        return self.cache.root / "stages" / self._scope / digest_bytes(stage.encode())[:24]

    def get(self, stage: str) -> StageRecord | None:
        """The record without its reads (see `reads`)."""
        try:
            data = self._path(stage).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            return StageRecord(reads=None, **orjson.loads(unseal(data) or b""))  # type: ignore[arg-type]
        except (TypeError, ValueError):  # damaged, or written by another version: start over
            self.drop(stage)
            return None

    def reads(self, stage: str, record: StageRecord) -> dict[str, str | None] | None:
        """The record's reads; None (and the record dropped) if they are missing or damaged."""
        if record.reads is None:
            try:
                data = unseal(self._reads_path(stage).read_bytes())
                if data is None or digest_bytes(data) != record.reads_digest:
                    raise ValueError("damaged")
                record.reads = orjson.loads(data)
            except (FileNotFoundError, NotADirectoryError, ValueError):
                self.drop(stage)
                return None
        return record.reads

    def put(self, stage: str, record: StageRecord) -> None:
        reads = orjson.dumps(record.reads)
        record.reads_digest = digest_bytes(reads)
        atomic_write(self._reads_path(stage), seal(reads))  # before the record naming it
        atomic_write(self._path(stage), seal(record.header_json()))

    def stamp(self, stage: str, record: StageRecord, tree: str) -> None:
        """Note that the record's reads were found unchanged at tree version `tree`."""
        record.tree = tree
        atomic_write(self._path(stage), seal(record.header_json()))

    def _reads_path(self, stage: str) -> Path:
        return self._path(stage).with_name(self._path(stage).name + ".reads")

    def drop(self, stage: str) -> None:
        for path in (self._path(stage), self._reads_path(stage)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


def listing_digest(entries) -> str:
    """Digest of the project tree's file names (content is covered by the reads)."""
    return digest_bytes("\n".join(entry.path for entry in entries).encode("utf-8"))


def published_signature(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return (st.st_size, st.st_mtime_ns)
