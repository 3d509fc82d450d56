"""Hand-made Unity projects for tests: files with `.meta`s, references, prefabs, build settings."""

from __future__ import annotations

from pathlib import Path

HEADER = "%YAML 1.1\n%TAG !u! tag:unity3d.com,2011:\n"


def guid(n: int) -> str:
    return f"{n:032x}"


def meta_text(asset_guid: str, bundle: str = "", variant: str = "", folder: bool = False) -> str:
    lines = ["fileFormatVersion: 2", f"guid: {asset_guid}"]
    if folder:
        lines.append("folderAsset: yes")
    lines += [
        "DefaultImporter:",
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
