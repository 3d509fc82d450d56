"""Hand-made Unity projects for tests: files with `.meta`s, references, prefabs, build settings."""

from __future__ import annotations

import json
from pathlib import Path

HEADER = "%YAML 1.1\n%TAG !u! tag:unity3d.com,2011:\n"


def guid(n: int) -> str:
    return f"{n:032x}"


# The importer Unity writes into a file's `.meta`, by extension; anything else (and folders,
# scenes) gets the DefaultImporter.
IMPORTERS = {
    **dict.fromkeys((".png", ".jpg", ".tga", ".psd"), "TextureImporter"),
    ".prefab": "PrefabImporter",
    **dict.fromkeys((".mat", ".asset", ".anim", ".controller"), "NativeFormatImporter"),
    **dict.fromkeys((".txt", ".json", ".xml", ".bytes", ".csv"), "TextScriptImporter"),
    **dict.fromkeys((".wav", ".mp3", ".ogg"), "AudioImporter"),
    **dict.fromkeys((".fbx", ".obj"), "ModelImporter"),
    ".shader": "ShaderImporter",
    ".cs": "MonoImporter",
    **dict.fromkeys((".shadergraph", ".shadersubgraph"), "ScriptedImporter"),
}
DEFAULT_IMPORTER = "DefaultImporter"


def importer_for(rel: str) -> str:
    return IMPORTERS.get(Path(rel).suffix.lower(), DEFAULT_IMPORTER)


def meta_text(
    asset_guid: str,
    bundle: str = "",
    variant: str = "",
    folder: bool = False,
    importer: str = DEFAULT_IMPORTER,
) -> str:
    lines = ["fileFormatVersion: 2", f"guid: {asset_guid}"]
    if folder:
        lines.append("folderAsset: yes")
    lines += [
        f"{importer}:",
        "  externalObjects: {}",
        "  userData: ",
        f"  assetBundleName: {bundle}",
        f"  assetBundleVariant: {variant}",
        "",
    ]
    return "\n".join(lines)


def write(
    root: Path, rel: str, content: str | bytes, asset_guid: str | None = None, **meta
) -> None:
    """Write a project file, and its .meta when a GUID is given."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    if asset_guid is not None:
        meta.setdefault("importer", importer_for(rel))
        (root / f"{rel}.meta").write_text(meta_text(asset_guid, **meta), encoding="utf-8")


def write_folder_meta(root: Path, rel: str, folder_guid: str, bundle: str = "") -> None:
    """A folder and its .meta (`folderAsset: yes`)."""
    (root / rel).mkdir(parents=True, exist_ok=True)
    (root / f"{rel}.meta").write_text(
        meta_text(folder_guid, bundle=bundle, folder=True), encoding="utf-8"
    )


def ref(n: int, file_id: int = 11400000, kind: int = 2) -> str:
    return f"{{fileID: {file_id}, guid: {guid(n)}, type: {kind}}}"


def material(*texture_guids: int) -> str:
    body = "".join(
        f"    - _Tex{i}:\n        m_Texture: {ref(g, 2800000, 3)}\n"
        for i, g in enumerate(texture_guids)
    )
    return (
        HEADER + "--- !u!21 &2100000\nMaterial:\n  m_Name: m\n"
        f"  m_Shader: {{fileID: 46, guid: 0000000000000000f000000000000000, type: 0}}\n"
        f"  m_SavedProperties:\n    m_TexEnvs:\n{body}"
    )


def prefab(refs: list[tuple[str, int]], nested: list[int] = ()) -> str:
    """A prefab whose MonoBehaviour holds `refs` (field, guid number) and instances of `nested`."""
    text = HEADER + "--- !u!1 &100\nGameObject:\n  m_Name: root\n"
    text += "--- !u!114 &200\nMonoBehaviour:\n"
    text += f"  m_Script: {ref(900, 11500000, 3)}\n"
    for field, target in refs:
        text += f"  {field}: {ref(target)}\n"
    for i, target in enumerate(nested):
        text += (
            f"--- !u!1001 &{300 + i}\nPrefabInstance:\n  m_Modification:\n"
            f"    m_Modifications:\n    - target: {{fileID: 5, guid: {guid(target)},\n"
            f"        type: 3}}\n      propertyPath: m_Name\n      value: x\n"
            f"      objectReference: {{fileID: 0}}\n"
            f"  m_SourcePrefab: {{fileID: 100100000, guid: {guid(target)}, type: 3}}\n"
            f"--- !u!4 &{400 + i} stripped\nTransform:\n"
            f"  m_CorrespondingSourceObject: {{fileID: 7, guid: {guid(target)}, type: 3}}\n"
        )
    return text


def scriptable(*targets: int) -> str:
    text = HEADER + "--- !u!114 &11400000\nMonoBehaviour:\n"
    text += f"  m_Script: {ref(901, 11500000, 3)}\n  items:\n"
    return text + "".join(f"  - {ref(t)}\n" for t in targets)


def build_settings(*scenes: tuple[str, int, bool]) -> str:
    text = HEADER + "--- !u!1045 &1\nEditorBuildSettings:\n  m_ObjectHideFlags: 0\n  m_Scenes:\n"
    for path, scene_guid, enabled in scenes:
        text += f"  - enabled: {int(enabled)}\n    path: {path}\n    guid: {guid(scene_guid)}\n"
    return text + "  m_configObjects: {}\n"


def shader_graph(texture_guid: str, plain_guid: str, subgraph_guid: str) -> str:
    """A Shader Graph (several JSON objects one after another, as Unity 2021 writes them):
    a texture property whose texture sits in an escaped string, a plain reference, and a
    sub graph reference in an escaped string with escaped line breaks."""
    texture = json.dumps({"texture": {"fileID": 2800000, "guid": texture_guid, "type": 3}})
    subgraph = json.dumps(
        {"subGraph": {"fileID": -5475051401550479605, "guid": subgraph_guid, "type": 3}},
        indent=4,
    )
    graph = {
        "m_SGVersion": 3,
        "m_Type": "UnityEditor.ShaderGraph.GraphData",
        "m_ObjectId": "3b1c0ab0e6f94a0ea0f4d0f0b8a8a1a2",  # 32 hex, but no "guid" key
    }
    node = {
        "m_Type": "UnityEditor.ShaderGraph.Internal.Texture2DShaderProperty",
        "m_Guid": {"m_GuidSerialized": "5d1e1a2b-0000-4000-8000-000000000001"},
        "m_Value": {"m_SerializedTexture": texture, "m_Guid": ""},
        "m_Texture": {"fileID": 2800000, "guid": plain_guid, "type": 3},
        "m_SerializedSubGraph": subgraph,
    }
    return json.dumps(graph, indent=4) + "\n\n" + json.dumps(node, indent=4) + "\n"
