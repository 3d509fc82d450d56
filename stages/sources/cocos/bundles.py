"""Creator's bundles as the project's metas declare them (spec: "Bundles"): bundle folders with
names and priorities, the built-in `main` and `internal`, and the roots of each."""

from __future__ import annotations

import posixpath
from typing import NamedTuple

from orchestrator import record

from ..base import Problem, unsafe_name
from .project import PROJECT_URL, Catalog
from .scan import normalize_id

MAIN = "main"
INTERNAL = "internal"
MAIN_PRIORITY = 7
INTERNAL_PRIORITY = 21
RESOURCES = "resources"
RESOURCES_PRIORITY = 8
FOLDER_PRIORITY = 1
DEFAULT_RENDER_PIPELINE = "fd8ec536-a354-4a17-9c74-4f3883c378c8"  # builtin-forward.rpp
DEFAULT_PHYSICS_MATERIAL = "ba21476f-2866-4f81-9c4d-6e359316e448"  # default-physics-material.pmtl


@record
class BundleFolder(NamedTuple):
    name: str
    priority: int
    path: str  # project-relative folder
    url: str


@record
class Bundles(NamedTuple):
    """Bundle → roots (in root order), bundle → priority, bundle → the URL its paths are cut
    from ("" for `main` and `internal`, whose root is the whole database)."""

    roots: dict[str, list[str]]
    priorities: dict[str, int]
    folders: dict[str, str]


def bundle_folders(catalog: Catalog, problems: list[Problem]) -> list[BundleFolder]:
    """Folders whose meta says `isBundle`; nesting and clashing names are fatal problems."""
    found: list[BundleFolder] = []
    for path in sorted(catalog.folders):
        meta = catalog.folders[path]
        if meta.user.get("isBundle") is not True or not path.startswith("assets/"):
            continue
        given = meta.user.get("bundleName")  # a name only as text: a list is no name
        name = given if isinstance(given, str) and given else posixpath.basename(path)
        unsafe = unsafe_name("bundleName", name, path + ".meta")
        if unsafe is not None:  # left out (collect.skip_broken; else the build stops)
            problems.append(unsafe)
            continue
        priority = meta.user.get("priority")
        if not isinstance(priority, int) or isinstance(priority, bool):
            priority = RESOURCES_PRIORITY if name == RESOURCES else FOLDER_PRIORITY
        found.append(BundleFolder(name, priority, path, meta.url))
    for outer in found:
        for inner in found:
            if inner is not outer and inner.path.startswith(outer.path + "/"):
                problems.append(
                    Problem(
                        "nested_bundle",
                        inner.path + ".meta",
                        f"bundle folder {inner.path} ({inner.name!r}) is inside bundle folder "
                        f"{outer.path} ({outer.name!r}): bundle folders do not nest",
                        fatal=True,
                    )
                )
    names: dict[str, str] = {}
    for folder in found:
        if folder.name in (MAIN, INTERNAL) or folder.name in names:
            other = names.get(folder.name, "Creator's built-in bundle")
            problems.append(
                Problem(
                    "bundle_name_clash",
                    folder.path + ".meta",
                    f"bundle name {folder.name!r} of {folder.path} is also that of {other}",
                    fatal=True,
                )
            )
        names.setdefault(folder.name, folder.path)
    return found


def folder_of_asset(path: str, folders: list[BundleFolder]) -> BundleFolder | None:
    for folder in folders:
        if path.startswith(folder.path + "/"):
            return folder
    return None


def collect_bundles(
    catalog: Catalog, folders: list[BundleFolder], settings, cocos: dict, problems: list[Problem]
) -> Bundles:
    roots: dict[str, list[str]] = {MAIN: []}
    priorities = {MAIN: MAIN_PRIORITY}
    urls = {MAIN: ""}
    for folder in folders:
        roots.setdefault(folder.name, [])
        priorities[folder.name] = folder.priority
        urls[folder.name] = folder.url
    scenes: list[str] = []
    for info in catalog.assets.values():
        if info.builtin:
            continue
        holder = folder_of_asset(info.path, folders)
        if holder is not None:
            # Raw files (meta `files` without `.json`, e.g. a spine `.atlas`) are no roots;
            # their sub-assets still are.
            if info.files is None or ".json" in info.files:
                roots[holder.name].append(info.id)
        elif info.importer == "scene" and not info.parent:
            scenes.append(info.id)
    roots[MAIN] = _included_scenes(catalog, scenes, cocos.get("scenes"), problems)
    roots[MAIN] += _settings_roots(catalog, settings, problems)
    internal = _internal_roots(catalog, cocos.get("internal") or [], problems)
    if internal:
        roots[INTERNAL], priorities[INTERNAL], urls[INTERNAL] = internal, INTERNAL_PRIORITY, ""
    return Bundles(roots, priorities, urls)


def resolve_name(catalog: Catalog, name: str) -> str | None:
    """An asset id from an id, a `db://` URL or a project path (`assets/…`)."""
    text = name.strip()
    if normalize_id(text) in catalog.assets:
        return normalize_id(text)
    url = (
        text
        if text.startswith("db://")
        else f"{PROJECT_URL}/{text[len('assets/') :]}"
        if text.startswith("assets/")
        else text
    )
    for info in catalog.assets.values():
        if info.url == url:
            return info.id
    return None


def _included_scenes(catalog: Catalog, outside: list[str], given, problems) -> list[str]:
    """`cocos.scenes` (URLs or paths) in the order given, else every scene outside a bundle
    folder in URL order."""
    if given is None:
        return sorted(outside, key=lambda i: catalog.assets[i].url)
    scenes = []
    for name in given:
        found = resolve_name(catalog, name)
        if found is None or catalog.assets[found].importer != "scene":
            problems.append(
                Problem(
                    "unknown_scene",
                    "build file",
                    f"cocos.scenes names {name!r}, which is no scene of the project",
                )
            )
        elif found in outside and found not in scenes:
            scenes.append(found)
    return scenes


def _settings_roots(catalog: Catalog, settings, problems) -> list[str]:
    """The project's render pipeline and default physics material (or the engine's defaults)."""
    roots = []
    for given, default, what in (
        (settings.render_pipeline, DEFAULT_RENDER_PIPELINE, "render pipeline"),
        (settings.physics_material, DEFAULT_PHYSICS_MATERIAL, "default physics material"),
    ):
        asset_id = given or default
        if asset_id in catalog.assets:
            roots.append(asset_id)
        else:
            problems.append(
                Problem(
                    "unresolved_setting",
                    "settings/v2/packages/project.json",
                    f"the {what} {asset_id} is not found (is cocos.engine set?)",
                )
            )
    return roots


def _internal_roots(catalog: Catalog, names: list[str], problems) -> list[str]:
    roots = []
    for name in names:
        found = resolve_name(catalog, name)
        if found is None:
            problems.append(
                Problem(
                    "unknown_internal",
                    "build file",
                    f"cocos.internal names {name!r}, which is no asset",
                )
            )
        elif found not in roots:
            roots.append(found)
    return roots
