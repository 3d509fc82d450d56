"""Cook roots: what the build file (and the project) asks to cook, by kind, in the spec's order.

Also how a name a user types (a GUID, a virtual path, a project-relative path) resolves to assets,
and the path tests the roots and the closure share: never-cook prefixes, editor content, cultures.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from typing import NamedTuple

from stages.algorithms.globs import compile_globs
from stages.sources.base import Asset

GUID_RE = re.compile(
    r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)
ROOT_KINDS = ("maps", "startup", "always_cook", "all", "cultures", "layout")
COOK_DEFAULTS = {
    "maps": [],
    "always_cook": [],
    "never_cook": [],
    "startup": [],
    "cultures": [],
    "include_editor_content": False,
    "follow_soft_references": True,
    "fail_on_missing": False,
}


# -- path matching ---------------------------------------------------------------------------


def asset_paths(asset: Asset) -> tuple[str, ...]:
    """The paths prefixes and globs are matched against: virtual paths, then folders."""
    return asset.virtual_paths + asset.folders


def matching_prefix(asset: Asset, prefixes: Iterable[str]) -> str | None:
    """The first prefix that a virtual path or project-relative folder of the asset starts with."""
    paths = asset_paths(asset)
    for prefix in prefixes:
        if any(path.startswith(prefix) for path in paths):
            return prefix
    return None


def path_segments(asset: Asset) -> list[list[str]]:
    return [path.split("/") for path in asset_paths(asset)]


def editor_segment(asset: Asset) -> str | None:
    """The path segment that makes the asset editor content (starts with `Editor`), if any."""
    for segments in path_segments(asset):
        for segment in segments:
            if segment.startswith("Editor"):
                return segment
    return None


def asset_culture(asset: Asset) -> str | None:
    """The culture of an asset below `L10N/<culture>/`, if any."""
    for segments in path_segments(asset):
        for n in range(len(segments) - 1):
            if segments[n] == "L10N":
                return segments[n + 1]
    return None


def is_localised(asset: Asset) -> bool:
    return any("L10N" in segments for segments in path_segments(asset))


def cookable(asset: Asset) -> bool:
    """An asset with an item and a payload on disk (a resource needs both)."""
    return asset.items > 0 and bool(asset.files)


def unavailable_reason(asset_id: str, asset: Asset | None) -> str:
    if asset is None:
        return "no repository item" if GUID_RE.match(asset_id) else "not found in the project"
    if asset.items == 0:
        return "resource folder without a repository item"
    return "repository item without a resource folder"


# -- resolving names -------------------------------------------------------------------------


def resolve(assets: dict[str, Asset], name: str) -> list[str]:
    """Asset ids a user's name means: an id (GUID, world/level path), a virtual path, or a
    project-relative path (a resource folder or a file in it); several for a duplicated path."""
    name = name.strip().replace("\\", "/").strip("/")
    if name in assets:
        return [name]
    return [
        a.id
        for a in assets.values()
        if name in a.virtual_paths or name in a.folders or name in a.files
    ]


# -- roots -----------------------------------------------------------------------------------


class Roots(NamedTuple):
    first: dict[str, list[str]]  # kind → ids (maps, startup, always_cook, cultures | all)
    layout: list[str]  # ids the bundle layout names, in rule order
    unresolved: dict[str, str]  # a name in the build file that matched nothing → reason


def layout_named(assets: dict[str, Asset], cook: dict, bundles: dict) -> list[str]:
    """Asset ids named explicitly by `bundles.layout` (maps: all → each cooked world and its
    levels; include/exclude globs on virtual paths or project-relative paths), in rule order,
    then those the project assigns to bundles itself (`bundles["assigned"]`, by bundle name)."""
    named: dict[str, None] = {}
    for rule in bundles.get("layout") or []:
        if rule.get("maps") == "all":
            for world in cook.get("maps") or []:
                world = normalise_path(world)
                named.setdefault(world, None)
                asset = assets.get(world)
                for ref in asset.refs if asset else ():
                    if ref.label == "level":
                        named.setdefault(ref.target, None)
        includes = compile_globs(rule.get("include") or [])
        excludes = compile_globs(rule.get("exclude") or [])
        if rule.get("include"):
            for asset in assets.values():
                paths = asset_paths(asset)
                if any(map(includes, paths)) and not any(map(excludes, paths)):
                    named.setdefault(asset.id, None)
    assigned = bundles.get("assigned") or {}
    for name in sorted(assigned):
        for asset_id in assigned[name]:
            named.setdefault(asset_id, None)
    return list(named)


def normalise_path(path: str) -> str:
    """A project-relative path as the assets name it (`/`, no `./`, no trailing `/`)."""
    return posixpath.normpath(path.strip().replace("\\", "/")).lstrip("/")


def cook_roots(
    assets: dict[str, Asset],
    cook: dict,
    bundles: dict | None = None,
    source_roots: dict[str, list[str]] | None = None,
) -> Roots:
    """The roots of the cook, by kind, in the spec's order. A source's own roots (e.g. Unity's
    build-settings scenes) come right after `maps`: they are the project's maps."""
    cook = {**COOK_DEFAULTS, **(cook or {})}
    first: dict[str, list[str]] = {}
    unresolved: dict[str, str] = {}
    maps = []
    for world in cook["maps"]:
        world = normalise_path(world)
        maps.append(world)
        if world not in assets:
            unresolved[world] = "cook.maps names a world that is not in the project"
    first["maps"] = maps
    for kind, ids in (source_roots or {}).items():
        first[f"source:{kind}"] = list(ids)
    startup: list[str] = []
    for name in cook["startup"]:
        ids = resolve(assets, name)
        if not ids:
            unresolved[name] = (
                "cook.startup names no asset (neither a GUID, a virtual path nor a path)"
            )
        startup.extend(ids)
    first["startup"] = startup
    prefixes = list(cook["always_cook"])
    first["always_cook"] = [a.id for a in assets.values() if matching_prefix(a, prefixes)]
    layout = layout_named(assets, cook, bundles or {})
    given_by_source = any(ids for ids in (source_roots or {}).values())
    if not (cook["maps"] or cook["startup"] or cook["always_cook"] or layout or given_by_source):
        # Unreal's fallback: everything except editor content and localised variants.
        first["all"] = [
            a.id
            for a in assets.values()
            if cookable(a)
            and not editor_segment(a)
            and not is_localised(a)
            and not matching_prefix(a, cook["never_cook"])
        ]
    cultures = set(cook["cultures"])
    first["cultures"] = [a.id for a in assets.values() if cultures and asset_culture(a) in cultures]
    ordered = {kind: first[kind] for kind in ROOT_KINDS if kind in first}
    ordered = {
        "maps": ordered.pop("maps"),
        **{k: v for k, v in first.items() if k.startswith("source:")},
        **ordered,
    }
    return Roots(ordered, layout, unresolved)
