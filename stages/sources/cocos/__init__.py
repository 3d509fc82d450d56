"""The Cocos Creator 3.x source (`source: cocos`, docs/cocos.md): a project's metas, sub-assets,
engine built-ins, dependencies, bundle folders with priorities, auto atlases."""

from __future__ import annotations

import os

from orchestrator import FileEntry, Reader, to_posix

from ..base import SourceResult
from .source import SOURCE, CocosSource, engine_options

__all__ = ["SOURCE", "CocosSource", "collect_cocos", "walk_project"]


def walk_project(root: str) -> list[FileEntry]:
    """Every file of the project, sorted, with stat signatures (what the collect stage walks)."""
    root = to_posix(os.path.abspath(root))
    entries = []
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        for name in names:
            full = os.path.join(folder, name)
            stat = os.stat(full)
            entries.append(
                FileEntry(
                    to_posix(os.path.relpath(full, root)),
                    stat.st_size,
                    stat.st_mtime_ns,
                    stat.st_ino,
                )
            )
    entries.sort(key=lambda entry: entry.path)
    return entries


def collect_cocos(
    root: str,
    engine: str | None = None,
    scenes: list[str] | None = None,
    internal: list[str] | None = None,
) -> SourceResult:
    """Plan, parse and assemble a Creator project in this process, reading from disk."""
    root = to_posix(os.path.abspath(root))
    options: dict = {"cocos": {"scenes": scenes, "internal": list(internal or [])}}
    if engine:
        options.update(engine_options(root, os.path.abspath(engine)))
    files = walk_project(root)
    units = SOURCE.plan(files, options)
    reader = Reader(root)
    parts = {unit.id: SOURCE.parse(unit, reader, options) for unit in units}
    return SOURCE.assemble(root, files, parts, options)
