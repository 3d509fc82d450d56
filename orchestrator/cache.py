"""The cache: a content-addressed blob store, an action index and a stat cache.

Layout under the cache folder:
  cas/<2 hex>/<digest>      large blobs, named by the BLAKE3 of their bytes (verified on read)
  cas/packs/*.pack, index.log   small blobs, appended per run, found through a checksummed index
  ac/<stage>.log            action logs: key → files read with their digests → result digest,
                            with the key components --explain compares
  stages/<scope>/<stage>    whole-stage records (memo.py)
  stat/<root digest>        (path → size, mtime_ns, inode, digest) for one project checkout

Files are written to a temporary sibling and renamed into place; logs, packs and the pack index
are appended to in whole checksummed lines or verified ranges. So a reader never trusts a partial
entry, and concurrent writers of one key (same content by construction) are harmless. Anything that
fails verification is dropped and treated as absent.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
import pickle
import shutil
import socket
import stat
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from .errors import CacheCorrupt
from .hashing import digest_bytes, digest_file

_ENTRIES_PER_KEY = 4
TEMP_PREFIX = ".tmp-"  # atomic_write's temporary files; a killed run may leave some behind
_TEMP_ABANDONED_SECONDS = 24 * 3600  # a temporary file this old belongs to no live run


_known_folders: set[str] = set()
_temp_counter = itertools.count()
# A killed run's leftover `.tmp-<host>-<pid>-<n>` must not collide with a later process that
# reuses its pid (containers restart at the same small pids): a random token per process too.
_TEMP_TOKEN = os.urandom(4).hex()


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary sibling and a rename.

    The temporary name is unique per process and call (pid, counter), so concurrent writers —
    other threads, processes or machines sharing the folder — never share one; it is cheaper
    than `mkstemp`, which matters at one write per unit of work.
    """
    parent = os.path.dirname(path)
    if parent not in _known_folders:
        os.makedirs(parent, exist_ok=True)
        _known_folders.add(parent)
    tmp = (f"{parent}/{TEMP_PREFIX}{socket.gethostname()}-{os.getpid()}-{_TEMP_TOKEN}-"
           f"{next(_temp_counter)}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileNotFoundError:  # the folder was removed behind our back (cache clear)
        _known_folders.discard(parent)
        os.makedirs(parent, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _sealed(payload: bytes) -> bytes:
    """Prefix a payload with its digest so truncation or bit rot is detected on read."""
    return digest_bytes(payload).encode("ascii") + b"\n" + payload


def _unseal(data: bytes) -> bytes | None:
    head, sep, payload = data.partition(b"\n")
    if not sep or head != digest_bytes(payload).encode("ascii"):
        return None
    return payload


@dataclass
class ActionEntry:
    reads: list[tuple[str, str | None]]
    result: str


def _safe_name(stage: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in stage) or "_"


class ActionLog:
    """One stage's action entries: an append-only log, like ninja's build log.

    A line is `<16 hex of its checksum> <json>`: {"k": key, "r": reads, "d": result digest,
    "u": unit digest, "c": key components for --explain}. Loading keeps the newest entries per
    key; a damaged or truncated line (a killed run, two machines appending over a network file
    system) fails its checksum and is skipped — it only costs a recomputation. New entries are
    appended in batches with one `write` on an O_APPEND file, so concurrent runs interleave whole
    lines. One file per stage means a rerun reads the stage's entries in one go instead of
    opening a file per unit.
    """

    FLUSH_EVERY = 256
    FLUSH_SECONDS = 2.0

    def __init__(self, path: Path, cache: "Cache") -> None:
        self.path = path
        self._cache = cache
        self._by_key: dict[str, list[ActionEntry]] | None = None
        self._by_unit: dict[str, dict] = {}
        self._pending: list[bytes] = []
        self._last_flush = time.monotonic()
        self._lines = 0

    def _load(self) -> None:
        by_key: dict[str, list[ActionEntry]] = {}
        try:
            data = self.path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            data = b""
        damaged = 0
        for line in data.split(b"\n"):
            if not line:
                continue
            self._lines += 1
            check, _, payload = line.partition(b" ")
            try:
                if digest_bytes(payload)[:16].encode("ascii") != check:
                    raise ValueError("checksum")
                entry = orjson.loads(payload)
                action = ActionEntry([tuple(r) for r in entry["r"]], entry["d"])
                key = entry["k"]
            except (ValueError, KeyError, TypeError, orjson.JSONDecodeError):
                damaged += 1
                continue
            entries = by_key.setdefault(key, [])
            entries[:] = [action] + [e for e in entries if e.result != action.result]
            del entries[_ENTRIES_PER_KEY:]
            if entry.get("u"):
                self._by_unit[entry["u"]] = entry.get("c") or {}
        if damaged:
            self._cache.corrupt_dropped += damaged
            if self._cache.log is not None:
                self._cache.log.warning("cache.dropped", file=str(self.path),
                                        reason=f"{damaged} damaged action line(s) skipped")
        self._by_key = by_key

    def get(self, key: str) -> list[ActionEntry]:
        if self._by_key is None:
            self._load()
        return self._by_key.get(key, [])

    def last(self, unit_digest: str) -> dict | None:
        """The key components the unit had when it last ran (for --explain)."""
        if self._by_key is None:
            self._load()
        return self._by_unit.get(unit_digest)

    def append(self, key: str, reads: dict[str, str | None], result: str,
               unit: str | None = None, components: dict | None = None) -> None:
        if self._by_key is None:
            self._load()
        action = ActionEntry(sorted(reads.items()), result)
        entries = self._by_key.setdefault(key, [])
        entries[:] = [action] + [e for e in entries if e.result != result][: _ENTRIES_PER_KEY - 1]
        document = {"k": key, "r": action.reads, "d": result}
        if unit is not None:
            document.update(u=unit, c=components or {})
            self._by_unit[unit] = components or {}
        payload = orjson.dumps(document)
        self._pending.append(digest_bytes(payload)[:16].encode("ascii") + b" " + payload + b"\n")
        if (len(self._pending) >= self.FLUSH_EVERY
                or time.monotonic() - self._last_flush > self.FLUSH_SECONDS):
            self.flush()

    def flush(self) -> None:
        self._last_flush = time.monotonic()
        if not self._pending:
            return
        self._cache.packs.flush()  # the results these entries point to go first
        data = b"".join(self._pending)
        self._pending.clear()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            lines = data.count(b"\n")
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # end a line torn by a killed run: ours must not join it
            os.write(fd, data)
        finally:
            os.close(fd)
        self._lines += lines


LARGE_BLOB_BYTES = 1 << 20


class BlobPacks:
    """Small blobs, appended to one pack file per run and found through an append-only index.

    Each run writes its own pack (`<host>-<pid>-<ns>.pack`), so concurrent runs never write to
    the same pack; the shared `index.log` gets whole checksummed lines (`digest pack offset
    length`) with O_APPEND, after the pack bytes they point to are flushed. Every read is verified
    against the digest: a damaged pack or index line only costs a recomputation. A pack that `gc`
    removed leaves index lines that point nowhere: those blobs are simply absent.
    """

    FLUSH_EVERY = 512

    def __init__(self, folder: Path, cache: "Cache") -> None:
        self.folder = folder
        self._cache = cache
        self._index: dict[str, tuple[str, int, int]] | None = None
        self._bad: set[str] = set()
        self._present: dict[str, bool] = {}  # pack name → exists (gc may have removed it)
        self._writer = None
        self._name = ""
        self._pending: list[bytes] = []

    def _load(self) -> dict[str, tuple[str, int, int]]:
        if self._index is None:
            index: dict[str, tuple[str, int, int]] = {}
            try:
                data = (self.folder / "index.log").read_bytes()
            except (FileNotFoundError, NotADirectoryError):
                data = b""
            for line in data.split(b"\n"):
                fields = line.split(b" ")
                if len(fields) != 5:
                    continue
                check, digest, pack, offset, length = (f.decode("ascii", "replace") for f in fields)
                if digest_bytes(" ".join((digest, pack, offset, length)).encode())[:8] != check:
                    continue  # a torn or damaged line
                index[digest] = (pack, int(offset), int(length))
            self._index = index
        return self._index

    def has(self, digest: str) -> bool:
        if digest in self._bad:
            return False
        found = self._load().get(digest)
        if found is None:
            return False
        pack = found[0]
        if pack not in self._present:
            self._present[pack] = pack == self._name or (self.folder / pack).exists()
        return self._present[pack]

    def get(self, digest: str) -> bytes | None:
        """The blob's bytes if a pack holds it; CacheCorrupt if the pack's copy is damaged."""
        found = None if digest in self._bad else self._load().get(digest)
        if found is None:
            return None
        pack, offset, length = found
        if pack == self._name:
            self._writer.flush()
        try:
            with open(self.folder / pack, "rb") as handle:
                handle.seek(offset)
                data = handle.read(length)
        except FileNotFoundError:
            return None
        if len(data) != length or digest_bytes(data) != digest:
            self._bad.add(digest)
            self._cache.corrupt_dropped += 1
            if self._cache.log is not None:
                self._cache.log.warning("cache.dropped", file=str(self.folder / pack),
                                        reason=f"blob {digest[:12]} does not match its digest")
            raise CacheCorrupt(f"blob {digest[:12]} was corrupt and has been dropped")
        return data

    def put(self, digest: str, data: bytes) -> None:
        index = self._load()
        if digest in index and digest not in self._bad and self.has(digest):
            try:  # a copy that is there may be damaged: only a verified one spares the write
                if self.get(digest) == data:
                    return
            except CacheCorrupt:
                pass
        if self._writer is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._name = f"{socket.gethostname()}-{os.getpid()}-{time.time_ns()}.pack"
            self._writer = open(self.folder / self._name, "ab")
        offset = self._writer.tell()
        self._writer.write(data)
        index[digest] = (self._name, offset, len(data))
        self._bad.discard(digest)
        body = f"{digest} {self._name} {offset} {len(data)}"
        self._pending.append(f"{digest_bytes(body.encode())[:8]} {body}\n".encode("ascii"))
        if len(self._pending) >= self.FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            fd = os.open(self.folder / "index.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)


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
            self._drop(path, f"blob {digest[:12]} does not match its digest")
            raise CacheCorrupt(f"blob {digest[:12]} was corrupt and has been dropped")
        return data

    # -- action logs -------------------------------------------------------------------------
    def actions(self, stage: str) -> "ActionLog":
        """The action log of one stage (opened once per cache object)."""
        if stage not in self._logs:
            self._logs[stage] = ActionLog(self.root / "ac" / f"{_safe_name(stage)}.log", self)
        return self._logs[stage]

    def get_actions(self, key: str, stage: str = "_") -> list[ActionEntry]:
        return self.actions(stage).get(key)

    def put_action(self, key: str, reads: dict[str, str | None], result: str,
                   stage: str = "_") -> None:
        log = self.actions(stage)
        log.append(key, reads, result)
        log.flush()

    def flush(self) -> None:
        """Make everything written so far durable for the next run (packs before the logs
        that point into them)."""
        self.packs.flush()
        for log in self._logs.values():
            log.flush()

    # -- housekeeping ------------------------------------------------------------------------
    def _drop(self, path: Path, why: str) -> None:
        self.corrupt_dropped += 1
        if self.log is not None:
            self.log.warning("cache.dropped", file=str(path), reason=why)
        try:
            path.unlink()
        except FileNotFoundError:
            pass

    def stats(self) -> dict:
        """Counts and bytes per area."""
        out = {}
        for area in ("cas", "ac", "stages", "stat"):
            count = size = 0
            base = self.root / area
            if base.exists():
                for dirpath, _, names in os.walk(base):
                    for name in names:
                        try:
                            size += os.stat(os.path.join(dirpath, name)).st_size
                            count += 1
                        except FileNotFoundError:
                            pass
            out[area] = {"files": count, "bytes": size}
        return out

    def gc(self, max_bytes: int | None = None, max_age_days: float | None = None) -> dict:
        """Drop blobs and actions older than `max_age_days`, then the least recently used
        until the cache is under `max_bytes`. Actions pointing at dropped blobs become misses."""
        now = time.time()
        files = []
        for area in ("cas", "ac", "stages"):
            base = self.root / area
            if not base.exists():
                continue
            for dirpath, _, names in os.walk(base):
                for name in names:
                    path = os.path.join(dirpath, name)
                    try:
                        st = os.stat(path)
                    except FileNotFoundError:
                        continue
                    if name.startswith(TEMP_PREFIX):
                        # Another run may be about to rename it (the cache is shared): only
                        # the leftovers of killed runs, old by any measure, are removed.
                        if now - st.st_mtime > _TEMP_ABANDONED_SECONDS:
                            try:
                                os.unlink(path)
                            except FileNotFoundError:
                                pass
                        continue
                    files.append((max(st.st_atime, st.st_mtime), st.st_size, path))
        files.sort()
        total = sum(size for _, size, _ in files)
        removed = freed = 0
        for used, size, path in files:
            too_old = max_age_days is not None and now - used > max_age_days * 86400
            too_big = max_bytes is not None and total > max_bytes
            if not (too_old or too_big):
                continue
            try:
                os.unlink(path)
            except FileNotFoundError:
                continue
            total -= size
            removed += 1
            freed += size
        return {"removed": removed, "freed_bytes": freed, "remaining_bytes": total}

    def clear(self) -> None:
        if self.root.exists():
            shutil.rmtree(self.root)


class StatCache:
    """Remembers content digests by (size, mtime_ns, inode) so unchanged files are not re-read."""

    _VERSION = 1

    def __init__(self, cache_root: Path, project_root: str, log=None) -> None:
        self.path = Path(cache_root) / "stat" / digest_bytes(project_root.encode("utf-8"))[:32]
        self.project_root = project_root
        self.log = log
        self.entries: dict[str, tuple[int, int, int, str]] = {}
        self.dirty = False
        self.hashed = 0
        self._load()

    def _load(self) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        payload = _unseal(data)
        try:
            version, entries = pickle.loads(payload) if payload is not None else (None, None)
        except Exception:  # any damage at all: start over
            version, entries = None, None
        if version != self._VERSION or not isinstance(entries, dict):
            if self.log is not None:
                self.log.warning("cache.dropped", file=str(self.path), reason="stat cache unreadable")
            self.path.unlink(missing_ok=True)
            return
        self.entries = entries

    def digest(self, relpath: str, st: os.stat_result | None = None) -> str | None:
        """Content digest of a project file, or None when it does not exist."""
        abspath = f"{self.project_root}/{relpath}"
        if st is None:
            try:
                st = os.stat(abspath)
            except (FileNotFoundError, NotADirectoryError):
                return None
            except OSError as exc:
                if exc.errno == errno.ELOOP:  # a symbolic link loop names no file
                    return None
                raise
        if not stat.S_ISREG(st.st_mode):  # a folder, FIFO or device is no file (as for Reader)
            return None
        signature = (st.st_size, st.st_mtime_ns, st.st_ino)
        known = self.entries.get(relpath)
        if known is not None and known[:3] == signature:
            return known[3]
        digest = digest_file(abspath)
        self.hashed += 1
        # A file modified within the clock's granularity could change again unseen: don't trust it.
        if time.time_ns() - st.st_mtime_ns > 2_000_000_000:
            self.entries[relpath] = (*signature, digest)
            self.dirty = True
        return digest

    def digest_signed(self, relpath: str, signature: tuple[int, int, int]) -> str | None:
        """Like `digest`, for a regular file whose stat signature the caller already has."""
        known = self.entries.get(relpath)
        if known is not None and known[:3] == signature:
            return known[3]
        return self.digest(relpath)

    def save(self) -> None:
        if self.dirty:
            atomic_write(self.path, _sealed(pickle.dumps((self._VERSION, self.entries), protocol=5)))
            self.dirty = False
