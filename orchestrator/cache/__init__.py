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

With `cache.remote` the folder sits in front of a cache server (remote.py): a blob or an action
entry the folder lacks is looked for there, checked as the folder's own are and kept in the
folder; what a build stores goes to both.

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
import functools
import secrets
import shutil
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..errors import CacheCorrupt
from ..files.atomic import TEMP_PREFIX, append_lines, atomic_write, line_checksum, seal, unseal
from ..files.confined import ConfinedFolder
from ..hashing import digest_bytes
from .actions import ActionCache, ActionEntry
from .blobs import LARGE_BLOB_BYTES, BlobPacks, Packed, blob_file, keep_file
from .entries import named_blobs
from .housekeeping import (
    ACTIONS,
    TEMPORARY,
    area_files,
    cache_stats,
    clear_cache,
    collect_garbage,
    taken_blobs,
)
from .remote import (
    AC,
    ADDRESS_BYTES,
    CAS,
    UPLOAD_THREADS,
    BlobAddress,
    RemoteSettings,
    RemoteStore,
    blob_key,
)
from .signing import EntryKey
from .workers import KEEP_IN_MEMORY_BYTES, StoredResult, StoreTarget

#: Blobs fetched from the remote at once (its connection pool holds one more than this).
FETCH_THREADS = UPLOAD_THREADS

__all__ = [
    "ActionCache",
    "ActionEntry",
    "Cache",
    "CacheCorrupt",
    "ConfinedFolder",
    "EntryKey",
    "KEEP_IN_MEMORY_BYTES",
    "RemoteSettings",
    "StoredResult",
    "TEMP_PREFIX",
    "append_lines",
    "atomic_write",
    "line_checksum",
    "named_blobs",
    "seal",
    "unseal",
]


