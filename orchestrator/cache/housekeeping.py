"""Keeping a cache folder bounded: figures per area, garbage collection, clearing.

The areas: `cas` (blob files and packs), `actions` (the action database) and `state` (the
machine-local build states). `gc` drops what was unused for longer than the age bound from all
three, then the least recently used blobs and action entries until `cas` and `actions` fit the
size bound; the state of a checkout is only dropped by age (losing it costs that checkout a
full scan, not a rebuild). Callers hold the cache's lock exclusively (`lock.CacheLock`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from ..files.atomic import TEMP_ABANDONED_SECONDS, TEMP_PREFIX
from ..files.confined import ConfinedFolder
from .db import BUSY_TIMEOUT_MS

AREAS = ("cas", "actions", "state")
ACTIONS = "actions.sqlite"
ROW_OVERHEAD_BYTES = 64  # what SQLite spends per action row besides its fields
TEMPORARY = "tmp"  # the build's temporary files (custom-code workers' folders, a dry run's blobs)


@contextmanager
def temporary_files_in(root: Path) -> Iterator[None]:
    """While a build runs, this process's temporary files go to the cache folder's `tmp/`: a
    build writes nothing outside `output:` and `cache:` (what it makes there is removed with its
    maker; what a killed build leaves, `cache clear` removes). The folder is reached without
    following a link, as everything below the cache folder is."""
    ConfinedFolder(root, "cache folder").folder(TEMPORARY)
    before = tempfile.tempdir
    tempfile.tempdir = str(Path(root) / TEMPORARY)
    try:
        yield
    finally:
        tempfile.tempdir = before


class Candidate(NamedTuple):
    """Something gc may drop: a file, or an action row (stage, key, result)."""

    used: float  # seconds since the epoch
    size: int
    path: str = ""
    action: tuple[str, bytes, bytes] | None = None


def area_files(root: Path, area: str) -> list[Path]:
    """The files that make up an area of the cache."""
    root = Path(root)
    if area == "actions":
        return [p for p in (root / f"{ACTIONS}{s}" for s in ("", "-wal", "-shm")) if p.exists()]
    base = root / area
    return [Path(d, n) for d, _, names in os.walk(base) for n in names] if base.exists() else []


def cache_stats(root: Path) -> dict:
    """Files and bytes per area."""
    out = {}
    for area in AREAS:
        sizes = []
        for path in area_files(root, area):
            with contextlib.suppress(FileNotFoundError):
                sizes.append(path.stat().st_size)
        out[area] = {"files": len(sizes), "bytes": sum(sizes)}
    return out


def collect_garbage(
    root: Path,
    max_bytes: int | None = None,
    max_age_days: float | None = None,
    keep: frozenset[str] = frozenset(),
) -> dict:
    """Drop entries unused for `max_age_days`, then the least recently used until `cas` and
    `actions` are under `max_bytes`, but the blob files in `keep` (paths). An action whose
    blob was dropped is a miss next time."""
    root = Path(root)
    now = time.time()
    too_old = now - max_age_days * 86400 if max_age_days is not None else None
    before = sum(figures["bytes"] for figures in cache_stats(root).values())
    removed = 0
    if too_old is not None:
        for path in area_files(root, "state"):
            if path.suffix == ".sqlite" and _used(path) < too_old:
                for suffix in ("", "-wal", "-shm"):
                    _unlink(Path(f"{path}{suffix}"))
                removed += 1
    for _ in range(3):  # action sizes are estimates: check what the files say, and go again
        dropped = _drop_some(root, now, too_old, max_bytes, keep)
        removed += dropped
        if not dropped or max_bytes is None or _bounded_bytes(root) <= max_bytes:
            break
        too_old = None  # the age pass is done
    after = sum(figures["bytes"] for figures in cache_stats(root).values())
    return {
        "removed": removed,
        "freed_bytes": max(before - after, 0),
        "remaining_bytes": _bounded_bytes(root),
    }


def _drop_some(
    root: Path, now: float, too_old: float | None, max_bytes: int | None, keep: frozenset[str]
) -> int:
    """One pass: drop what is too old, then the oldest until the bounded areas fit (but what
    is kept)."""
    found = _blob_files(root, now)
    blobs = [blob for blob in found if blob.path not in keep]
    held = sum(blob.size for blob in found if blob.path in keep)  # counted, never dropped
    actions = _action_rows(root)
    estimated = sum(c.size for c in actions)
    if estimated:  # scale the row estimates to what the database file really takes
        scale = _bytes(root, "actions") / estimated
        actions = [c._replace(size=int(c.size * scale) + 1) for c in actions]
    candidates = sorted(blobs + actions, key=lambda c: c.used)
    total = held + sum(c.size for c in candidates)
    dropped_actions = []
    removed = 0
    for candidate in candidates:
        old = too_old is not None and candidate.used < too_old
        if not (old or (max_bytes is not None and total > max_bytes)):
            continue
        if candidate.action is not None:
            dropped_actions.append(candidate.action)
        else:
            _unlink(Path(candidate.path))
        total -= candidate.size
        removed += 1
    _drop_actions(root, dropped_actions)
    return removed


def _bytes(root: Path, area: str) -> int:
    return int(cache_stats(root)[area]["bytes"])


def _bounded_bytes(root: Path) -> int:
    """The bytes the size bound applies to (`cas` and `actions`)."""
    return _bytes(root, "cas") + _bytes(root, "actions")


def clear_cache(root: Path, keep: str = "lock") -> None:
    """Delete everything in the cache folder but its lock (which the caller holds)."""
    root = Path(root)
    if not root.exists():
        return
    for entry in root.iterdir():
        if entry.name == keep:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _used(path: Path) -> float:
    st = path.stat()
    return max(st.st_atime, st.st_mtime)


def _unlink(path: Path) -> int:
    try:
        size = path.stat().st_size
        path.unlink()
    except FileNotFoundError:
        return 0
    return size


def _blob_files(root: Path, now: float) -> list[Candidate]:
    found = []
    for path in area_files(root, "cas"):
        try:
            st = path.stat()
        except FileNotFoundError:
            continue
        if path.name.startswith(TEMP_PREFIX):
            # Another run may be about to rename it (the cache is shared): only the
            # leftovers of killed runs, old by any measure, are removed.
            if now - st.st_mtime > TEMP_ABANDONED_SECONDS:
                _unlink(path)
            continue
        found.append(Candidate(max(st.st_atime, st.st_mtime), st.st_size, str(path)))
    return found


def _connect(root: Path) -> sqlite3.Connection | None:
    folder = ConfinedFolder(root, "cache folder")
    if folder.lstat(ACTIONS) is None:
        return None
    path = folder.database(ACTIONS)  # neither it nor its journals a link
    return sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)


def _action_rows(root: Path) -> list[Candidate]:
    db = _connect(root)
    if db is None:
        return []
    try:
        rows = db.execute(
            "SELECT stage, key, result, stamp, length(reads) + length(result) + length(key) "
            "FROM actions"
        ).fetchall()
    except sqlite3.DatabaseError:
        return []  # a damaged database is set aside by the next run that opens it
    finally:
        db.close()
    return [
        Candidate(stamp / 1e9, size + ROW_OVERHEAD_BYTES, action=(stage, bytes(key), bytes(res)))
        for stage, key, res, stamp, size in rows
    ]


def _drop_actions(root: Path, actions: list[tuple[str, bytes, bytes]]) -> None:
    """Delete action rows and give the space back to the file system."""
    if not actions:
        return
    db = _connect(root)
    if db is None:
        return
    try:
        db.execute("BEGIN IMMEDIATE")
        db.executemany("DELETE FROM actions WHERE stage = ? AND key = ? AND result = ?", actions)
        db.execute("COMMIT")
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.DatabaseError:
        pass  # a damaged database is set aside by the next run that opens it
    finally:
        db.close()


def taken_blobs(state_files: Iterable[Path]) -> set[str]:
    """The blobs the build states in these files hold taken stages' rows in (cache/taken.py:
    what `cache gc` keeps), read as they are, without checks (a blob kept too many costs only
    its bytes)."""
    found: set[str] = set()
    for path in state_files:
        try:
            db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
        except sqlite3.Error:
            continue
        try:
            found.update(str(blob) for (blob,) in db.execute("SELECT DISTINCT blob FROM taken"))
        except sqlite3.Error:  # another release's layout, or damaged: it names no blob
            pass
        finally:
            db.close()
    return found
