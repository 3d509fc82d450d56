"""The stat cache: content digests remembered by (size, mtime_ns, inode), so unchanged files
are not read again."""

from __future__ import annotations

import errno
import os
import pickle
import stat
import time
from pathlib import Path

from ..hashing import digest_bytes, digest_file
from .atomic import atomic_write, seal, unseal


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
        payload = unseal(data)
        try:
            version, entries = pickle.loads(payload) if payload is not None else (None, None)
        except Exception:  # any damage at all: start over
            version, entries = None, None
        if version != self._VERSION or not isinstance(entries, dict):
            if self.log is not None:
                self.log.warning(
                    "cache.dropped", file=str(self.path), reason="stat cache unreadable"
                )
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
            atomic_write(self.path, seal(pickle.dumps((self._VERSION, self.entries), protocol=5)))
            self.dirty = False
