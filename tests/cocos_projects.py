"""Hand-made Cocos Creator projects for tests: metas, images with their sub-assets, scenes."""

from __future__ import annotations

import io
import json
from pathlib import Path

TEXTURE = "6c48a"
SPRITE_FRAME = "f9941"


def uuid(n: int) -> str:
    return f"{n:08x}-0000-4000-8000-{n:012x}"


class CocosProject:
    """A Creator 3.x project under `root` (package.json, settings, assets/)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.next = 1
        (root / "assets").mkdir(parents=True, exist_ok=True)
        (root / "settings" / "v2" / "packages").mkdir(parents=True, exist_ok=True)
        (root / "package.json").write_text(
            json.dumps({"name": "t", "creator": {"version": "3.8.4"}})
        )

    def new_id(self) -> str:
        self.next += 1
        return uuid(self.next)

    def meta(
        self,
        rel: str,
        importer: str,
        files: list[str] | None = None,
        sub: dict | None = None,
        user: dict | None = None,
        asset_id: str | None = None,
    ) -> str:
        asset_id = asset_id or self.new_id()
        data = {
            "ver": "1.0.0",
            "importer": importer,
            "imported": True,
            "uuid": asset_id,
            "files": files if files is not None else [".json"],
            "subMetas": sub or {},
            "userData": user or {},
        }
        path = self.root / f"{rel}.meta"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
        return asset_id

    def folder(self, rel: str, bundle: str | None = None, priority: int | None = None) -> str:
        (self.root / rel).mkdir(parents=True, exist_ok=True)
        user = {}
        if bundle is not None:
            user = {"isBundle": True, "bundleName": bundle}
            if priority is not None:
                user["priority"] = priority
        return self.meta(rel, "directory", files=[], user=user)

    def image(
        self,
        rel: str,
        size: tuple[int, int] = (8, 8),
        packable: bool = True,
        color: tuple[int, int, int, int] = (255, 0, 0, 255),
    ) -> str:
        """A PNG with a texture and a sprite frame (`uuid@6c48a`, `uuid@f9941`); returns the uuid."""
        from PIL import Image

        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        out = io.BytesIO()
        Image.new("RGBA", size, color).save(out, "PNG")
        path.write_bytes(out.getvalue())
        asset_id = self.new_id()
        width, height = size
        sub = {
            TEXTURE: {
                "importer": "texture",
                "uuid": f"{asset_id}@{TEXTURE}",
                "name": "texture",
                "userData": {"imageUuidOrDatabaseUri": asset_id, "isUuid": True},
                "files": [".json"],
                "subMetas": {},
            },
            SPRITE_FRAME: {
                "importer": "sprite-frame",
                "uuid": f"{asset_id}@{SPRITE_FRAME}",
                "name": "spriteFrame",
                "userData": {
                    "imageUuidOrDatabaseUri": f"{asset_id}@{TEXTURE}",
                    "isUuid": True,
                    "packable": packable,
                    "trimX": 0,
                    "trimY": 0,
                    "width": width,
                    "height": height,
                    "rawWidth": width,
                    "rawHeight": height,
                    "rotated": False,
                },
                "files": [".json"],
                "subMetas": {},
            },
        }
        return self.meta(
            rel,
            "image",
            files=[".json", ".png"],
            sub=sub,
            user={"type": "sprite-frame"},
            asset_id=asset_id,
        )

    def serialized(self, rel: str, importer: str, refs: list[str] = ()) -> str:
        """A scene, prefab, material… whose JSON references `refs` (`__uuid__`)."""
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        body = [{"__type__": "cc.SceneAsset" if importer == "scene" else "cc.Prefab"}]
        body += [{"__type__": "cc.Sprite", "_spriteFrame": {"__uuid__": r}} for r in refs]
        path.write_text(json.dumps(body, indent=2), encoding="utf-8")
        return self.meta(rel, importer)

    def scene(self, rel: str, refs: list[str] = ()) -> str:
        return self.serialized(rel, "scene", refs)

    def prefab(self, rel: str, refs: list[str] = ()) -> str:
        return self.serialized(rel, "prefab", refs)

    def pac(self, rel: str, **options) -> str:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"__type__": "cc.SpriteAtlas"}), encoding="utf-8")
        return self.meta(rel, "auto-atlas", user=dict(options))

    def raw(
        self,
        rel: str,
        importer: str,
        files: list[str],
        content: bytes = b"x",
        user: dict | None = None,
    ) -> str:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        return self.meta(rel, importer, files=files, user=user)

    def settings(self, data: dict) -> None:
        (self.root / "settings" / "v2" / "packages" / "project.json").write_text(json.dumps(data))


def frame(asset_id: str) -> str:
    return f"{asset_id}@{SPRITE_FRAME}"


def texture(asset_id: str) -> str:
    return f"{asset_id}@{TEXTURE}"


def pack_project(root: Path, engine: str | None = None, scenes=None, internal=None):
    """Collect, close and pack a project as the pipeline does (priority policy): (source, packing)."""
    from functools import partial

    from stages.cooklist.closure import compute_cooklist
    from stages.layout.packing import pack
    from stages.sources.cocos import collect_cocos
    from stages.sources.cocos.refine import refine

    source = collect_cocos(str(root), engine, scenes, internal)
    cooklist = compute_cooklist(
        source.assets, {}, {"layout": [], "assigned": source.bundles}, source.external, source.roots
    )
    packing = pack(
        [source.assets[a] for a in cooklist.cooked],
        [],
        [],
        "priority",
        True,
        source.bundles,
        source.bundle_priorities,
        partial(refine, data=source.pack_hook.data),
    )
    return source, packing


def contents(packing, name: str) -> set[str]:
    """What a bundle's `config.json` lists as uuids: assets and redirects."""
    bundle = packing.bundles[name]
    return set(bundle.assets) | {r.asset for r in bundle.redirects}


def redirects(packing, name: str) -> dict[str, str]:
    return {r.asset: r.bundle for r in packing.bundles[name].redirects}
