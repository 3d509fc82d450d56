"""The pack stage's hook for Cocos (`SourceResult.pack_hook`): after the priority fill, the auto
atlases move their frames into the bundles (spec: "Auto-atlases"), then each bundle gets
Creator's `paths` and `scenes` for the manifest.
"""

from __future__ import annotations

from typing import NamedTuple

from orchestrator import record
from stages.algorithms.priority import Fill

from ..base import Asset
from .atlas_plan import AutoAtlas

TARGET = "stages.sources.cocos.refine:refine"


@record
class PackData(NamedTuple):
    """What the hook reads of the project."""

    folders: dict[str, str]  # bundle → the URL its `paths` are relative to ("" : the database)
    load_urls: dict[str, str]  # root asset id → URL without the top file's extension
    scenes: dict[str, str]  # scene id → its URL
    atlases: tuple[AutoAtlas, ...]
    internal: str  # the engine's bundle, which auto atlases leave alone


def refine(fill: Fill, cooked: dict[str, Asset], data: PackData) -> None:
    users = _users(cooked)
    for atlas in data.atlases:
        _apply_atlas(fill, atlas, cooked, users, data.internal)
    for name in fill.order:
        fill.fields[name] = {
            "paths": _paths(fill, name, data),
            "scenes": {data.scenes[a]: a for a in _in_bundle(fill, name) if a in data.scenes},
        }


def _users(cooked: dict[str, Asset]) -> dict[str, set[str]]:
    """Asset → the cooked assets that reference it."""
    users: dict[str, set[str]] = {}
    for asset in cooked.values():
        for ref in asset.refs:
            if ref.target in cooked:
                users.setdefault(ref.target, set()).add(asset.id)
    return users


def _apply_atlas(
    fill: Fill,
    atlas: AutoAtlas,
    cooked: dict[str, Asset],
    users: dict[str, set[str]],
    internal: str,
) -> None:
    frames = [f for f in atlas.frames if f.id in cooked]
    frame_ids = {f.id for f in frames}
    first: str | None = None
    for name in fill.order:
        if name == internal:
            continue
        held = fill.held[name]
        held_set = set(held)
        redirects = fill.redirects[name]
        if atlas.pac not in held_set and not frame_ids & held_set:
            continue
        in_folder = _owns_folder(fill, name, atlas)
        # A frame a higher bundle owns is a redirect here: it is left as it is, and so are its
        # texture and image (the bundle keeps them, with their paths).
        packed = [f for f in frames if f.id not in redirects]
        for frame in packed:
            if frame.id not in held_set:
                held.append(frame.id)
                held_set.add(frame.id)
        for frame in packed:
            if (
                frame.texture
                and not (users.get(frame.texture, set()) - frame_ids)
                and (not in_folder or atlas.options.remove_texture)
            ):
                _remove(fill, name, frame.texture)
            if (
                frame.image
                and not (users.get(frame.image, set()) - {frame.texture})
                and (not in_folder or atlas.options.remove_image)
            ):
                _remove(fill, name, frame.image)
        if first is None:
            first = name
        for page in (p for p in atlas.pages if p.image in cooked and p.texture in cooked):
            if fill.priority[name] == fill.priority[first]:
                for asset_id in (page.image, page.texture):
                    if asset_id not in held:
                        held.append(asset_id)
            else:
                redirects[page.texture] = first
                if first not in fill.deps[name]:
                    fill.deps[name].append(first)
        if not users.get(atlas.pac) and not (in_folder and not atlas.options.remove_atlas):
            _remove(fill, name, atlas.pac)
    # Pages (and unused frames) that no bundle took are not part of the build.
    fill.dropped.update(frame.id for frame in frames)
    for page in atlas.pages:
        fill.dropped.update((page.image, page.texture))


def _owns_folder(fill: Fill, name: str, atlas: AutoAtlas) -> bool:
    """Whether the `.pac` lies in the bundle's folder (the bundle roots it)."""
    return atlas.pac in fill.roots.get(name, ())


def _remove(fill: Fill, name: str, asset_id: str) -> None:
    """Take an asset out of a bundle (held or redirected); `deps` is not recomputed."""
    held = fill.held[name]
    if asset_id in held:
        held.remove(asset_id)
    fill.redirects[name].pop(asset_id, None)
    fill.dropped.add(asset_id)


def _in_bundle(fill: Fill, name: str) -> list[str]:
    """The bundle's roots it still names, held or redirected."""
    held = set(fill.held[name])
    redirects = fill.redirects[name]
    return [a for a in fill.roots.get(name, ()) if a in held or a in redirects]


def _paths(fill: Fill, name: str, data: PackData) -> dict[str, str]:
    """Root → load path: its URL relative to the bundle folder without the file extension; for
    `main` and `internal` the whole URL as Creator writes it (`db:/assets/…`)."""
    if name not in data.folders:
        return {}
    folder = data.folders[name]
    paths = {}
    for asset_id in _in_bundle(fill, name):
        url = data.load_urls.get(asset_id)
        if url is None:
            continue
        if not folder:
            paths[asset_id] = "db:/" + url[len("db://") :]
        elif url.startswith(folder + "/"):
            paths[asset_id] = url[len(folder) + 1 :]
    return paths
