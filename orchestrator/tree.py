"""The project tree between runs: every folder and file with its stat signature.

A no-op rerun should cost about what ninja pays, a `stat` per input file. Listing every folder
again (open, getdents, close: 100,000 folders for 100,000 resources) costs more than that, so,
like git's untracked cache, a folder is listed again only when its own mtime or inode moved:
creating, removing or renaming an entry updates the mtime of the folder that holds it. Files
are `stat`ed one by one, as ninja does.

`version` names the tree's state. It changes whenever the listing or any file's signature differs
from the previous snapshot, so a stage record made at the same version needs no per-file check
(scheduler.py). A folder or file modified within the clock's granularity of the scan is stored as
unknown, so a second change inside the same tick cannot hide behind an equal signature (git's
"racily clean" rule, with the stat cache's 2-second margin).
"""

from __future__ import annotations

import errno
import os
import pickle
import time
from pathlib import Path

from .cache import atomic_write, seal, unseal
from .errors import ProjectError
from .hashing import digest_value

RACY_NS = 2_000_000_000
_UNKNOWN = (-1, -1, -1)
_FORMAT = 2

# folder prefix ("" or "a/b/") → (mtime_ns, inode, file names, their signatures, sub-folder names);
# a signature is (size, mtime_ns, inode), the file's own (links followed)
Folder = tuple[int, int, tuple[str, ...], tuple[tuple[int, int, int], ...], tuple[str, ...]]


class Tree:
    """One scan of the project tree, made from the last one where folders did not move."""

    def __init__(
        self, folders: dict[str, Folder], version: str, racy: set[str], relisted: int = 0
    ) -> None:
        self.folders = folders
        self.version = version
        self.racy = racy  # file paths and folder prefixes too fresh to be trusted next time
        self.relisted = relisted  # folders listed again (their mtime moved, or they are new)
        self._files: dict[str, tuple[int, int, int]] | None = None

    @property
    def files(self) -> dict[str, tuple[int, int, int]]:
        """Project-relative path → signature, for every file (built on first use)."""
        if self._files is None:
            self._files = {
                rel + name: sig
                for rel, entry in self.folders.items()
                for name, sig in zip(entry[2], entry[3])
            }
        return self._files

    def covers(self, root: str, reads: dict[str, str | None]) -> bool:
        """Whether a change to any of these reads would change `version`: each file read is in
        the tree, and each file looked for and absent would appear in a folder the tree lists
        (not behind a folder link, nor in a skipped folder)."""
        files, folders = self.files, self.folders
        for path, digest in reads.items():
            if digest is not None:
                if path not in files:
                    return False
                continue
            parent = path.rpartition("/")[0]
            if (parent + "/" if parent else "") in folders:
                continue
            while parent:  # the first missing folder must be missing from a listed one
                missing, parent = parent, parent.rpartition("/")[0]
                if (parent + "/" if parent else "") in folders:
                    if os.path.lexists(f"{root}/{missing}"):
                        return False
                    break
        return True

    def snapshot(self) -> bytes:
        folders = self.folders
        if self.racy:
            folders = dict(folders)
            for rel, entry in self.folders.items():
                racy_names = [rel + name in self.racy for name in entry[2]]
                if rel in self.racy or any(racy_names):
                    sigs = tuple(
                        _UNKNOWN if racy else sig for racy, sig in zip(racy_names, entry[3])
                    )
                    mtime = -1 if rel in self.racy else entry[0]
                    folders[rel] = (mtime, entry[1], entry[2], sigs, entry[4])
        return pickle.dumps((_FORMAT, self.version, folders), protocol=5)


