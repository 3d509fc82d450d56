"""Writing a planned Cocos project: `package.json`, the project settings, folders, and each
item's files with its meta. Writing draws nothing from the plan's random stream."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path
from random import Random
from typing import Any

from .model import COLORS, SPRITE_FRAME, TEXTURE, Item, new_id


def write_project(project: Path, items: list[Item], folders: dict[str, dict]) -> None:
    (project / "settings" / "v2" / "packages").mkdir(parents=True)
    (project / "package.json").write_text(
        json.dumps({"name": "generated", "creator": {"version": "3.8.4"}}, indent=2),
        encoding="utf-8",
    )
    pipeline = next(i for i in items if i.kind == "pipeline")
    physics = next(i for i in items if i.kind == "physics")
    (project / "settings" / "v2" / "packages" / "project.json").write_text(
        json.dumps(
            {
                "general": {"renderPipeline": pipeline.id},
                "physics": {"defaultMaterial": physics.id},
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    folder_rng = Random(len(items))  # folder uuids: a fixed stream of their own
    for path in sorted(folders):
        (project / path).mkdir(parents=True, exist_ok=True)
        _meta(project, path, "directory", new_id(folder_rng), [], {}, folders[path])
    pngs: dict[tuple, bytes] = {}
    for item in items:
        WRITERS[item.kind](project, item, pngs)


def _meta(
    project: Path, path: str, importer: str, asset_id: str, files: list[str], sub: dict, user: dict
) -> None:
    data = {
        "ver": "1.0.0",
        "importer": importer,
        "imported": True,
        "uuid": asset_id,
        "files": files,
        "subMetas": sub,
        "userData": user,
    }
    (project / f"{path}.meta").write_text(json.dumps(data, indent=2), encoding="utf-8")


def _png(pngs: dict, size: tuple[int, int], color: int) -> bytes:
    key = (size, color)
    if key not in pngs:
        from PIL import Image

        out = io.BytesIO()
        Image.new("RGBA", size, COLORS[color]).save(out, "PNG")
        pngs[key] = out.getvalue()
    return pngs[key]


def _image_subs(item: Item, type_: str) -> dict:
    width, height = item.size
    subs = {
        TEXTURE: {
            "importer": "texture",
            "uuid": f"{item.id}@{TEXTURE}",
            "name": "texture",
            "id": TEXTURE,
            "ver": "1.0.22",
            "imported": True,
            "files": [".json"],
            "subMetas": {},
            "userData": {
                "imageUuidOrDatabaseUri": item.id,
                "isUuid": True,
                "wrapModeS": "clamp-to-edge",
            },
        }
    }
    if type_ == "sprite-frame":
        subs[SPRITE_FRAME] = {
            "importer": "sprite-frame",
            "uuid": f"{item.id}@{SPRITE_FRAME}",
            "name": "spriteFrame",
            "id": SPRITE_FRAME,
            "ver": "1.0.12",
            "imported": True,
            "files": [".json"],
            "subMetas": {},
            "userData": {
                "trimType": "auto",
                "trimX": 0,
                "trimY": 0,
                "width": width,
                "height": height,
                "rawWidth": width,
                "rawHeight": height,
                "rotated": False,
                "packable": item.packable,
                "isUuid": True,
                "imageUuidOrDatabaseUri": f"{item.id}@{TEXTURE}",
            },
        }
    return subs


def _write_image(project: Path, item: Item, pngs: dict) -> None:
    (project / item.path).write_bytes(_png(pngs, item.size, item.color))
    _meta(
        project,
        item.path,
        "image",
        item.id,
        [".json", ".png"],
        _image_subs(item, "sprite-frame"),
        {"type": "sprite-frame", "hasAlpha": True},
    )


def _write_sheet(project: Path, item: Item, pngs: dict) -> None:
    """A TexturePacker sheet: its image (type texture) and a plist whose frames are sub-assets."""
    image_id = str(uuid.UUID(int=uuid.UUID(item.id).int ^ 1))  # derived: writing draws nothing
    image = Item(
        "image", item.path[: -len(".plist")] + ".png", image_id, size=item.size, color=item.color
    )
    (project / image.path).write_bytes(_png(pngs, item.size, item.color))
    _meta(
        project,
        image.path,
        "image",
        image.id,
        [".json", ".png"],
        _image_subs(image, "texture"),
        {"type": "texture"},
    )
    (project / item.path).write_text(
        '<?xml version="1.0"?>\n<plist version="1.0"><dict/></plist>\n', encoding="utf-8"
    )
    subs = {}
    for n, key in enumerate(item.frames):
        subs[key] = {
            "importer": "sprite-frame",
            "uuid": f"{item.id}@{key}",
            "name": f"frame_{n}",
            "id": key,
            "files": [".json"],
            "subMetas": {},
            "userData": {
                "trimX": (n % 2) * 32,
                "trimY": (n // 2) * 32,
                "width": 32,
                "height": 32,
                "rawWidth": 32,
                "rawHeight": 32,
                "rotated": False,
                "packable": False,
                "imageUuidOrDatabaseUri": f"{image.id}@{TEXTURE}",
                "atlasUuid": item.id,
            },
        }
    _meta(
        project,
        item.path,
        "sprite-atlas",
        item.id,
        [".json"],
        subs,
        {"textureUuid": f"{image.id}@{TEXTURE}"},
    )


def _serialized(type_: str, refs: list[str], field_name: str) -> str:
    body: list[dict[str, Any]] = [{"__type__": type_, "_name": ""}]
    body += [
        {"__type__": "cc.Node", "_components": [], field_name: {"__uuid__": ref}} for ref in refs
    ]
    return json.dumps(body, indent=2)


def _write_prefab(project: Path, item: Item, pngs: dict) -> None:
    (project / item.path).write_text(
        _serialized("cc.Prefab", item.refs, "_asset"), encoding="utf-8"
    )
    _meta(project, item.path, "prefab", item.id, [".json"], {}, {"syncNodeName": item.path})


def _write_scene(project: Path, item: Item, pngs: dict) -> None:
    (project / item.path).write_text(
        _serialized("cc.SceneAsset", item.refs, "_prefab"), encoding="utf-8"
    )
    _meta(project, item.path, "scene", item.id, [".json"], {}, {})


def _write_material(project: Path, item: Item, pngs: dict) -> None:
    (project / item.path).write_text(
        _serialized("cc.Material", item.refs, "mainTexture"), encoding="utf-8"
    )
    _meta(project, item.path, "material", item.id, [".json"], {}, {})


def _write_audio(project: Path, item: Item, pngs: dict) -> None:
    (project / item.path).write_bytes(b"ID3\x03\x00\x00\x00\x00\x00\x00" + item.id.encode())
    ext = item.path.rsplit(".", 1)[1]
    _meta(project, item.path, "audio-clip", item.id, [".json", f".{ext}"], {}, {"downloadMode": 0})


def _write_pac(project: Path, item: Item, pngs: dict) -> None:
    (project / item.path).write_text('{\n  "__type__": "cc.SpriteAtlas"\n}\n', encoding="utf-8")
    _meta(
        project,
        item.path,
        "auto-atlas",
        item.id,
        [".json"],
        {},
        {
            "maxWidth": 1024,
            "maxHeight": 1024,
            "padding": 2,
            "allowRotation": True,
            "paddingBleed": True,
            "filterUnused": True,
            "removeTextureInBundle": True,
            "removeImageInBundle": True,
            "removeSpriteAtlasInBundle": True,
        },
    )


def _write_settings_asset(project: Path, item: Item, pngs: dict) -> None:
    type_, importer = (
        ("cc.RenderPipeline", "render-pipeline")
        if item.kind == "pipeline"
        else ("cc.PhysicsMaterial", "physics-material")
    )
    (project / item.path).write_text(_serialized(type_, [], "_x"), encoding="utf-8")
    _meta(project, item.path, importer, item.id, [".json"], {}, {})


WRITERS = {
    "image": _write_image,
    "sheet": _write_sheet,
    "prefab": _write_prefab,
    "scene": _write_scene,
    "material": _write_material,
    "audio": _write_audio,
    "pac": _write_pac,
    "pipeline": _write_settings_asset,
    "physics": _write_settings_asset,
}
