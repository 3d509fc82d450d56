"""Planning a generated Cocos project: areas, folders, items and their references, drawn from
one `random.Random` in a fixed order, and the two planted defects."""

from __future__ import annotations

from random import Random
from typing import NamedTuple

from .model import COLORS, SPRITE_FRAME, TEXTURE, Item, new_id

FOLDER_SIZE = 80
# (folder under assets/, bundle name or None, priority, share of the assets)
AREAS = (
    ("resources", "resources", 8, 0.20),
    ("bundles/ui", "ui", 6, 0.25),
    ("bundles/levels", "levels", 3, 0.20),
    ("bundles/dlc", "dlc", 3, 0.10),
    ("shared", None, None, 0.25),
)
KINDS = (("image", 50), ("prefab", 24), ("material", 6), ("sheet", 5), ("audio", 7), ("scene", 1))
IMAGE_SIZES = (8, 16, 24, 32, 48, 64)
SHEET_FRAMES = 4
ATLAS_EVERY = 4  # every 4th folder of `ui` and `resources` is an auto-atlas folder
DELETED = "0badc0de-0000-4000-8000-00000000dead"


class ProjectPlan(NamedTuple):
    items: list[Item]  # in writing order
    folders: dict[str, dict]  # folder path → its meta's userData
    planted: dict[str, list[str]]  # rule → the files holding its planted defect


def plan_project(total: int, rng: Random) -> ProjectPlan:
    """Items in writing order, folders (path → its meta's userData), planted defects."""
    folders: dict[str, dict] = {"assets/scenes": {}}
    items: list[Item] = []
    kinds = [k for k, weight in KINDS for _ in range(weight)]
    plan_total = total - 2  # the project's own render pipeline and physics material
    counts = [max(1, int(plan_total * share)) for *_a, share in AREAS]
    counts[-1] = plan_total - sum(counts[:-1])
    images: list[Item] = []
    prefabs: list[Item] = []
    for (area, bundle, priority, _share), count in zip(AREAS, counts):
        base = f"assets/{area}"
        folders[base] = (
            {"isBundle": True, "bundleName": bundle, "priority": priority} if bundle else {}
        )
        if "/" in area:
            folders.setdefault(f"assets/{area.split('/')[0]}", {})
        for index in range((count + FOLDER_SIZE - 1) // FOLDER_SIZE):
            folder = f"{base}/f{index:03d}"
            folders[folder] = {}
            atlas = bundle in ("ui", "resources") and index % ATLAS_EVERY == 1
            size = min(FOLDER_SIZE, count - index * FOLDER_SIZE)
            if atlas:
                items.append(Item("pac", f"{folder}/auto.pac", new_id(rng)))
                size -= 1
            for n in range(size):
                kind = "image" if atlas else kinds[rng.randrange(len(kinds))]
                item = _make(kind, f"{folder}/{kind}_{n:03d}", rng, images, prefabs, atlas)
                if kind == "scene" and not bundle:
                    item.path = f"assets/scenes/{area.replace('/', '_')}_{index}_{n}.scene"
                items.append(item)
    pipeline = Item("pipeline", "assets/settings/forward.rpp", new_id(rng))
    physics = Item("physics", "assets/settings/default.pmtl", new_id(rng))
    folders["assets/settings"] = {}
    items += [pipeline, physics]
    if not any(i.kind == "scene" and i.path.startswith("assets/scenes/") for i in items):
        scene = _make("scene", "assets/scenes/main.scene", rng, images, prefabs, False)
        items.append(scene)  # replaces nothing: a project always has a scene
        items.remove(next(i for i in items if i.kind == "audio"))
    planted = _plant(items, rng)
    return ProjectPlan(items, folders, planted)


def _make(
    kind: str, stem: str, rng: Random, images: list[Item], prefabs: list[Item], atlas: bool
) -> Item:
    asset_id = new_id(rng)
    if kind == "image":
        side = IMAGE_SIZES[rng.randrange(len(IMAGE_SIZES))]
        item = Item(
            "image",
            f"{stem}.png",
            asset_id,
            size=(side, IMAGE_SIZES[rng.randrange(3)]),
            color=rng.randrange(len(COLORS)),
            packable=atlas,
        )
        images.append(item)
        return item
    if kind == "sheet":
        return Item(
            "sheet",
            f"{stem}.plist",
            asset_id,
            size=(64, 64),
            color=rng.randrange(len(COLORS)),
            frames=[f"{rng.getrandbits(20):05x}" for _ in range(SHEET_FRAMES)],
        )
    if kind == "prefab":
        refs = [
            f"{_pick(images, rng).id}@{SPRITE_FRAME}" for _ in range(rng.randint(1, 4)) if images
        ]
        refs += [_pick(prefabs, rng).id for _ in range(rng.randint(0, 2)) if prefabs]
        item = Item("prefab", f"{stem}.prefab", asset_id, refs)
        prefabs.append(item)
        return item
    if kind == "material":
        refs = [f"{_pick(images, rng).id}@{TEXTURE}" for _ in range(rng.randint(1, 2)) if images]
        return Item("material", f"{stem}.mtl", asset_id, refs)
    if kind == "scene":
        refs = [_pick(prefabs, rng).id for _ in range(rng.randint(5, 20)) if prefabs]
        refs += [f"{_pick(images, rng).id}@{SPRITE_FRAME}" for _ in range(3) if images]
        return Item("scene", f"{stem}.scene", asset_id, refs)
    return Item("audio", f"{stem}.mp3", asset_id)


def _pick(items: list[Item], rng: Random) -> Item:
    """Mostly recent items (same folder, same bundle), sometimes any: shared content."""
    if rng.random() < 0.7:
        return items[max(0, len(items) - 1 - rng.randrange(min(len(items), 60)))]
    return items[rng.randrange(len(items))]


def _plant(items: list[Item], rng: Random) -> dict[str, list[str]]:
    prefab = next(i for i in items if i.kind == "prefab" and i.refs)
    prefab.refs.append(DELETED)
    audio = next(i for i in items if i.kind == "audio")
    audio.path = audio.path[: -len(".mp3")] + ".wav"
    return {"references-resolve": [prefab.path], "audio-format": [audio.path + ".meta"]}