def scan(root: str, skip: set[str], previous: Tree | None) -> Tree:
    """The tree under `root` (links to folders not followed; folders in `skip` left out)."""
    old_folders = previous.folders if previous is not None else {}
    folders: dict[str, Folder] = {}
    racy: set[str] = set()
    relisted = 0
    changed = previous is None
    fresh_after = time.time_ns() - RACY_NS
    stat_path = os.stat
    stack = [""]
    while stack:
        rel = stack.pop()
        folder = f"{root}/{rel}" if rel else root
        try:
            st = stat_path(folder) if not rel else os.lstat(folder)
        except FileNotFoundError:  # removed while we looked: its parent's mtime tells next time
            changed = True
            continue
        if st.st_mtime_ns > fresh_after:
            racy.add(rel)
        old = old_folders.get(rel)
        entry = None
        if old is not None and old[0] == st.st_mtime_ns and old[1] == st.st_ino:
            names = old[2]
            prefix = f"{root}/{rel}"
            try:  # the common case, kept to one list comprehension per folder
                stats = [stat_path(prefix + name) for name in names]
            except OSError:  # a link whose target went away: look at each file
                stats = None
            if stats is not None:
                sigs = tuple([(s.st_size, s.st_mtime_ns, s.st_ino) for s in stats])
                if sigs == old[3]:
                    entry = (st.st_mtime_ns, st.st_ino, names, sigs, old[4])
        if entry is None:
            relisted += 1
            entry = _list(folder, rel, skip, st, racy, fresh_after)
            if old is None or old[2:] != entry[2:]:
                changed = True
        folders[rel] = entry
        stack.extend(f"{rel}{name}/" for name in entry[4])
    if len(folders) != len(old_folders):
        changed = True
    version = os.urandom(8).hex() if changed or previous is None else previous.version
    return Tree(folders, version, racy, relisted)


def _list(
    folder: str, rel: str, skip: set[str], st: os.stat_result, racy: set[str], fresh_after: int
) -> Folder:
    """List one folder: its regular files (links followed) with signatures, its sub-folders."""
    files: list[tuple[str, tuple[int, int, int]]] = []
    subfolders: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except PermissionError as exc:
        raise ProjectError(f"cannot list folder: {exc.strerror}", file=folder) from None
    except (FileNotFoundError, NotADirectoryError):
        return (st.st_mtime_ns, st.st_ino, (), (), ())
    for item in entries:
        if item.is_dir(follow_symlinks=False):
            if item.path not in skip:
                subfolders.append(item.name)
            continue
        try:
            if not item.is_file(follow_symlinks=True):
                continue
            fst = item.stat(follow_symlinks=True)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOENT):  # a link loop; gone
                continue
            raise ProjectError(f"cannot read: {exc.strerror}", file=item.path) from None
        files.append((item.name, (fst.st_size, fst.st_mtime_ns, fst.st_ino)))
        if fst.st_mtime_ns > fresh_after:
            racy.add(rel + item.name)
    files.sort()
    return (
        st.st_mtime_ns,
        st.st_ino,
        tuple(name for name, _ in files),
        tuple(sig for _, sig in files),
        tuple(sorted(subfolders)),
    )


class TreeStore:
    """Where the snapshot of one (project root, skipped folders) lives in the cache folder."""

    def __init__(self, cache_root: Path, root: str, skip: set[str], log=None) -> None:
        self.path = Path(cache_root) / "tree" / digest_value([root, sorted(skip)])[:32]
        self.log = log

    def load(self) -> Tree | None:
        try:
            data = self.path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        payload = unseal(data)
        try:
            fmt, version, folders = pickle.loads(payload or b"")
            if fmt != _FORMAT:
                raise ValueError("format")
        except Exception:  # any damage at all: scan from scratch (a full listing)
            if self.log is not None:
                self.log.warning(
                    "cache.dropped", file=str(self.path), reason="tree snapshot unreadable"
                )
            self.path.unlink(missing_ok=True)
            return None
        return Tree(folders, version, set())

    def save(self, tree: Tree, previous: Tree | None) -> None:
        """Write the snapshot unless the last one already says the same."""
        if (
            previous is not None
            and tree.version == previous.version
            and not tree.racy
            and not tree.relisted
        ):
            return
        atomic_write(self.path, seal(tree.snapshot()))
