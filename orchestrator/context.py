"""What a stage sees of the run on the driver: the build file, the project tree, the output folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .cache import StatCache, atomic_write
from .config import Build
from .errors import ProjectError
from .hashing import digest_file
from .outcomes import StageReport
from .outputs import Ledger, OutputFolder
from .reads import to_posix
from .tree import Tree, TreeStore, scan
from .typing import FileEntry


class Context:
    """Driver-side services for stages: config sections, the file walk, digests, publishing."""

    def __init__(self, build: Build, stat_cache: StatCache, log, executor_name: str = "") -> None:
        self.build = build
        self.config = build.config
        self.root = to_posix(str(build.project_root))
        self.build_dir = build.dir
        self.output_dir = build.output_dir
        self.output_folder = OutputFolder(build.output_dir)
        self.ledger = Ledger(self.output_folder)
        self.cache_dir = build.cache_dir
        self.log = log
        self.stats = stat_cache
        self.executor_name = executor_name
        self.published: set[str] = set()
        self.rewritten: list[str] = []
        self.reports: list[StageReport] = []
        # digest of a stored unit result → the result (set by the scheduler; verified on read)
        self.load_result: Any = None
        self._walk: list | None = None
        self._tree: Tree | None = None
        self._tree_previous: Tree | None = None
        self._digests: dict[str, str | None] = {}
        self.begin_stage()

    def begin_stage(self) -> None:
        """Start recording what the next stage's driver code depends on (see cache/records.py)."""
        self.stage_reads: dict[str, str | None] = {}
        self.stage_listing = False
        self.stage_external: dict[str, str | None] = {}
        self.stage_published: set[str] = set()

    def section(self, name: str) -> Any:
        return self.build.section(name)

    # -- the project tree --------------------------------------------------------------------
    def tree(self) -> Tree:
        """This run's scan of the project tree (made once, from the last run's snapshot)."""
        if self._tree is None:
            root = str(self.build.project_root)
            skip = {str(p) for p in (self.output_dir, self.cache_dir)}
            self._tree_store = TreeStore(self.cache_dir, root, skip, self.log)
            self._tree_previous = self._tree_store.load()
            self._tree = scan(root, skip, self._tree_previous)
        return self._tree

    def save_tree(self) -> None:
        """Keep this run's scan for the next run (only if it says something new)."""
        if self._tree is not None:
            self._tree_store.save(self._tree, self._tree_previous)

    def walk(self) -> list:
        """Every file under the project root, sorted by path (links to folders not followed).

        The output and cache folders are skipped when they sit inside the project.
        """
        self.stage_listing = True
        if self._walk is None:
            entries = [
                FileEntry(path, sig[0], sig[1], sig[2]) for path, sig in self.tree().files.items()
            ]
            entries.sort()  # by path first: paths are unique
            self._walk = entries
        return self._walk

    def file_digest(self, relpath: str) -> str | None:
        """Content digest of a project file (None if absent), recorded as a read of the stage."""
        digest = self.digest_of(relpath)
        self.stage_reads[relpath] = digest
        return digest

    def digest_of(self, relpath: str) -> str | None:
        """Content digest of a project file (None if absent), remembered by stat signature."""
        if relpath not in self._digests:
            sig = self.tree().files.get(relpath)
            try:
                self._digests[relpath] = (
                    self.stats.digest_signed(relpath, sig)
                    if sig is not None
                    else self.stats.digest(relpath)
                )
            except OSError as exc:  # exists but cannot be read (permissions, I/O error)
                raise ProjectError(
                    f"cannot read: {exc.strerror}", file=f"{self.root}/{relpath}"
                ) from None
        return self._digests[relpath]

    def files_unchanged(self, reads: dict[str, str | None]) -> bool:
        """Whether every file has the digest given (None: absent), without recording reads.

        The whole-stage check of a no-op rerun: hundreds of thousands of paths, most of them
        already digested for an earlier stage of the same run.
        """
        known = self._digests
        for path, digest in reads.items():
            current = known[path] if path in known else self.digest_of(path)
            if current != digest:
                return False
        return True

    def track_file(self, path: str | os.PathLike) -> str | None:
        """Digest of a file outside the project that driver code reads (a rule file)."""
        key = str(Path(path).resolve())
        try:
            digest = digest_file(key)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            digest = None
        self.stage_external[key] = digest
        return digest

    # -- the output folder -------------------------------------------------------------------
    def output_path(self, relpath: str) -> Path:
        """The absolute path of an output file; refuses anything that would land outside
        (orchestrator/outputs.py)."""
        return self.output_folder.path(relpath)

    def mark_published(self, relpath: str) -> None:
        """Note an output file the stage found already right (so a later skip checks it too)."""
        self.output_path(relpath)
        self.ledger.record(relpath)
        self.published.add(relpath)
        self.stage_published.add(relpath)

    def publish_bytes(self, relpath: str, data: bytes) -> bool:
        """Write an output file atomically; an unchanged file is left alone (keeps its mtime)."""
        target = self.output_path(relpath)
        self.ledger.record(relpath)  # listed before it exists: `clean` finds every file
        self.published.add(relpath)
        self.stage_published.add(relpath)
        try:
            if target.stat().st_size == len(data) and target.read_bytes() == data:
                return False
        except FileNotFoundError:
            pass
        atomic_write(target, data)
        self.rewritten.append(relpath)
        return True
