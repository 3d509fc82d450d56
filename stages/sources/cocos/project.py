"""The assets of a Creator project (and of the engine's built-ins) from their metas.

Every meta entry that is not a folder or a script is an asset with a URL: `db://assets/<path>`
for the project, `db://internal/<path>` for the engine's `editor/assets`, a sub-asset's being its
parent's URL, `/`, its name. Metas without their file, malformed metas and duplicate uuids are
reported and left out; the build goes on.
"""

from __future__ import annotations

import os
import posixpath
from typing import Any, NamedTuple

from orchestrator import record

from ..base import Problem
from .meta import MetaEntry, MetaFile
from .types import DIRECTORY, is_script

PROJECT_ASSETS = "assets"
PROJECT_URL = "db://assets"
ENGINE_URL = "db://internal"


@record
class AssetInfo(NamedTuple):
    """An asset as the Cocos source knows it (before it becomes an `Asset`)."""

    id: str
    importer: str
    url: str
    path: str  # the top asset's file, relative to the project (engine files through `../`)
    meta: str  # the meta file that declares it
    name: str  # a sub-asset's name; "" for a top asset
    parent: str  # "" for a top asset
    top: str  # the id of the top asset it belongs to (itself for a top asset)
    files: tuple[str, ...] | None
    user: dict[str, Any]
    builtin: bool  # an engine built-in (db://internal)


@record
class Folder(NamedTuple):
    """A folder with a meta (`importer: directory`)."""

    path: str
    url: str
    id: str
    user: dict[str, Any]


@record
class Catalog(NamedTuple):
    """Every asset by id (top assets before their sub-assets, in path order) and every folder."""

    assets: dict[str, AssetInfo]
    folders: dict[str, Folder]  # project folders by path
    scripts: frozenset[str]  # ids of scripts: named by `__uuid__` at times, never content
    by_path: dict[str, str]  # a top asset's path → its id


def url_of(path: str, engine: str) -> str:
    """The `db://` URL of a project path (`assets/…`) or an engine path (`<engine>/…`)."""
    if engine and path.startswith(engine + "/"):
        return f"{ENGINE_URL}/{path[len(engine) + 1 :]}"
    return f"{PROJECT_URL}/{path[len(PROJECT_ASSETS) + 1 :]}"


def build_catalog(
    metas: list[MetaFile], existing: set[str], root: str, engine: str, problems: list[Problem]
) -> Catalog:
    """Assets and folders from the metas, in path order; problems reported as found."""
    assets: dict[str, AssetInfo] = {}
    folders: dict[str, Folder] = {}
    scripts: set[str] = set()
    declared: dict[str, str] = {}  # uuid → the meta that declared it first
    by_path: dict[str, str] = {}
    folder_paths = _with_ancestors({posixpath.dirname(p) for p in existing})
    for meta in sorted(metas, key=lambda m: m.path):
        meta_path = meta.path + ".meta"
        if meta.problem is not None:
            problems.append(Problem("malformed_meta", meta_path, f"malformed meta: {meta.problem}"))
            continue
        top = meta.entries[0]
        if is_script(top.importer):
            # Code is never content, but references may name it: known even without its file.
            scripts.update(entry.id for entry in meta.entries)
        is_folder = top.importer == DIRECTORY
        present = meta.path in existing or (
            is_folder and (meta.path in folder_paths or os.path.isdir(f"{root}/{meta.path}"))
        )
        if not present:
            problems.append(
                Problem(
                    "orphan_meta", meta_path, f"the meta exists but {meta.path} does not: left out"
                )
            )
            continue
        if top.id in declared:
            problems.append(
                Problem(
                    "duplicate_uuid",
                    meta_path,
                    f"uuid {top.id} is also declared by {declared[top.id]}: this one is left out",
                )
            )
            continue
        declared[top.id] = meta_path
        url = url_of(meta.path, engine)
        if is_folder:
            folders[meta.path] = Folder(meta.path, url, top.id, top.user)
            continue
        if is_script(top.importer):
            continue
        by_path[meta.path] = top.id
        urls = {top.id: url}
        for entry in meta.entries:
            entry_url = urls[entry.parent] + "/" + entry.name if entry.parent else url
            urls[entry.id] = entry_url
            assets[entry.id] = _info(
                entry,
                entry_url,
                meta.path,
                meta_path,
                top.id,
                bool(engine) and meta.path.startswith(engine + "/"),
            )
    return Catalog(assets, folders, frozenset(scripts), by_path)


def _info(
    entry: MetaEntry, url: str, path: str, meta_path: str, top: str, builtin: bool
) -> AssetInfo:
    return AssetInfo(
        entry.id,
        entry.importer,
        url,
        path,
        meta_path,
        entry.name,
        entry.parent,
        top,
        entry.files,
        entry.user,
        builtin,
    )


def report_missing_metas(
    existing: set[str], metas: list[MetaFile], problems: list[Problem]
) -> None:
    """Files under `assets/` that Creator has not imported (no meta, so no uuid)."""
    declared = {meta.path for meta in metas}
    for path in sorted(existing):
        if (
            path.startswith(PROJECT_ASSETS + "/")
            and not path.endswith(".meta")
            and path not in declared
        ):
            problems.append(
                Problem(
                    "missing_meta", path, "no .meta file: Creator has not imported it (no uuid)"
                )
            )


def load_url(info: AssetInfo, catalog: Catalog) -> str:
    """The URL a bundle's `paths` are cut from: the top asset's without its file extension,
    then the sub-asset names (`…/4800.png/spriteFrame` → `…/4800/spriteFrame`)."""
    top = catalog.assets[info.top]
    stem = posixpath.splitext(top.url)[0] if posixpath.splitext(top.url)[1] else top.url
    return stem + info.url[len(top.url) :]


def _with_ancestors(folders: set[str]) -> set[str]:
    result: set[str] = set()
    for folder in folders:
        while folder and folder not in result:
            result.add(folder)
            folder = posixpath.dirname(folder)
    return result
