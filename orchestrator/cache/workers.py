"""Results stored by the workers that made them (docs/cluster.md, "The cache and the outputs").

A Ray worker that sees the driver's cache folder at the driver's path (every worker of a local
Ray; a cluster's when the folder is shared at one path) encodes each unit's result there
itself, each of its `Parts` first, writes the blobs into the folder, and returns only their
digests, where the small ones went and, for a small result, the value (what the driver keeps in
memory for the stage's `finish`). The driver records the unit by digest: it never encodes,
digests or writes the result, and decodes a large one only when a stage reads it.

Which workers may: the driver names the folder and the run (`StoreTarget`) and leaves a probe
file in the folder's `tmp/` holding the run's token; a worker stores only when it reads that
token at that path, else it returns the value as before and the driver stores it. What a worker
writes is what the driver would have written, the way it would have: large blobs through a
temporary file and a rename, small ones appended to a pack of the worker's own (one per worker
process and run) whose index lines are appended, whole and checksummed, once the bytes are
flushed, before the batch returns (before the driver records an action entry naming them).
Every read checks a blob against its digest, so a worker killed while writing leaves nothing
a later run trusts. Workers never write action entries or the build state: what names results
is written, and signed with the farm's key, by the driver alone (signing.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from ..codec import dumps, loads
from ..errors import CacheCorrupt, CodecError, MissingBlob
from ..files.confined import ConfinedFolder
from ..hashing import digest_bytes
from ..typing import Parts, StoredParts
from .blobs import LARGE_BLOB_BYTES, BlobPacks, Packed, blob_file, keep_file

#: Results smaller than this stay in the driver's memory for `finish` (a worker returns them
#: with their digest); larger ones (cooked payloads: a few KB each, 100,000 of them) are read
#: from the store only if `finish` asks for them.
KEEP_IN_MEMORY_BYTES = 4 * 1024


class StoreTarget(NamedTuple):
    """The cache folder workers store results in (as the driver names it), the run's token, and
    the file that holds it (`probe`, relative to the folder: Cache.store_target writes it)."""

    root: str
    run: str
    probe: str


class StoredResult(NamedTuple):
    """A unit's result as a worker stored it: its digest, its parts' digests, where each blob
    it appended to its pack went, and the result itself when small (`value`, when `small`)."""

    digest: str
    parts: tuple[str, ...] = ()
    packed: tuple[tuple[str, Packed], ...] = ()
    small: bool = False
    value: Any = None


class WorkerStore:
    """What one worker process writes into a cache folder during one run: small blobs in a pack
    of its own, large ones in files of their own."""

    def __init__(self, target: StoreTarget) -> None:
        self.log = None
        self.corrupt_dropped = 0
        self.folder = ConfinedFolder(target.root, "cache folder")
        self.packs = BlobPacks(self.folder.path("cas/packs"), self, indexed=False)

    def dropped(self, path: Path, why: str) -> None:  # the pack is only written here
        self.corrupt_dropped += 1

    def store(self, result: Any) -> StoredResult:
        """Encode and write a unit's result (each of its `Parts` first, as the driver does);
        TypeError, with nothing written, if the codec cannot store it (the driver then says
        which unit made it)."""
        packed: list[tuple[str, Packed]] = []
        parts: tuple[str, ...] = ()
        if isinstance(result, Parts):
            blobs = [dumps(value) for value in result.values.values()]
            parts = tuple(digest_bytes(blob) for blob in blobs)
            result = StoredParts(dict(zip(result.values, parts, strict=True)))
        else:
            blobs = []
        blob = dumps(result)
        for part, part_digest in zip(blobs, parts, strict=True):
            self._put(part, packed, part_digest)
        digest = self._put(blob, packed)
        small = len(blob) <= KEEP_IN_MEMORY_BYTES
        return StoredResult(digest, parts, tuple(packed), small, result if small else None)

    def _put(self, blob: bytes, packed: list[tuple[str, Packed]], digest: str = "") -> str:
        digest = digest or digest_bytes(blob)
        if len(blob) < LARGE_BLOB_BYTES:
            packed.append((digest, self.packs.append(digest, blob)))
        else:
            keep_file(self, blob_file(digest), blob)
        return digest

    def read(self, digest: str, where: Packed | str) -> bytes | None:
        """A stored blob, from where the driver found it (a place in a pack, or a file of its
        own), checked against its digest; None when it is not there intact."""
        try:
            if isinstance(where, str):
                data = self.folder.read(blob_file(digest))
                return data if data is not None and digest_bytes(data) == digest else None
            self.packs.learn(digest, Packed(*where))
            return self.packs.get(digest)
        except (CacheCorrupt, OSError):
            return None

    def flush(self) -> None:
        """The pack's bytes, then their index lines: readable by the driver from now on."""
        self.packs.flush()

    def close(self) -> None:
        self.packs.close()


class StoredBlobs(Mapping):
    """The stored results a unit reads (digest → value), as a worker gets them: read from the
    cache folder where the driver found them (`located`), or sent with the unit (`values`).
    One it cannot read intact raises MissingBlob, and the driver sends the unit again with it."""

    def __init__(
        self,
        target: StoreTarget,
        digests: tuple[str, ...],
        located: dict[str, Packed | str],
        values: dict[str, Any],
    ) -> None:
        self._target = target
        self._digests = digests
        self._located = located
        self._values = values

    def __getitem__(self, digest: str) -> Any:
        if digest in self._values:
            return self._values[digest]
        where = self._located[digest]  # KeyError: not one the unit declared
        store = worker_store(self._target)
        data = None if store is None else store.read(digest, where)
        if data is None:
            raise MissingBlob(digest, unseen=store is None)
        try:
            return loads(data)
        except CodecError:  # intact bytes, no value: the driver refuses them and recomputes
            raise MissingBlob(digest, unseen=False) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._digests)

    def __len__(self) -> int:
        return len(self._digests)


#: This worker process's store for the run (None: the folder is not seen at that path).
_stores: dict[StoreTarget, WorkerStore | None] = {}


def worker_store(target: StoreTarget | None) -> WorkerStore | None:
    """This process's store for the run, or None when it does not see the driver's cache
    folder at the driver's path (checked once per process and run, by the probe's token)."""
    if target is None:
        return None
    if target not in _stores:
        for old in _stores.values():  # a new run: the last one's pack is done with
            if old is not None:
                old.close()
        _stores.clear()
        try:
            seen = (Path(target.root) / target.probe).read_bytes() == target.run.encode("ascii")
        except OSError:
            seen = False
        _stores[target] = WorkerStore(target) if seen else None
    return _stores[target]
