"""The cache: a content-addressed blob store, per-stage action logs, stage records and a stat cache.

Layout under the cache folder:
  cas/<2 hex>/<digest>      large blobs, named by the BLAKE3 of their bytes (verified on read)
  cas/packs/*.pack, index.log   small blobs, appended per run, found through a checksummed index
  ac/<stage>.log            action logs: key → files read with their digests → result digest,
                            with the key components --explain compares
  stages/<scope>/<stage>    whole-stage records (records.py)
  stat/<root digest>        (path → size, mtime_ns, inode, digest) for one project checkout
  tree/<digest>             the project tree snapshot (../tree.py)

Files are written to a temporary sibling and renamed into place; logs, packs and the pack index
are appended to in whole checksummed lines or verified ranges. So a reader never trusts a partial
entry, and concurrent writers of one key (same content by construction) are harmless. Anything that
fails verification is dropped and treated as absent.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from ..errors import CacheCorrupt
from ..hashing import digest_bytes
from .actions import ActionEntry, ActionLog
from .atomic import TEMP_PREFIX, append_lines, atomic_write, line_checksum, seal, unseal
from .blobs import LARGE_BLOB_BYTES, BlobPacks
from .housekeeping import cache_stats, clear_cache, collect_garbage
from .records import StageRecord, StageRecords, listing_digest, published_signature
from .statcache import StatCache

__all__ = [
    "ActionEntry",
    "ActionLog",
    "Cache",
    "CacheCorrupt",
    "StageRecord",
    "StageRecords",
    "StatCache",
    "TEMP_PREFIX",
    "append_lines",
    "atomic_write",
    "line_checksum",
    "listing_digest",
    "published_signature",
    "seal",
    "unseal",
]


def safe_name(stage: str) -> str:
    """A stage name as a file name."""
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in stage) or "_"


class Cache:
    """One cache folder; safe to share between concurrent runs and machines."""

    def __init__(self, root: Path, log=None) -> None:
        self.root = Path(root)
        self.log = log
        self.corrupt_dropped = 0
        self._logs: dict[str, ActionLog] = {}
        self.packs = BlobPacks(self.root / "cas" / "packs", self)

    # -- blobs -------------------------------------------------------------------------------
    def _blob_path(self, digest: str) -> Path:
        return self.root / "cas" / digest[:2] / digest

    def put_blob(self, data: bytes) -> str:
        """Store bytes under their digest: small ones appended to this run's pack, large ones
        in a file of their own (creating a file per unit costs more than the unit's work)."""
        digest = digest_bytes(data)
        if len(data) < LARGE_BLOB_BYTES:
            self.packs.put(digest, data)
            return digest
        path = self._blob_path(digest)
        try:  # an existing blob may be damaged: only a verified copy spares the write
            intact = path.stat().st_size == len(data) and path.read_bytes() == data
        except (FileNotFoundError, NotADirectoryError):
            intact = False
        if not intact:
            atomic_write(path, data)
        return digest

    def has_blob(self, digest: str) -> bool:
        return self.packs.has(digest) or self._blob_path(digest).exists()

    def get_blob(self, digest: str) -> bytes:
        """The blob's bytes; raises CacheCorrupt (after dropping it) if missing or mismatched."""
        data = self.packs.get(digest)
        if data is not None:
            return data
        path = self._blob_path(digest)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise CacheCorrupt(f"blob {digest[:12]} vanished from the cache") from None
        if digest_bytes(data) != digest:
            self.drop(path, f"blob {digest[:12]} does not match its digest")
            raise CacheCorrupt(f"blob {digest[:12]} was corrupt and has been dropped")
        return data

    # -- action logs -------------------------------------------------------------------------
    def actions(self, stage: str) -> ActionLog:
        """The action log of one stage (opened once per cache object)."""
        if stage not in self._logs:
            self._logs[stage] = ActionLog(self.root / "ac" / f"{safe_name(stage)}.log", self)
        return self._logs[stage]

    def get_actions(self, key: str, stage: str = "_") -> list[ActionEntry]:
        return self.actions(stage).get(key)

    def put_action(
        self, key: str, reads: dict[str, str | None], result: str, stage: str = "_"
    ) -> None:
        log = self.actions(stage)
        log.append(key, reads, result)
        log.release()  # the next get reads the file again, this entry and other writers' too

    def flush(self) -> None:
        """Make everything written so far durable for the next run (packs before the logs
        that point into them)."""
        self.packs.flush()
        for log in self._logs.values():
            log.flush()

    def close(self) -> None:
        """Flush, and let go of the pack files opened for reading."""
        self.flush()
        self.packs.close_readers()

    def flush_blobs(self) -> None:
        """Make the packed blobs written so far durable (before log lines that name them)."""
        self.packs.flush()

    def drop(self, path: Path, why: str) -> None:
        """Remove a damaged file, counted and logged."""
        self.corrupt_dropped += 1
        if self.log is not None:
            self.log.warning("cache.dropped", file=str(path), reason=why)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    def stats(self) -> dict:
        """Counts and bytes per area."""
        return cache_stats(self.root)

    def gc(self, max_bytes: int | None = None, max_age_days: float | None = None) -> dict:
        """Drop old entries, then the least recently used until the cache fits (housekeeping)."""
        return collect_garbage(self.root, max_bytes, max_age_days)

    def clear(self) -> None:
        clear_cache(self.root)
