"""Unity's names for what an asset file holds: by extension, or by the class ID of its first document.

Names are fully qualified runtime types so link.xml can list them as they are.
"""

from __future__ import annotations

import posixpath

# link.xml names the `UnityEngine` assembly for every engine type: Unity forwards it to the module
# (UnityEngine.CoreModule, UnityEngine.AudioModule, …) that defines the type.
RUNTIME_ASSEMBLY = "UnityEngine"
SCENE_TYPE = "UnityEngine.SceneAsset"
UNKNOWN_TYPE = "UnityEngine.Object"  # Unity's DefaultAsset: a file no importer understands

# Native assets Unity serializes itself: text YAML under Force Text, binary otherwise.
NATIVE_EXTENSIONS = frozenset(
    {
        ".unity",
        ".prefab",
        ".mat",
        ".asset",
        ".controller",
        ".anim",
        ".overridecontroller",
        ".mask",
        ".physicmaterial",
        ".physicsmaterial2d",
        ".guiskin",
        ".fontsettings",
        ".rendertexture",
        ".cubemap",
        ".flare",
        ".spriteatlas",
        ".mixer",
        ".playable",
        ".signal",
        ".lighting",
        ".preset",
        ".brush",
        ".terrainlayer",
        ".giparams",
        ".shadervariants",
    }
)

# Assets Unity serializes as JSON (Shader Graph): their references are `"guid"` keys.
JSON_EXTENSIONS = frozenset({".shadergraph", ".shadersubgraph"})

# The importer of files Unity knows no importer for (a spreadsheet, an archive, a `.mtl`): their
# object is a DefaultAsset, an editor-only object that Unity never puts in a bundle. Scenes and
# folders have this importer too, but they are no DefaultAsset (a scene is a SceneAsset).
DEFAULT_IMPORTER = "DefaultImporter"
SCENE_EXTENSION = ".unity"

# Program code: referenced through m_Script and the like, never content.
CODE_EXTENSIONS = frozenset(
    {
        ".cs",
        ".js",
        ".boo",
        ".dll",
        ".so",
        ".a",
        ".aar",
        ".jar",
        ".asmdef",
        ".asmref",
        ".jslib",
        ".jspre",
        ".mm",
        ".m",
        ".h",
        ".c",
        ".cpp",
        ".java",
        ".rsp",
        ".cginc",
        ".hlsl",
        ".glslinc",
    }
)

_BY_EXTENSION = {
    ".unity": SCENE_TYPE,
    ".prefab": "UnityEngine.GameObject",
    ".mat": "UnityEngine.Material",
    ".anim": "UnityEngine.AnimationClip",
    # AnimatorController is an editor type; the player loads it as its runtime base class.
    ".controller": "UnityEngine.RuntimeAnimatorController",
    ".overridecontroller": "UnityEngine.AnimatorOverrideController",
    ".mask": "UnityEngine.AvatarMask",
    ".physicmaterial": "UnityEngine.PhysicMaterial",
    ".physicsmaterial2d": "UnityEngine.PhysicsMaterial2D",
    ".guiskin": "UnityEngine.GUISkin",
    ".fontsettings": "UnityEngine.Font",
    ".rendertexture": "UnityEngine.RenderTexture",
    ".cubemap": "UnityEngine.Cubemap",
    ".flare": "UnityEngine.Flare",
    ".spriteatlas": "UnityEngine.U2D.SpriteAtlas",
    ".mixer": "UnityEngine.Audio.AudioMixer",
    ".terrainlayer": "UnityEngine.TerrainLayer",
    ".shader": "UnityEngine.Shader",
    ".shadergraph": "UnityEngine.Shader",
    ".compute": "UnityEngine.ComputeShader",
    ".shadervariants": "UnityEngine.ShaderVariantCollection",
    ".ttf": "UnityEngine.Font",
    ".otf": "UnityEngine.Font",
    ".dfont": "UnityEngine.Font",
}
for _ext in (
    ".png",
    ".jpg",
    ".jpeg",
    ".tga",
    ".psd",
    ".tif",
    ".tiff",
    ".bmp",
    ".gif",
    ".exr",
    ".hdr",
    ".iff",
    ".pict",
):
    _BY_EXTENSION[_ext] = "UnityEngine.Texture2D"
