"""The Cocos Creator 3.x asset source (`source: cocos`): plan, parse and assemble.

Parse units are a folder's files with their metas (project `assets/` and the engine's
`editor/assets`), plus the project settings. Assembling makes the assets (ids `uuid` and
`uuid@sub`, URLs `db://assets/…` and `db://internal/…`), their references, the bundles the metas
declare with their priorities and roots, and the auto atlases.
"""

from __future__ import annotations

import os
import posixpath
from collections import deque
from typing import Any

from orchestrator import FileEntry, to_posix
from stages.algorithms.priority import PRIORITY
from stages.settings import ENGINE_ASSETS, cocos_engine_path

from ..base import HARD, RESOURCE, WORLD, Asset, PackHook, ParseUnit, Problem, Ref, SourceResult
from .atlas_plan import plan_atlases
from .bundles import INTERNAL, bundle_folders, collect_bundles
from .deps import Dependencies
from .index import CocosIndex
from .meta import MetaFile
from .project import (
    PROJECT_ASSETS,
    AssetInfo,
    Catalog,
    build_catalog,
    load_url,
    report_missing_metas,
)
from .refine import TARGET, PackData
from .scan import PROJECT_SETTINGS, FileScan, SettingsScan, scan_settings, scan_unit
from .types import is_serialized, runtime_type

DEFAULT_BATCH = 256
DEFAULT_COOKER = "copy"  # Creator ships imported files as they are; the cook copies them
ASSEMBLY = "cc"  # link.xml: the engine's namespace (Cocos has no code stripping of its own)


class CocosSource:
    """One module-level instance (SOURCE) so it pickles by reference."""

    name = "cocos"
    version = 1
    shared_dependencies = PRIORITY  # Creator's rule, unless the build file names another

    def configure(self, ctx) -> dict:
        """What the source reads of the build beyond `collect`: the `cocos` section, and the
        engine's built-in assets as a path relative to the project plus their listing."""
        cocos = ctx.section("cocos") or {}
        options: dict[str, Any] = {
            "cocos": {"scenes": cocos.get("scenes"), "internal": list(cocos.get("internal") or [])}
        }
        engine = cocos_engine_path(ctx.build)
        if engine is not None:
            options.update(engine_options(ctx.root, str(engine)))
        return options

    def plan(self, files: list[FileEntry], options: dict) -> list[ParseUnit]:
        batch = int(options.get("batch_size", DEFAULT_BATCH))
        units = [ParseUnit(id="cocos:settings", kind="settings", files=(PROJECT_SETTINGS,))]
        project = [e.path for e in files if is_project_file(e.path)]
        units += _folder_units("cocos:", project, batch)
        units += _folder_units("cocos:engine:", list(options.get("_engine_files", ())), batch)
        return units

    def parse(self, unit: ParseUnit, reader, options: dict) -> Any:
        if unit.kind == "settings":
            return scan_settings(reader)
        return scan_unit(unit.files, reader)

    def assemble(
        self, root: str, files: list[FileEntry], parts: dict[str, Any], options: dict
    ) -> SourceResult:
        return assemble(to_posix(os.path.abspath(root)), files, parts, options)


SOURCE = CocosSource()


def engine_options(root: str, engine: str) -> dict:
    """`engine`: the built-in assets folder relative to the project (so keys do not depend on
    where the checkout is); `_engine_files`: every file in it, by that relative path."""
    assets = os.path.join(engine, *ENGINE_ASSETS)
    relative = to_posix(os.path.relpath(assets, root))
    listing = []
    for folder, dirs, names in os.walk(assets):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in names:
            if not name.startswith("."):
                rel = to_posix(os.path.relpath(os.path.join(folder, name), assets))
                listing.append(f"{relative}/{rel}")
    return {"engine": relative, "_engine_files": tuple(sorted(listing))}


def is_project_file(path: str) -> bool:
    """Files of `assets/` that Creator imports (hidden files and folders are not)."""
    return path.startswith(PROJECT_ASSETS + "/") and not any(
        part.startswith(".") for part in path.split("/")
    )


def _folder_units(prefix: str, paths: list[str], batch: int) -> list[ParseUnit]:
    """One unit per folder (split past `batch` assets), a file and its meta always together."""
    by_folder: dict[str, dict[str, list[str]]] = {}
    for path in paths:
        key = path[: -len(".meta")] if path.endswith(".meta") else path
        by_folder.setdefault(posixpath.dirname(key), {}).setdefault(key, []).append(path)
    units = []
    for folder in sorted(by_folder):
        keys = sorted(by_folder[folder])
        for start in range(0, len(keys), batch):
            chunk = tuple(
                p for k in keys[start : start + batch] for p in sorted(by_folder[folder][k])
            )
            suffix = f"#{start // batch}" if start else ""
            units.append(ParseUnit(id=f"{prefix}{folder}{suffix}", kind="files", files=chunk))
    return units


# -- assembling ----------------------------------------------------------------------------------


