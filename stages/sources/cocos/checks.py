"""Rule checks for Cocos projects (entry-point group `orchestrate.checks`). Each reads the Cocos
project index, so the validate stage keys its results on the index's digest.

- `["condfunc.cocos_uuid_resolves"]` fails every value that names nothing: an id (plain,
  `uuid@sub`, or Creator's compressed form) that is no asset, script or folder of the project
  or of the engine's built-ins.
- `["condfunc.cocos_in_auto_atlas"]` fails sprite-frame ids whose file lies under no folder
  holding an auto atlas (`.pac`).
- `["condfunc.cocos_bundle_not_nested"]`, on a bundle folder's meta, fails when another bundle
  folder lies inside it or around it.
"""

from __future__ import annotations


def _index(context, name: str):
    index = getattr(getattr(context, "view", None), "index", None)
    if not hasattr(index, "resolves"):
        raise ValueError(f"condfunc.{name} needs a Cocos project index (source: cocos)")
    return index


def uuid_resolves(data: list, filepath: str, condition: list, context=None) -> list:
    """The values that name no asset of this project."""
    index = _index(context, "cocos_uuid_resolves")
    return [value for value in data if not isinstance(value, str) or not index.resolves(value)]


def in_auto_atlas(data: list, filepath: str, condition: list, context=None) -> list:
    """The sprite-frame ids that no auto atlas folder holds."""
    index = _index(context, "cocos_in_auto_atlas")
    return [
        value
        for value in data
        if not isinstance(value, str) or not index.in_auto_atlas_folder(value)
    ]


def bundle_not_nested(data: list, filepath: str, condition: list, context=None) -> list:
    """`<folder> and <other>` for each bundle folder nesting with this meta's folder."""
    index = _index(context, "cocos_bundle_not_nested")
    if not data:
        return []  # not a bundle folder
    root = context.root.rstrip("/") + "/"
    path = filepath.replace("\\", "/")
    folder = path[len(root) :] if path.startswith(root) else path
    folder = folder[: -len(".meta")] if folder.endswith(".meta") else folder
    return [
        f"{folder} and {other}"
        for other in sorted(index.bundle_folders.values())
        if other != folder and (other.startswith(folder + "/") or folder.startswith(other + "/"))
    ]
