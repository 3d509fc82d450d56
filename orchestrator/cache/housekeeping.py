"""Keeping a cache folder bounded: figures per area, garbage collection, clearing."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path

from .atomic import TEMP_ABANDONED_SECONDS, TEMP_PREFIX

AREAS = ("cas", "ac", "stages", "stat")


def cache_stats(root: Path) -> dict:
    """Counts and bytes per area."""
    out = {}
    for area in AREAS:
        count = size = 0
        base = Path(root) / area
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


def collect_garbage(
    root: Path, max_bytes: int | None = None, max_age_days: float | None = None
) -> dict:
    """Drop blobs and actions older than `max_age_days`, then the least recently used
    until the cache is under `max_bytes`. Actions pointing at dropped blobs become misses."""
    now = time.time()
    files = []
    for area in ("cas", "ac", "stages"):
        base = Path(root) / area
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
                    if now - st.st_mtime > TEMP_ABANDONED_SECONDS:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(path)
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


def clear_cache(root: Path) -> None:
    """Delete the whole cache folder."""
    if Path(root).exists():
        shutil.rmtree(root)
