"""Auto atlases (`.pac`) at collect time (spec: "Auto-atlases"): which sprite frames each packs,
the ids of its pages and their textures, and the recipe that cooks each page.

"In some bundle" (`filterUnused`) is decided on what the bundles' roots reach, which is what the
build packs; the pack stage's hook (`refine.py`) later places the pages in bundles.
"""

from __future__ import annotations

import posixpath
from typing import NamedTuple

import xxhash

from orchestrator import record
from stages.algorithms.priority import natural_key

from ..base import HARD, RESOURCE, Asset, Problem, Recipe, Ref
from .atlas import (
    RECIPE,
    RECIPE_VERSION,
    AtlasOptions,
    FrameSize,
    PageRecipe,
    PlacedFrame,
    Rect,
    layout_pages,
    page_size,
)
from .project import AssetInfo
from .types import IMAGE_TYPE, TEXTURE_TYPE

TEXTURE_SUB = "6c48a"


@record
class AtlasFrame(NamedTuple):
    """A member frame: its id, the texture and image it used before packing, its pixels' source."""

    id: str
    texture: str
    image: str
    image_file: str
    rect: Rect  # in the image
    rotated: bool  # stored turned 90° in the image (TexturePacker)


@record
class AtlasPage(NamedTuple):
    image: str  # `1` + xxHash32 of the page's frame ids
    texture: str  # image + `@6c48a`
    frames: tuple[str, ...]


@record
class AutoAtlas(NamedTuple):
    """What the pack stage needs of one `.pac`."""

    pac: str
    url: str
    folder: str  # the `.pac`'s project folder
    options: AtlasOptions
    frames: tuple[AtlasFrame, ...]  # members, in compareUUID order
    pages: tuple[AtlasPage, ...]


@record
class PlannedAtlases(NamedTuple):
    atlases: tuple[AutoAtlas, ...]
    assets: dict[str, Asset]  # the pages and their textures
    recipes: dict[str, Recipe]


def atlas_options(user: dict) -> AtlasOptions:
    """The options of a `.pac` meta, Creator's defaults standing in for a value of the wrong type
    or out of range (a negative padding, a page side below 1: no packer can use them)."""
    defaults = AtlasOptions()

    def pick(key: str, default, kind, minimum: int | None = None):
        value = user.get(key, default)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            return default
        return default if minimum is not None and value < minimum else value

    return AtlasOptions(
        pick("maxWidth", defaults.max_width, int, minimum=1),
        pick("maxHeight", defaults.max_height, int, minimum=1),
        pick("padding", defaults.padding, int, minimum=0),
        pick("paddingBleed", defaults.padding_bleed, bool),
        pick("allowRotation", defaults.allow_rotation, bool),
        pick("filterUnused", defaults.filter_unused, bool),
        pick("removeTextureInBundle", defaults.remove_texture, bool),
        pick("removeImageInBundle", defaults.remove_image, bool),
        pick("removeSpriteAtlasInBundle", defaults.remove_atlas, bool),
    )


def image_id(frame_ids: list[str]) -> str:
    """`1` + lower-case hex of xxHash32 (seed 0) of the ids sorted by compareUUID and
    concatenated, right-padded with `0` to 8 characters."""
    joined = "".join(sorted(frame_ids, key=natural_key))
    return "1" + format(xxhash.xxh32_intdigest(joined.encode("utf-8"), seed=0), "x").ljust(8, "0")