def assemble(
    root: str, files: list[FileEntry], parts: dict[str, Any], options: dict
) -> SourceResult:
    problems: list[Problem] = []
    metas: list[MetaFile] = []
    scans: dict[str, FileScan] = {}
    settings = SettingsScan("", "", None)
    for unit_id in sorted(parts):
        part = parts[unit_id]
        if isinstance(part, SettingsScan):
            settings = part
            continue
        for scan in part:
            if isinstance(scan, MetaFile):
                metas.append(scan)
            else:
                scans[scan.path] = scan
    if settings.problem:
        problems.append(Problem("malformed_settings", PROJECT_SETTINGS, settings.problem))
    project_files = {e.path for e in files if is_project_file(e.path)}
    engine = options.get("engine", "")
    existing = project_files | set(options.get("_engine_files", ()))
    catalog = build_catalog(metas, existing, root, engine, problems)
    report_missing_metas(project_files, [m for m in metas if not m.path.startswith("..")], problems)
    for path in sorted(scans):
        if scans[path].problem:
            problems.append(
                Problem(
                    "malformed_json", path, f"cannot read its references: {scans[path].problem}"
                )
            )
    refs, unresolved = _references(catalog, scans, problems)
    folders = bundle_folders(catalog, problems)
    bundles = collect_bundles(catalog, folders, settings, options.get("cocos") or {}, problems)
    reached = _reach([a for ids in bundles.roots.values() for a in ids], refs)
    planned = plan_atlases(catalog.assets, refs, reached, problems)
    assets = {info.id: _asset(info, refs[info.id]) for info in catalog.assets.values()}
    assets.update(planned.assets)
    scenes = [a for a in bundles.roots["main"] if catalog.assets[a].importer == "scene"]
    settings_roots = [a for a in bundles.roots["main"] if a not in scenes]
    atlas_roots = [
        a
        for atlas in planned.atlases
        for a in [f.id for f in atlas.frames]
        + [i for page in atlas.pages for i in (page.image, page.texture)]
    ]
    index = CocosIndex(
        urls={i: a.virtual_paths[0] for i, a in assets.items()},
        paths={i: a.files[0] for i, a in assets.items() if a.files},
        scripts=catalog.scripts,
        folders=frozenset(f.id for f in catalog.folders.values()),
        orphans=frozenset(),
        unresolved=unresolved,
        bundle_folders={f.name: f.path for f in folders},
        atlas_frames=frozenset(f.id for atlas in planned.atlases for f in atlas.frames),
        atlas_folders=frozenset(
            posixpath.dirname(i.path)
            for i in catalog.assets.values()
            if i.importer == "auto-atlas" and not i.builtin
        ),
    )
    hook = PackHook(
        TARGET,
        PackData(
            folders=bundles.folders,
            load_urls={
                a: load_url(catalog.assets[a], catalog)
                for ids in bundles.roots.values()
                for a in ids
            },
            scenes={
                i: info.url
                for i, info in catalog.assets.items()
                if info.importer == "scene" and not info.parent
            },
            atlases=planned.atlases,
            internal=INTERNAL,
        ),
    )
    return SourceResult(
        assets=assets,
        index=index,
        problems=problems,
        roots={"scenes": scenes, "settings": settings_roots, "auto_atlas": atlas_roots},
        bundles=bundles.roots,
        bundle_priorities=bundles.priorities,
        recipes=planned.recipes,
        pack_hook=hook,
        type_assemblies={a.type: ASSEMBLY for a in assets.values()},
        default_cooker=DEFAULT_COOKER,
    )


def _references(
    catalog: Catalog, scans: dict[str, FileScan], problems: list[Problem]
) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    """Each asset's dependencies; ids naming nothing counted against the file that holds them."""
    resolver = Dependencies(catalog, scans)
    refs: dict[str, tuple[str, ...]] = {}
    unresolved: dict[str, list[str]] = {}
    for info in catalog.assets.values():
        needs = resolver.needs(info)
        refs[info.id] = needs.targets
        if needs.unresolved:
            holder = (
                info.path
                if not info.parent and is_serialized(info.importer, info.path)
                else info.meta
            )
            found = unresolved.setdefault(holder, [])
            found += [i for i in needs.unresolved if i not in found]
    for holder, ids in sorted(unresolved.items()):
        shown = ", ".join(ids[:5]) + (", …" if len(ids) > 5 else "")
        problems.append(
            Problem(
                "unresolved_ids",
                holder,
                f"{len(ids)} referenced id(s) name no asset, left out: {shown}",
            )
        )
    return refs, {holder: tuple(ids) for holder, ids in sorted(unresolved.items())}


def _reach(roots: list[str], refs: dict[str, tuple[str, ...]]) -> set[str]:
    seen = set(roots)
    queue = deque(roots)
    while queue:
        for target in refs.get(queue.popleft(), ()):
            if target not in seen:
                seen.add(target)
                queue.append(target)
    return seen


def _asset(info: AssetInfo, targets: tuple[str, ...]) -> Asset:
    serialized = not info.parent and is_serialized(info.importer, info.path)
    label = "__uuid__" if serialized else info.importer
    files = (info.meta,) if info.parent else tuple(sorted((info.path, info.meta)))
    return Asset(
        id=info.id,
        kind=WORLD if info.importer == "scene" else RESOURCE,
        type=runtime_type(info.importer),
        virtual_paths=(info.url,),
        folders=(posixpath.dirname(info.path),),
        files=files,
        refs=tuple(Ref(t, HARD, label) for t in targets),
        package=posixpath.dirname(info.url),
        name=posixpath.basename(info.url),
    )
