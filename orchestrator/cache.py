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
import os
import pickle
import shutil
import socket
import stat
import time
import zlib
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


def line_checksum(data: bytes) -> bytes:
    """8 hex of CRC-32: enough to catch a torn or damaged log line, and a lookup verifies one per
    unit of a 100,000-unit stage (the results it points to are verified by their digest)."""
    return b"%08x" % zlib.crc32(data)


def append_lines(path: Path, data: bytes) -> None:
    """Append whole lines with one `write` on an O_APPEND file, so concurrent writers interleave
    whole lines; a line torn by a killed run is ended first, or ours would join it."""
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        os.write(fd, data)
    finally:
        os.close(fd)


@dataclass
class ActionEntry:
    reads: list  # [path, digest or None] pairs, sorted by path
    result: str


def _safe_name(stage: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in stage) or "_"


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

    def __init__(self, path: Path, cache: "Cache") -> None:
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
                self._cache.log.warning("cache.dropped", file=str(self.path),
                                        reason="a damaged action line was skipped")
            return None

    def get(self, key: str) -> list[ActionEntry]:
        """The newest entries of `key` (distinct results, at most a few), parsed now: a run
        looks each key up once."""
        if self._raw is None:
            self._load()
        entries: list[ActionEntry] = []
        for line in reversed(self._raw.get(key.encode("ascii"), ())):
            entry = self._parse(line)
            try:
                action = ActionEntry(entry["r"], entry["d"])
            except (TypeError, KeyError):
                continue  # damaged (already counted) or not an entry
            if all(e.result != action.result for e in entries):
                entries.append(action)
            if len(entries) == _ENTRIES_PER_KEY:
                break
        return entries

    def last(self, unit_digest: str) -> dict | None:
        """The key components the unit had when it last ran (for --explain)."""
        if self._raw is None:
            self._load()
        line = self._raw_unit.get(unit_digest.encode("ascii"))
        entry = self._parse(line) if line is not None else None
        return (entry.get("c") or {}) if isinstance(entry, dict) else None

    def append(self, key: str, reads: dict[str, str | None], result: str,
               unit: str | None = None, components: dict | None = None) -> None:
        """Log a new entry. It is not kept in memory: a run looks each key up before it runs the
        unit, and the entries it found then stay valid (a later run reads the new one)."""
        document = {"r": sorted(reads.items()), "d": result}
        if unit is not None:
            document["c"] = components or {}
        rest = b" ".join((key.encode("ascii"), (unit or "-").encode("ascii"),
                          orjson.dumps(document)))
        line = line_checksum(rest) + b" " + rest
        self._pending.append(line + b"\n")
        if (len(self._pending) >= self.FLUSH_EVERY
                or time.monotonic() - self._last_flush > self.FLUSH_SECONDS):
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
        self._cache.packs.flush()  # the results these entries point to go first
        data = b"".join(self._pending)
        self._pending.clear()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        append_lines(self.path, data)
        self._lines += data.count(b"\n")


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
        self._readers: dict[str, int] = {}

    def close_readers(self) -> None:
        for fd in self._readers.values():
            os.close(fd)
        self._readers.clear()

    def _load(self) -> dict[str, tuple[str, int, int] | bytes]:
        """Digest → its index line (checked when first used) or (pack, offset, length)."""
        if self._index is None:
            index: dict[str, tuple[str, int, int] | bytes] = {}
            try:
                data = (self.folder / "index.log").read_bytes()
            except (FileNotFoundError, NotADirectoryError):
                data = b""
            for line in data.split(b"\n"):
                fields = line.split(b" ", 2)
                if len(fields) == 3:
                    index[fields[1].decode("ascii", "replace")] = line
            self._index = index
        return self._index

    def _where(self, digest: str) -> tuple[str, int, int] | None:
        index = self._load()
        found = index.get(digest)
        if isinstance(found, bytes):  # checked only for the digests a run asks for
            check, _, body = found.partition(b" ")
            fields = body.split(b" ")
            try:
                if line_checksum(body) != check or len(fields) != 4:
                    raise ValueError("a torn or damaged line")
                found = (fields[1].decode("ascii"), int(fields[2]), int(fields[3]))
            except (ValueError, UnicodeDecodeError):
                found = None
            if found is None:
                del index[digest]
            else:
                index[digest] = found
        return found

    def has(self, digest: str) -> bool:
        if digest in self._bad:
            return False
        found = self._where(digest)
        if found is None:
            return False
        pack = found[0]
        if pack not in self._present:
            self._present[pack] = pack == self._name or (self.folder / pack).exists()
        return self._present[pack]

    def get(self, digest: str) -> bytes | None:
        """The blob's bytes if a pack holds it; CacheCorrupt if the pack's copy is damaged."""
        found = None if digest in self._bad else self._where(digest)
        if found is None:
            return None
        pack, offset, length = found
        if pack == self._name:
            self._writer.flush()
        fd = self._readers.get(pack)
        if fd is None:  # one descriptor per pack for the run: finish reads 100,000 results
            if len(self._readers) >= 64:
                self.close_readers()
            try:
                fd = self._readers[pack] = os.open(self.folder / pack, os.O_RDONLY)
            except FileNotFoundError:
                return None
        data = os.pread(fd, length, offset)
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
        if digest not in self._bad and self.has(digest):
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
        self._pending.append(line_checksum(body.encode("ascii")) + f" {body}\n".encode("ascii"))
        if len(self._pending) >= self.FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            append_lines(self.folder / "index.log", data)


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
        self._entries: dict[str, tuple[int, int, int, str]] | None = None
        self.dirty = False
        self.hashed = 0

    @property
    def entries(self) -> dict[str, tuple[int, int, int, str]]:
        """Loaded on first use: a no-op rerun whose tree did not move never needs a digest."""
        if self._entries is None:
            self._entries = {}
            self._load()
        return self._entries

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
        self._entries = entries

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