def plan_atlases(
    infos: dict[str, AssetInfo],
    refs: dict[str, tuple[str, ...]],
    reached: set[str],
    problems: list[Problem],
) -> PlannedAtlases:
    pacs = sorted(
        (i for i in infos.values() if i.importer == "auto-atlas" and not i.builtin),
        key=lambda i: i.url,
    )
    pac_folders = {posixpath.dirname(p.path) for p in pacs}
    candidates: dict[str, list[AssetInfo]] = {}  # pac folder → the sprite frames it may pack
    if pac_folders:
        for info in infos.values():
            if info.importer == "sprite-frame" and not info.builtin:
                folder = _nearest(info.path, pac_folders)
                if folder is not None:
                    candidates.setdefault(folder, []).append(info)
    atlases, assets, recipes = [], {}, {}
    for pac in pacs:
        options = atlas_options(pac.user)
        folder = posixpath.dirname(pac.path)
        frames = [
            frame
            for info in candidates.get(folder, ())
            if (frame := _member(info, infos, refs, reached, options)) is not None
        ]
        if not frames:
            continue
        frames.sort(key=lambda f: natural_key(f.id))
        layout = layout_pages(
            [FrameSize(f.id, f.rect.width, f.rect.height) for f in frames], options
        )
        if len(layout) > 1:
            problems.append(
                Problem(
                    "atlas_pages",
                    pac.meta,
                    f"auto atlas {pac.url} needs {len(layout)} pages of "
                    f"{options.max_width}x{options.max_height}: each page is "
                    f"an image of its own (id from its own frames)",
                )
            )
        by_id = {f.id: f for f in frames}
        pages = []
        for number, placements in enumerate(layout):
            ids = [p.frame for p in placements]
            image = image_id([f.id for f in frames] if len(layout) == 1 else ids)
            page = AtlasPage(image, f"{image}@{TEXTURE_SUB}", tuple(sorted(ids, key=natural_key)))
            pages.append(page)
            url = f"{pac.url}/page" + (f"-{number}" if number else "")
            image_files = tuple(sorted({by_id[i].image_file for i in ids}))
            assets[page.image] = Asset(
                page.image,
                RESOURCE,
                IMAGE_TYPE,
                (url,),
                (),
                image_files,
                (),
                package=posixpath.dirname(url),
                name="page",
            )
            assets[page.texture] = Asset(
                page.texture,
                RESOURCE,
                TEXTURE_TYPE,
                (url + "/texture",),
                (folder,),
                (pac.meta,),
                (Ref(page.image, HARD, "atlas"),),
                package=url,
                name="texture",
            )
            size = page_size(placements, options)
            placed = tuple(
                PlacedFrame(
                    p.frame,
                    by_id[p.frame].image_file,
                    by_id[p.frame].rect,
                    by_id[p.frame].rotated,
                    p.x,
                    p.y,
                    p.rotated,
                )
                for p in placements
            )
            recipe = PageRecipe(size.width, size.height, options.padding_bleed, placed)
            recipes[page.image] = Recipe(RECIPE, RECIPE_VERSION, recipe)
        atlases.append(AutoAtlas(pac.id, pac.url, folder, options, tuple(frames), tuple(pages)))
    return PlannedAtlases(tuple(atlases), assets, recipes)


def _nearest(path: str, pac_folders: set[str]) -> str | None:
    """The deepest folder holding a `.pac` that contains `path`."""
    folder = posixpath.dirname(path)
    while folder:
        if folder in pac_folders:
            return folder
        folder = posixpath.dirname(folder)
    return None


def _member(
    info: AssetInfo,
    infos: dict[str, AssetInfo],
    refs: dict[str, tuple[str, ...]],
    reached: set[str],
    options: AtlasOptions,
) -> AtlasFrame | None:
    user = info.user
    if user.get("packable") is not True:
        return None
    if options.filter_unused and info.id not in reached:
        return None
    width, height = _int(user.get("width")), _int(user.get("height"))
    if width <= 0 or height <= 0 or not options.fits(width, height):
        return None
    texture = next((t for t in refs.get(info.id, ()) if infos[t].importer == "texture"), "")
    image = (
        next((t for t in refs.get(texture, ()) if infos[t].importer == "image"), "")
        if texture
        else next((t for t in refs.get(info.id, ()) if infos[t].importer == "image"), "")
    )
    if not image:
        return None  # nothing to take its pixels from
    return AtlasFrame(
        info.id,
        texture,
        image,
        infos[image].path,
        Rect(_int(user.get("trimX")), _int(user.get("trimY")), width, height),
        user.get("rotated") is True,
    )


def _int(value) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0
