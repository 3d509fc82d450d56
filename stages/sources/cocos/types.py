"""What Creator's importers make: the runtime type of each asset, and which files hold references."""

from __future__ import annotations

import posixpath

SCRIPT_IMPORTERS = frozenset({"typescript", "javascript"})
DIRECTORY = "directory"
# Serialized assets: their JSON names what they need as `{"__uuid__": id}`.
SERIALIZED_IMPORTERS = frozenset(
    {
        "scene",
        "prefab",
        "animation-clip",
        "material",
        "physics-material",
        "render-pipeline",
        "animation-graph",
        "animation-graph-variant",
        "animation-mask",
    }
)
SERIALIZED_EXTENSIONS = frozenset({".scene", ".prefab", ".anim", ".mtl", ".pmtl", ".rpp"})
SPINE_ATLAS_EXTENSION = ".atlas"
PAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp")
SCRIPT_EXTENSIONS = frozenset({".ts", ".js", ".mjs", ".cjs"})

RUNTIME_TYPES = {
    "image": "cc.ImageAsset",
    "texture": "cc.Texture2D",
    "texture-cube": "cc.TextureCube",
    "sprite-frame": "cc.SpriteFrame",
    "scene": "cc.SceneAsset",
    "prefab": "cc.Prefab",
    "animation-clip": "cc.AnimationClip",
    "material": "cc.Material",
    "physics-material": "cc.PhysicsMaterial",
    "render-pipeline": "cc.RenderPipeline",
    "sprite-atlas": "cc.SpriteAtlas",
    "auto-atlas": "cc.SpriteAtlas",
    "bitmap-font": "cc.BitmapFont",
    "ttf-font": "cc.TTFFont",
    "label-atlas": "cc.LabelAtlas",
    "spine-data": "sp.SkeletonData",
    "dragonbones": "dragonBones.DragonBonesAsset",
    "particle": "cc.ParticleAsset",
    "audio-clip": "cc.AudioClip",
    "video-clip": "cc.VideoClip",
    "effect": "cc.EffectAsset",
    "effect-header": "cc.Asset",
    "json": "cc.JsonAsset",
    "text": "cc.TextAsset",
    "buffer": "cc.BufferAsset",
    "gltf-mesh": "cc.Mesh",
    "gltf-skeleton": "cc.Skeleton",
    "gltf-animation": "cc.AnimationClip",
    "gltf-material": "cc.Material",
    "gltf-scene": "cc.Prefab",
    "fbx": "cc.Asset",
    "gltf": "cc.Asset",
    "terrain": "cc.TerrainAsset",
    "render-texture": "cc.RenderTexture",
    "animation-graph": "cc.animation.AnimationGraph",
    "animation-graph-variant": "cc.animation.AnimationGraphVariant",
    "animation-mask": "cc.AnimationMask",
}
DEFAULT_TYPE = "cc.Asset"
IMAGE_TYPE = RUNTIME_TYPES["image"]
TEXTURE_TYPE = RUNTIME_TYPES["texture"]


def runtime_type(importer: str) -> str:
    """The engine class an importer's asset loads as (`cc.Asset` when unknown)."""
    return RUNTIME_TYPES.get(importer, DEFAULT_TYPE)


def extension(path: str) -> str:
    return posixpath.splitext(path)[1].lower()


def is_script(importer: str) -> bool:
    return importer in SCRIPT_IMPORTERS


def is_serialized(importer: str, path: str) -> bool:
    """Whether an asset's file is serialized JSON whose `__uuid__` values are its dependencies."""
    return importer in SERIALIZED_IMPORTERS or extension(path) in SERIALIZED_EXTENSIONS