class Cache:
    """One cache folder: the blob store and the action cache.

    A `scratch` cache (a dry run's) reads the folder but writes nothing to it: the blobs the run
    stores go to a temporary folder deleted at `close` (read from there first), and the action
    entries it records and the hits it notes are dropped."""

    def __init__(
        self,
        root: Path,
        log=None,
        scratch: bool = False,
        key: EntryKey | None = None,
        remote: RemoteSettings | None = None,
    ) -> None:
        self.root = Path(root)
        self.log = log
        self.corrupt_dropped = 0
        self.refused_entries = 0  # entries a build with the key found unsigned or forged
        self.key = key  # the farm's key: signs the action rows and the build states written
        self.folder = ConfinedFolder(self.root, "cache folder")  # every file is reached through it
        self.packs = BlobPacks(self.folder.path("cas/packs"), self)
        # The cache server behind the folder (a dry run reads it and writes nothing to it).
        self.remote = None if remote is None else RemoteStore(remote, log)
        self.uploads = remote is not None and remote.upload and not scratch
        self._addresses: dict[str, BlobAddress] = {}  # blob → where the server holds it
        self._on_server: set[str] = set()  # blobs this run fetched or sent: never sent again
        self._unfetchable: set[str] = set()  # blobs the server lacks or sent wrong this run
        self._refused_remotely = False  # a remote forgery is reported once a run
        self.actions = ActionCache(self.folder.path(ACTIONS), self, scratch, key)
        self._target: StoreTarget | None = None  # where this run's workers store results
        self.scratch: Cache | None = None
        if scratch:
            self.scratch = Cache(Path(tempfile.mkdtemp(prefix="orchestrate-dry-run-")), log)
        if self.remote is not None and key is None and log is not None:
            log.warning(
                f"remote cache {self.remote.url} is read without a cache key: whoever can write "
                'to it chooses this build\'s results (docs/cluster.md, "The cache key")'
            )

    # -- blobs -------------------------------------------------------------------------------
    def _blob_path(self, digest: str) -> Path:
        return self.folder.path(self._blob_file(digest))

    @staticmethod
    def _blob_file(digest: str) -> str:
        """The blob's file, relative to the cache folder."""
        return blob_file(digest)

    def put_blob(self, data: bytes) -> str:
        """Store bytes under their digest: small ones appended to this run's pack, large ones
        in a file of their own (creating a file per unit costs more than the unit's work)."""
        if self.scratch is not None:
            return self.scratch.put_blob(data)
        digest = digest_bytes(data)
        self._keep(digest, data)
        if self.uploads and digest not in self._on_server:
            assert self.remote is not None
            self._on_server.add(digest)
            self.remote.submit(functools.partial(self._send, digest, data), len(data))
        return digest

    def _keep(self, digest: str, data: bytes) -> None:
        """Store verified bytes in the folder."""
        if len(data) < LARGE_BLOB_BYTES:
            self.packs.put(digest, data)
            return
        keep_file(self, self._blob_file(digest), data)

    def store_target(self) -> StoreTarget | None:
        """Where this run's workers store the results they make (workers.py): this folder, or a
        dry run's scratch folder; None when what is stored must also reach the cache server
        (the driver stores and sends it)."""
        if self.scratch is not None:
            return self.scratch.store_target()
        if self.uploads:
            return None
        if self._target is None:  # the file a worker must read at its path to store here
            run = secrets.token_hex(16)
            target = StoreTarget(str(self.folder.given), run, f"{TEMPORARY}/workers-{run}")
            atomic_write(self.folder, target.probe, run.encode("ascii"))
            self._target = target
        return self._target

    def learn_blobs(self, packed: Iterable[tuple[str, Packed]]) -> None:
        """Where a worker appended blobs of this run (`store_target`), to read them from there."""
        packs = (self.scratch or self).packs
        for digest, where in packed:
            packs.learn(digest, where)

    def locate(self, digest: str) -> Packed | str | None:
        """Where a worker of this run reads a blob from the folder (`store_target`): its place
        in a pack, or its own file (relative to the folder); None when the folder has no copy
        known intact, or when workers store elsewhere (the driver then sends the value)."""
        if self.scratch is not None or self._target is None:
            return None
        where = self.packs.where(digest)
        if where is not None:
            return where
        relpath = self._blob_file(digest)
        return relpath if self.folder.lstat(relpath) is not None else None

    def has_blob(self, digest: str) -> bool:
        """Whether the blob can be had: from the folder, else fetched from the remote now
        (a result found in the action cache is read soon after)."""
        return self._has_local(digest) or self._fetch(digest) is not None

    def has_blobs(self, digests: Iterable[str]) -> bool:
        """Whether every blob can be had: those the folder lacks are fetched from the remote
        now, several at once (a stage taken whole from the server names thousands)."""
        missing = [digest for digest in dict.fromkeys(digests) if not self._has_local(digest)]
        if not missing:
            return True
        if self.remote is None or not self.remote.available:
            return False
        with ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="remote-cache-fetch") as pool:
            fetched = list(pool.map(self._download, missing))
        for digest, data in zip(missing, fetched):
            if data is None:
                return False
            self._keep_fetched(digest, data)
        return True

    def _has_local(self, digest: str) -> bool:
        if self.scratch is not None and self.scratch.has_blob(digest):
            return True
        return self.packs.has(digest) or self.folder.lstat(self._blob_file(digest)) is not None

    def get_blob(self, digest: str) -> bytes:
        """The blob's bytes, from the folder or else the remote; raises CacheCorrupt (after
        dropping a damaged copy) if neither has it intact."""
        if self.scratch is not None and self.scratch.has_blob(digest):
            return self.scratch.get_blob(digest)
        try:
            data = self._local_blob(digest)
        except CacheCorrupt:
            mended = self._fetch(digest)
            if mended is None:
                raise
            return mended
        if data is None:
            data = self._fetch(digest)
        if data is None:
            raise CacheCorrupt(f"blob {digest[:12]} vanished from the cache")
        return data

    def _local_blob(self, digest: str) -> bytes | None:
        data = self.packs.get(digest)
        if data is not None:
            return data
        relpath = self._blob_file(digest)
        found = self.folder.read(relpath)
        if found is None:
            return None
        if digest_bytes(found) != digest:
            self.dropped(self._blob_path(digest), f"blob {digest[:12]} does not match its digest")
            self._unlink(relpath)
            raise CacheCorrupt(f"blob {digest[:12]} was corrupt and has been dropped")
        return found

    # -- the remote ------------------------------------------------------------------------------
    def _send(self, digest: str, data: bytes) -> None:
        """Upload a blob and its address (on an upload thread): the content first."""
        assert self.remote is not None
        address = BlobAddress.of(data)
        if self.remote.put(CAS, address.sha256, data) and self.remote.put(
            AC, blob_key(digest), address.encode()
        ):
            self._addresses[digest] = address

    def _fetch(self, digest: str) -> bytes | None:
        """A blob from the remote, verified and kept in the folder; None if it has none."""
        data = self._download(digest)
        if data is not None:
            self._keep_fetched(digest, data)
        return data

    def _keep_fetched(self, digest: str, data: bytes) -> None:
        (self.scratch or self)._keep(digest, data)
        self._on_server.add(digest)

    def _download(self, digest: str) -> bytes | None:
        """A blob from the remote, verified against its digest (on a fetch thread too); None
        if it has none."""
        remote = self.remote
        if remote is None or not remote.available or digest in self._unfetchable:
            return None
        address = self._addresses.get(digest)
        if address is None:
            found = remote.get(AC, blob_key(digest), ADDRESS_BYTES)
            address = None if found is None else BlobAddress.decode(found)
        data = None if address is None else remote.get(CAS, address.sha256, address.size)
        if data is None or digest_bytes(data) != digest:
            self._unfetchable.add(digest)
            if data is not None:
                self.refused_remotely(
                    f"blob {digest[:12]} on the server does not match its digest: refused; "
                    "what it holds is made again"
                )
            return None
        return data

    def learn_address(self, digest: str, address: BlobAddress) -> None:
        """Where the server holds a blob, as an action entry found there says."""
        self._addresses.setdefault(digest, address)

    def address_of(self, digest: str) -> BlobAddress | None:
        """Where the server holds a blob this run sent or fetched (None: unknown)."""
        return self._addresses.get(digest)

    def refused_remotely(self, why: str) -> None:
        """Count an entry or blob of the server refused; the first of a run is reported (a
        server full of forgeries is one line, not one per unit)."""
        self.refused_entries += 1
        if not self._refused_remotely and self.log is not None and self.remote is not None:
            self._refused_remotely = True
            self.log.warning("cache.refused", file=self.remote.url, reason=why)

    def refuse(self, digest: str, why: str) -> None:
        """Drop a blob that matches its digest but holds no value this build stores (planted in
        a shared cache, or written by another product): the blob and the action entries that
        name it, so that no run finds it again."""
        self.dropped(self._blob_path(digest), f"blob {digest[:12]} was refused: {why}")
        self._unlink(self._blob_file(digest))
        self._unfetchable.add(digest)
        self.packs.refuse(digest)
        self.actions.drop_result(digest)

    def _unlink(self, relpath: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.folder.unlink(relpath)

    # -- durability and housekeeping ---------------------------------------------------------
    def flush(self) -> None:
        """Make what was written durable for the next run: blobs before the action entries
        that name them, in the folder and on the remote."""
        self.packs.flush()
        if self.remote is not None:
            self.remote.wait()
        self.actions.flush()

    def close(self) -> None:
        """Flush, and let go of open files and databases (and of a scratch cache's folder),
        and of the remote once its uploads are done."""
        try:
            self.flush()
        finally:
            if self.remote is not None:
                self.remote.close()
            if self._target is not None:  # workers store nothing after the run
                self._unlink(self._target.probe)
                self._target = None
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
        """Drop old entries, then the least recently used until the cache fits (housekeeping):
        never the file of a blob a build state holds a taken stage's rows in (cache/taken.py),
        which its next edit reads."""
        states = [path for path in area_files(self.root, "state") if path.suffix == ".sqlite"]
        held = {relpath for digest in taken_blobs(states) for relpath in self._holders(digest)}
        keep = frozenset(str(self.root / relpath) for relpath in held)
        return collect_garbage(self.root, max_bytes, max_age_days, keep)

    def _holders(self, digest: str) -> tuple[str, ...]:
        """The files a blob is read from, relative to the folder: its own, or its pack's."""
        if self.folder.lstat(self._blob_file(digest)) is not None:
            return (self._blob_file(digest),)
        return self.packs.holders(digest)

    def clear(self) -> None:
        clear_cache(self.root)