for _ext in (".wav", ".mp3", ".ogg", ".aif", ".aiff", ".flac", ".mod", ".it", ".s3m", ".xm"):
    _BY_EXTENSION[_ext] = "UnityEngine.AudioClip"
for _ext in (".fbx", ".obj", ".dae", ".3ds", ".dxf", ".blend", ".max", ".ma", ".mb"):
    _BY_EXTENSION[_ext] = "UnityEngine.GameObject"  # a model's main object is its root GameObject
for _ext in (".txt", ".xml", ".json", ".bytes", ".csv", ".html", ".htm", ".yaml", ".fnt"):
    _BY_EXTENSION[_ext] = "UnityEngine.TextAsset"
for _ext in (".mp4", ".mov", ".webm", ".avi", ".asf", ".wmv", ".mpg", ".mpeg", ".m4v", ".ogv"):
    _BY_EXTENSION[_ext] = "UnityEngine.Video.VideoClip"

# Class IDs (docs.unity3d.com/Manual/ClassIDReference.html) of objects found first in `.asset` files.
_BY_CLASS_ID = {
    1: "UnityEngine.GameObject",
    21: "UnityEngine.Material",
    28: "UnityEngine.Texture2D",
    43: "UnityEngine.Mesh",
    48: "UnityEngine.Shader",
    49: "UnityEngine.TextAsset",
    74: "UnityEngine.AnimationClip",
    83: "UnityEngine.AudioClip",
    84: "UnityEngine.RenderTexture",
    89: "UnityEngine.Cubemap",
    90: "UnityEngine.Avatar",
    91: "UnityEngine.RuntimeAnimatorController",
    114: "UnityEngine.ScriptableObject",  # a MonoBehaviour main object in a .asset
    117: "UnityEngine.Texture3D",
    128: "UnityEngine.Font",
    134: "UnityEngine.PhysicMaterial",
    156: "UnityEngine.TerrainData",
    187: "UnityEngine.Texture2DArray",
    213: "UnityEngine.Sprite",
    221: "UnityEngine.AnimatorOverrideController",
    240: "UnityEngine.Audio.AudioMixer",
    319: "UnityEngine.AvatarMask",
    329: "UnityEngine.Video.VideoClip",
    687078895: "UnityEngine.U2D.SpriteAtlas",
}


def extension(path: str) -> str:
    """The lower-cased extension of a path (Unity matches extensions case-insensitively)."""
    return posixpath.splitext(path)[1].lower()


def is_code(path: str) -> bool:
    """Whether a project file is program code rather than content."""
    return extension(path) in CODE_EXTENSIONS


def is_native(path: str) -> bool:
    """Whether a file is one Unity serializes itself (YAML under Force Text)."""
    return extension(path) in NATIVE_EXTENSIONS


def is_json_serialized(path: str) -> bool:
    """Whether a file is one Unity serializes as JSON (Shader Graph)."""
    return extension(path) in JSON_EXTENSIONS


def is_default_asset(path: str, importer: str, is_folder: bool) -> bool:
    """Whether Unity imports a file as a DefaultAsset (which it never puts in a bundle): its
    `.meta` names the DefaultImporter, and it is neither a folder nor a scene."""
    return importer == DEFAULT_IMPORTER and not is_folder and extension(path) != SCENE_EXTENSION


def asset_type(path: str, first_class: int | None) -> str:
    """The type of an asset's main object, from its extension, else its first document's class."""
    ext = extension(path)
    if ext in _BY_EXTENSION:
        return _BY_EXTENSION[ext]
    if first_class is not None:
        return _BY_CLASS_ID.get(first_class, UNKNOWN_TYPE)
    return UNKNOWN_TYPE
