"""The parse half of the Cocos source: what each file of a parse unit says, read through the reader.

Pure and picklable (runs on any executor). A unit holds a folder's files with their metas; the
metas are read first so each file is scanned by what its importer says it is.
"""

from __future__ import annotations

import posixpath
import re
from typing import NamedTuple

import orjson

from orchestrator import Reader, record

from .meta import MetaFile, parse_meta
from .types import PAGE_EXTENSIONS, SPINE_ATLAS_EXTENSION, extension, is_serialized

_UUID_FIELD = re.compile(rb'"__uuid__"\s*:\s*"([^"\\]*)"')


@record
class FileScan(NamedTuple):
    """A serialized asset's references (`__uuid__` values in file order), or a spine atlas's page
    images; `problem` says why the file could not be read."""

    path: str
    uuids: tuple[str, ...]
    pages: tuple[str, ...]
    problem: str | None


@record
class SettingsScan(NamedTuple):
    """`settings/v2/packages/project.json`: the render pipeline and physics material it names."""

    render_pipeline: str
    physics_material: str
    problem: str | None


PROJECT_SETTINGS = "settings/v2/packages/project.json"


def scan_unit(paths: tuple[str, ...], reader: Reader) -> tuple:
    """MetaFile for each `.meta`, FileScan for each file whose references the build reads."""
    metas = {}
    for path in paths:
        if path.endswith(".meta"):
            metas[path[: -len(".meta")]] = _read_meta(path, reader)
    scans: list = list(metas.values())
    for path in paths:
        if path.endswith(".meta"):
            continue
        meta = metas.get(path)
        importer = meta.entries[0].importer if meta is not None and meta.entries else ""
        if is_serialized(importer, path):
            scans.append(_scan_serialized(path, reader))
        elif extension(path) == SPINE_ATLAS_EXTENSION:
            scans.append(_scan_spine_atlas(path, reader))
    return tuple(scans)


def _read_meta(path: str, reader: Reader) -> MetaFile:
    try:
        data = reader.read_bytes(path)
    except FileNotFoundError:
        return MetaFile(path[: -len(".meta")], (), "vanished while it was read")
    return parse_meta(path[: -len(".meta")], data)


def _scan_serialized(path: str, reader: Reader) -> FileScan:
    try:
        data = reader.read_bytes(path)
    except FileNotFoundError:
        return FileScan(path, (), (), "vanished while it was read")
    try:
        orjson.loads(data)  # a file that does not parse is reported, not guessed at
    except orjson.JSONDecodeError as error:
        return FileScan(path, (), (), f"not valid JSON: {error}")
    # The JSON is valid, so a `"__uuid__": "…"` match is a key and its string value, in order.
    return FileScan(
        path, tuple(normalize_id(m.decode("utf-8")) for m in _UUID_FIELD.findall(data)), (), None
    )


def normalize_id(text: str) -> str:
    """An asset id as the index keys it: the uuid lower-cased, `@…` sub-ids as written."""
    base, sep, sub = text.strip().partition("@")
    return base.lower() + sep + sub


def _scan_spine_atlas(path: str, reader: Reader) -> FileScan:
    """Page images of a spine `.atlas`: lines naming an image, relative to the atlas's folder."""
    try:
        text = reader.read_bytes(path).decode("utf-8", "replace")
    except FileNotFoundError:
        return FileScan(path, (), (), "vanished while it was read")
    folder = posixpath.dirname(path)
    pages = []
    for line in text.splitlines():
        line = line.strip()
        if line.lower().endswith(PAGE_EXTENSIONS):
            pages.append(posixpath.normpath(posixpath.join(folder, line)))
    return FileScan(path, (), tuple(pages), None)


def scan_settings(reader: Reader) -> SettingsScan:
    try:
        data = reader.read_bytes(PROJECT_SETTINGS)
    except FileNotFoundError:
        return SettingsScan("", "", None)
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        return SettingsScan("", "", f"not valid JSON: {error}")
    if not isinstance(document, dict):
        return SettingsScan("", "", "not a JSON object")
    general, physics = _object(document, "general"), _object(document, "physics")
    return SettingsScan(
        _setting_id(general.get("renderPipeline")),
        _setting_id(physics.get("defaultMaterial")),
        None,
    )


def _object(document: dict, key: str) -> dict:
    """`document[key]` when it is a JSON object, else an empty one."""
    value = document.get(key)
    return value if isinstance(value, dict) else {}


def _setting_id(value) -> str:
    """A setting names an asset by id, or by `{"__uuid__": id}` in some versions."""
    if isinstance(value, dict):
        value = value.get("__uuid__") or value.get("uuid")
    return normalize_id(value) if isinstance(value, str) else ""
