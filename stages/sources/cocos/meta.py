"""One `.meta` file as the assets it declares: the asset itself and, recursively, its sub-assets.

A meta is a JSON object (`uuid`, `importer`, `files`, `subMetas`, `userData`). Each `subMetas`
entry is an asset too, with the id `<parent id>@<key>`. Only the `userData` fields the build reads
are kept (a sprite frame's vertex arrays would otherwise fill the index of a large project).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson

from orchestrator import control_character, record

from .uuids import is_uuid

USER_FIELDS = frozenset(
    {
        # bundle folders
        "isBundle",
        "bundleName",
        "priority",
        # references in importer data
        "imageUuidOrDatabaseUri",
        "textureUuid",
        "atlasUuid",
        "spriteFrameUuid",
        "redirect",
        "type",
        # sprite frames (sizes, the rectangle in their image)
        "packable",
        "width",
        "height",
        "rawWidth",
        "rawHeight",
        "trimX",
        "trimY",
        "rotated",
        # auto atlases
        "maxWidth",
        "maxHeight",
        "padding",
        "paddingBleed",
        "allowRotation",
        "filterUnused",
        "removeTextureInBundle",
        "removeImageInBundle",
        "removeSpriteAtlasInBundle",
        # audio
        "downloadMode",
    }
)


@record
class MetaEntry(NamedTuple):
    """One asset a meta declares."""

    id: str  # uuid, or `<parent id>@<sub id>`
    importer: str
    name: str  # a sub-asset's name (its key when the meta gives none); "" for the top asset
    files: tuple[str, ...] | None  # the extensions of its imported files; None when absent
    user: dict[str, Any]  # the `userData` fields in USER_FIELDS
    parent: str  # the parent asset's id ("" for the top asset)


@record
class MetaFile(NamedTuple):
    """A parsed `.meta`: `path` is the asset's path (the meta's without `.meta`)."""

    path: str
    entries: tuple[MetaEntry, ...]  # the top asset first, then sub-assets depth-first
    problem: str | None  # why it could not be read (then `entries` is empty)


class MetaError(ValueError):
    """A meta that is not a JSON object with a uuid."""


def parse_meta(path: str, data: bytes) -> MetaFile:
    """The assets of a meta file; a malformed one gives a MetaFile with `problem` set."""
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        return MetaFile(path, (), f"not valid JSON: {error}")
    try:
        entries: list[MetaEntry] = []
        _collect(document, "", "", entries, top=True)
    except MetaError as error:
        return MetaFile(path, (), str(error))
    return MetaFile(path, tuple(entries), None)


def _collect(node: Any, parent: str, key: str, out: list[MetaEntry], top: bool) -> None:
    if not isinstance(node, dict):
        raise MetaError(f"{'the meta' if top else f'subMetas.{key}'} is not a JSON object")
    if top:
        asset_id = node.get("uuid")
        if not isinstance(asset_id, str) or not is_uuid(asset_id.lower()):
            raise MetaError(f"no valid `uuid` (got {asset_id!r})")
        asset_id = asset_id.lower()
        name = ""
    else:
        asset_id = f"{parent}@{key}"
        given = node.get("name")
        name = given if isinstance(given, str) and given else key
        for what, value in (("the key", key), ("the name", name)):
            found = control_character(value)
            if found is not None:  # names become paths, ledger and log lines: none may hide one
                raise MetaError(f"subMetas.{key!r}: {what} holds a control character ({found})")
    importer = node.get("importer")
    files = node.get("files")
    user = node.get("userData")
    out.append(
        MetaEntry(
            asset_id,
            importer if isinstance(importer, str) else "",
            name,
            tuple(str(f) for f in files) if isinstance(files, list) else None,
            {k: v for k, v in user.items() if k in USER_FIELDS} if isinstance(user, dict) else {},
            parent,
        )
    )
    subs = node.get("subMetas")
    if isinstance(subs, dict):
        for sub_key, sub in subs.items():
            _collect(sub, asset_id, str(sub_key), out, top=False)
