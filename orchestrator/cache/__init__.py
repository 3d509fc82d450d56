"""The cache folder: what a build can reuse, shared between checkouts, runs and machines.

Layout under the cache folder:
  cas/<2 hex>/<digest>          large blobs, named by the BLAKE3 of their bytes (verified on read)
  cas/packs/*.pack, index.log   small blobs, appended per run, found through a checksummed index
  actions.sqlite                the action cache: (stage, unit key) → files read → result,
                                signed when the build holds the farm's key (signing.py)
  state/<machine>/<scope>.sqlite   the incremental state of one checkout and output folder
                                (cache/state.py): machine-local, never read by another machine;
                                its rows signed as the action rows are
  lock                          held shared by builds, alone by `cache gc` and `cache clear`

Blobs are written through a temporary file and a rename or appended in verified ranges, and
every read is checked against the digest; a database that SQLite finds damaged is set aside,
and the rows that hold results, values, units, records and the file table carry a digest of
their bytes (SQLite keeps none), so bit rot inside a row is found too. So a reader never trusts
a partial or damaged entry: it only costs recomputing. Everything stored is data
(orchestrator/codec.py): nothing executes when read; an intact blob that is no value is refused.

Durability: a process killed at any point leaves nothing that is trusted half-written (each
write path is killed in tests/test_faults.py). Nothing is fsynced (SQLite runs with
`synchronous = NORMAL`): after an OS crash or a power loss the last entries may be lost, which
only costs recomputing them (docs/cluster.md, "When things fail").
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

from ..errors import CacheCorrupt
from ..files.atomic import TEMP_PREFIX, append_lines, atomic_write, line_checksum, seal, unseal
from ..files.confined import ConfinedFolder
from ..hashing import digest_bytes
from .actions import ActionCache, ActionEntry
from .blobs import LARGE_BLOB_BYTES, BlobPacks
from .housekeeping import ACTIONS, cache_stats, clear_cache, collect_garbage
from .signing import EntryKey

__all__ = [
    "ActionCache",
    "ActionEntry",
    "Cache",
    "CacheCorrupt",
    "ConfinedFolder",
    "EntryKey",
    "TEMP_PREFIX",
    "append_lines",
    "atomic_write",
    "line_checksum",
    "seal",
    "unseal",
]


class Cache:
    """One cache folder: the blob store and the action cache.

    A `scratch` cache (a dry run's) reads the folder but writes nothing to it: the blobs the run
    stores go to a temporary folder deleted at `close` (read from there first), and the action
    entries it records and the hits it notes are dropped."""

    def __init__(
        self, root: Path, log=None, scratch: bool = False, key: EntryKey | None = None
    ) -> None:
        self.root = Path(root)
        self.log = log
        self.corrupt_dropped = 0
        self.refused_entries = 0  # entries a build with the key found unsigned or forged
        self.key = key  # the farm's key: signs the action rows and the build states written
        self.folder = ConfinedFolder(self.root, "cache folder")  # every file is reached through it
        self.packs = BlobPacks(self.folder.path("cas/packs"), self)
        self.actions = ActionCache(self.folder.path(ACTIONS), self, scratch, key)
        self.scratch: Cache | None = None
        if scratch:
            self.scratch = Cache(Path(tempfile.mkdtemp(prefix="orchestrate-dry-run-")), log)

    # -- blobs -------------------------------------------------------------------------------
    def _blob_path(self, digest: str) -> Path:
        return self.folder.path(self._blob_file(digest))

    @staticmethod
    def _blob_file(digest: str) -> str:
        """The blob's file, relative to the cache folder."""
        return f"cas/{digest[:2]}/{digest}"

    def put_blob(self, data: bytes) -> str:
        """Store bytes under their digest: small ones appended to this run's pack, large ones
        in a file of their own (creating a file per unit costs more than the unit's work)."""
        if self.scratch is not None:
            return self.scratch.put_blob(data)
        digest = digest_bytes(data)
        if len(data) < LARGE_BLOB_BYTES:
            self.packs.put(digest, data)
            return digest
        relpath = self._blob_file(digest)
        # an existing blob may be damaged: only a verified copy spares the write
        found = self.folder.lstat(relpath)
        if found is None or found.st_size != len(data) or self.folder.read(relpath) != data:
            atomic_write(self.folder, relpath, data)
        return digest

    def has_blob(self, digest: str) -> bool:
        if self.scratch is not None and self.scratch.has_blob(digest):
            return True
        return self.packs.has(digest) or self.folder.lstat(self._blob_file(digest)) is not None

    def get_blob(self, digest: str) -> bytes:
        """The blob's bytes; raises CacheCorrupt (after dropping it) if missing or mismatched."""
        if self.scratch is not None and self.scratch.has_blob(digest):
            return self.scratch.get_blob(digest)
        data = self.packs.get(digest)
        if data is not None:
            return data
        relpath = self._blob_file(digest)
        found = self.folder.read(relpath)
        if found is None:
            raise CacheCorrupt(f"blob {digest[:12]} vanished from the cache")
        if digest_bytes(found) != digest:
            self.dropped(self._blob_path(digest), f"blob {digest[:12]} does not match its digest")
            self._unlink(relpath)
            raise CacheCorrupt(f"blob {digest[:12]} was corrupt and has been dropped")
        return found

    def refuse(self, digest: str, why: str) -> None:
        """Drop a blob that matches its digest but holds no value this build stores (planted in
        a shared cache, or written by another product): the blob and the action entries that
        name it, so that no run finds it again."""
        self.dropped(self._blob_path(digest), f"blob {digest[:12]} was refused: {why}")
        self._unlink(self._blob_file(digest))
        self.packs.refuse(digest)
        self.actions.drop_result(digest)

    def _unlink(self, relpath: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.folder.unlink(relpath)

    # -- durability and housekeeping ---------------------------------------------------------
    def flush(self) -> None:
        """Make what was written durable for the next run: blobs before the action entries
        that name them."""
        self.packs.flush()
        self.actions.flush()

    def close(self) -> None:
        """Flush, and let go of open files and databases (and of a scratch cache's folder)."""
        try:
            self.flush()
        finally:
            self.packs.close_readers()
            self.actions.close()
            if self.scratch is not None:
                self.scratch.close()
                shutil.rmtree(self.scratch.root, ignore_errors=True)
            self.folder.forget()

    def dropped(self, path: Path, why: str) -> None:
        """Count and log something damaged that was set aside."""
        self.corrupt_dropped += 1
        if self.log is not None:
            self.log.warning("cache.dropped", file=str(path), reason=why)

    def refused(self, path: Path, why: str) -> None:
        """Count and log an entry that is intact but not signed with the build's key: planted
        by someone who can write to the cache (or by a build without the key)."""
        self.refused_entries += 1
        if self.log is not None:
            self.log.warning("cache.refused", file=str(path), reason=why)

    def stats(self) -> dict:
        """Counts and bytes per area."""
        return cache_stats(self.root)

    def gc(self, max_bytes: int | None = None, max_age_days: float | None = None) -> dict:
        """Drop old entries, then the least recently used until the cache fits (housekeeping)."""
        return collect_garbage(self.root, max_bytes, max_age_days)

    def clear(self) -> None:
        clear_cache(self.root)
