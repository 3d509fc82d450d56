"""The stat pass of a rescan: every known folder and file of the table `stat`ed and compared
with its stored signature, split between the driver and a forked child on a machine with more
than one core (the table is shared copy-on-write; the child sends back only what moved).

It applies the policy the scan does (`projectfiles.py`) to what moved: a file that moved and is
now refused (larger than the limit, a link leading out), or an entry refused before that moved,
is reported as gone, so that its folder is listed again and the listing decides. A file
watcher's paths narrow the pass to those entries and their folders (`check_paths`)."""

from __future__ import annotations

import os
import stat as statmod
from collections.abc import Collection, Iterable

from .filetable import FileTable, Signature, signature_of
from .projectfiles import LINK_OUTSIDE, UNSAFE_NAME, ProjectFiles

PARALLEL_MIN_FILES = 20_000  # below this, forking costs more than it saves
GONE = Signature(-2, -2, -2, -2, -2)  # a row whose file vanished or is no longer a file


def check_signatures(files: ProjectFiles, old: FileTable) -> tuple[set[int], dict[int, Signature]]:
    """(folders whose mtime or inode moved or that vanished, file rows whose signature moved →
    the new signature or GONE), stat'ing in two processes when the table is large."""
    n = len(old.paths)
    if n >= PARALLEL_MIN_FILES and (os.cpu_count() or 1) > 1 and hasattr(os, "fork"):
        return check_forked(files, old)
    return check_range(files, old, 0, len(old.folders), 0, n)


def check_range(
    files: ProjectFiles, old: FileTable, f0: int, f1: int, r0: int, r1: int
) -> tuple[set[int], dict[int, Signature]]:
    return check_rows(files, old, range(f0, f1), range(r0, r1))


def check_paths(
    files: ProjectFiles, old: FileTable, paths: Iterable[str]
) -> tuple[set[int], dict[int, Signature]]:
    """What `check_signatures` finds, among only the entries a file watcher saw change (paths
    relative to the root): each known file among them, each known folder among them and the
    folder holding each. A path below a folder the table does not know (made since) stands for
    its nearest known ancestor, whose listing moved when the new folder was made."""
    index = {rel: i for i, rel in enumerate(old.folders)}
    folders: set[int] = set()
    rows: set[int] = set()
    for path in paths:
        path = path.strip("/")
        row = old.row(path)
        if row is not None:
            rows.add(row)
        if path + "/" in index:
            folders.add(index[path + "/"])
        parent = path.rpartition("/")[0]
        while parent and parent + "/" not in index:
            parent = parent.rpartition("/")[0]
        holder = index.get(parent + "/" if parent else "")
        if holder is not None:
            folders.add(holder)
    return check_rows(files, old, sorted(folders), sorted(rows))


def check_rows(
    files: ProjectFiles, old: FileTable, folders: Iterable[int], rows: Collection[int]
) -> tuple[set[int], dict[int, Signature]]:
    """(the folders among `folders` whose mtime or inode moved or that vanished, the rows among
    `rows` whose signature moved → the new signature or GONE)."""
    root = files.root
    moved: set[int] = set()
    lstat, stat = os.lstat, os.stat
    mt, ino = old.folder_mtime, old.folder_ino
    for i in folders:
        rel = old.folders[i]
        try:
            st = lstat(f"{root}/{rel}") if rel else stat(root)
        except OSError:
            moved.add(i)
            continue
        if st.st_mtime_ns != mt[i] or st.st_ino != ino[i] or not statmod.S_ISDIR(st.st_mode):
            moved.add(i)
    changed: dict[int, Signature] = {}
    c = old.columns
    size, mtime, ctime, inode, dev = c["size"], c["mtime"], c["ctime"], c["ino"], c["dev"]
    prefix = root + "/"
    paths = old.paths
    for r in rows:
        try:
            st = stat(prefix + paths[r])
        except OSError:
            changed[r] = GONE
            continue
        if (
            st.st_mtime_ns != mtime[r]
            or st.st_size != size[r]
            or st.st_ctime_ns != ctime[r]
            or st.st_ino != inode[r]
            or st.st_dev != dev[r]
        ):
            changed[r] = signature_of(st) if statmod.S_ISREG(st.st_mode) else GONE
    if old.refused:
        _check_refused(files, old, rows, changed)
    for r, sig in changed.items():
        if sig != GONE and sig.size > files.policy.max_size:
            changed[r] = GONE
    if not files.policy.follow_outside:
        for r, sig in changed.items():
            path = prefix + paths[r]
            if sig != GONE and os.path.islink(path) and files.leads_out(path) is not None:
                changed[r] = GONE
    return moved, changed


def _check_refused(
    files: ProjectFiles, old: FileTable, rows: Collection[int], changed: dict[int, Signature]
) -> None:
    """Refused entries among `rows`: unmoved ones are no change (a link that leads out is
    known by its own signature, not its target's); moved ones are listed again (GONE)."""
    for path, refusal in old.refused.items():
        r = old.row(path)
        if r is None or r not in rows:
            continue
        try:
            if refusal.kind in (LINK_OUTSIDE, UNSAFE_NAME):
                st = os.lstat(f"{files.root}/{path}")
            else:
                st = os.stat(f"{files.root}/{path}")
        except OSError:
            changed[r] = GONE
            continue
        if signature_of(st) == old.signature(r):
            changed.pop(r, None)
        else:
            changed[r] = GONE


def check_forked(files: ProjectFiles, old: FileTable) -> tuple[set[int], dict[int, Signature]]:
    """Half the stats in a forked child (a snapshot of this process: the table is shared
    copy-on-write), half here; the child sends back only what moved."""
    import msgpack

    half_rows, half_folders = len(old.paths) // 2, len(old.folders) // 2
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: stat, report, leave without running any cleanup
        status = 0
        try:
            os.close(read_end)
            moved, changed = check_range(
                files, old, half_folders, len(old.folders), half_rows, len(old.paths)
            )
            data = msgpack.packb([sorted(moved), [[r, *sig] for r, sig in changed.items()]])
            view = memoryview(data)
            while view:
                view = view[os.write(write_end, view) :]
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write_end)
    moved, changed = check_range(files, old, 0, half_folders, 0, half_rows)
    chunks = []
    with os.fdopen(read_end, "rb") as pipe:
        while chunk := pipe.read(1 << 20):
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    if status != 0:  # the child failed: check its half here instead
        more_moved, more_changed = check_range(
            files, old, half_folders, len(old.folders), half_rows, len(old.paths)
        )
    else:
        folders, rows = msgpack.unpackb(b"".join(chunks))
        more_moved = set(folders)
        more_changed = {r: Signature(*sig) for r, *sig in rows}
    moved |= more_moved
    changed.update(more_changed)
    return moved, changed
