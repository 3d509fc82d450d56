"""The shipped built-in checks (`messiah_condfunc.NAME`, registered under `orchestrate.checks`).

A check is called like a custom condition — `data`, `filepath`, `condition` — plus `context`
(an `EvalContext`) when the engine runs it, and returns the failing values. Each value stands for
a texture or resource: a GUID (looked up in `res_in_disk`), else the path of an existing file
(absolute or relative to the project root), else the source file itself.
"""

from __future__ import annotations

import os
import struct
from typing import Any

from .functions import is_guid
from .paths import DocumentError, localname, node_text, parse_xml

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class _Files:
    """File access for a check: through the unit's recording reader, or the disk when called bare."""

    def __init__(self, context: Any) -> None:
        self.context = context

    def read(self, path: str) -> bytes | None:
        if self.context is not None:
            return self.context.read(path)
        try:
            with open(path, "rb") as handle:
                return handle.read()
        except OSError:
            return None

    def is_file(self, path: str) -> bool:
        if self.context is not None:
            relpath = self.context.relpath(path)
            return relpath is not None and self.context.reader.exists(relpath)
        return os.path.isfile(path)

    def absolute(self, path: str) -> str:
        if self.context is not None and not path.startswith("/"):
            return self.context.abspath(path)
        return path

    def resource_files(self, guid: str) -> tuple:
        return self.context.view.resource_files(guid) if self.context is not None else ()


def _targets(value: Any, filepath: str, files: _Files) -> list[str]:
    """The attribute files a value stands for (see the module docstring)."""
    if is_guid(value):
        found = [entry.Resource for entry in files.resource_files(value)]
        if found:
            return found
    if isinstance(value, str) and value and files.is_file(value):
        return [files.absolute(value)]
    return [filepath]


def _root_child_texts(data: bytes | None, *names: str) -> dict[str, str]:
    """Texts of the named children of the document root (absent names are left out)."""
    if data is None:
        return {}
    try:
        root = parse_xml(data)
    except DocumentError:
        return {}
    found: dict[str, str] = {}
    for child in root.iterchildren("{*}*"):
        name = localname(child)
        if name in names and name not in found:
            found[name] = node_text(child)
    return found


def image_size(data: bytes | None, filename: str) -> tuple[int, int] | None:
    """(width, height) from a PNG (by signature) or TGA (by extension) header, else None."""
    if not data:
        return None
    if data.startswith(PNG_SIGNATURE) and len(data) >= 24 and data[12:16] == b"IHDR":
        return struct.unpack(">II", data[16:24])
    if filename.lower().endswith(".tga") and len(data) >= 18:
        return struct.unpack("<HH", data[12:16])
    return None


def _source_image(texture_path: str, files: _Files) -> str | None:
    """The texture's source image: the first file in its folder whose name starts with `source`."""
    context = files.context
    if context is not None:
        entry = context.view.resource_file_at(texture_path)
        if entry is not None:
            return entry.Source
    folder = os.path.dirname(texture_path)
    try:
        names = sorted(
            n
            for n in os.listdir(folder)
            if n.startswith("source") and os.path.isfile(os.path.join(folder, n))
        )
    except OSError:
        return None
    return f"{folder}/{names[0]}" if names else None


def _size_conflicts(texture_path: str, files: _Files, source: str | None) -> bool:
    # The source image first (`_source_image`): a texture without one cannot conflict, and not
    # reading its texture.xml keeps that file out of the unit's inputs (an edit to it re-checks
    # nothing).
    if source is None:
        return False
    declared = _root_child_texts(files.read(texture_path), "Width", "Height")
    try:
        size = (int(declared["Width"]), int(declared["Height"]))
    except (KeyError, ValueError):
        return False
    actual = image_size(files.read(source), source)
    return actual is not None and tuple(actual) != size


def _prefetch(files: _Files, paths: list[str]) -> None:
    """Ask for the files a check is about to read in one round trip (a worker without the
    project would otherwise fetch them one by one); nothing is recorded until they are read."""
    context = files.context
    prefetch = getattr(getattr(context, "reader", None), "prefetch", None)
    if prefetch is None:
        return
    wanted = dict.fromkeys(rel for rel in map(context.relpath, paths) if rel is not None)
    if wanted:
        prefetch(list(wanted))


def src_tex_conflict(data, filepath, condition=None, context=None) -> list:
    """Fail the values whose texture.xml Width/Height differ from their source image's header."""
    files = _Files(context)
    targets = [(value, _targets(value, filepath, files)) for value in data]
    sources = {path: _source_image(path, files) for _, paths in targets for path in paths}
    _prefetch(
        files, [p for path, source in sources.items() if source is not None for p in (path, source)]
    )
    return [
        value
        for value, paths in targets
        if any(_size_conflicts(path, files, sources[path]) for path in paths)
    ]


def compressed_src_tex(data, filepath, condition=None, context=None) -> list:
    """Fail the values whose texture.xml says <Compressed>0</Compressed>."""
    files = _Files(context)
    targets = [(value, _targets(value, filepath, files)) for value in data]
    _prefetch(files, [path for _, paths in targets for path in paths])

    def uncompressed(path: str) -> bool:
        return _root_child_texts(files.read(path), "Compressed").get("Compressed") == "0"

    return [value for value, paths in targets if any(uncompressed(path) for path in paths)]


def rigidbody_deps(data, filepath, condition=None, context=None) -> list:
    """Fail the values (dependency GUIDs) that have no resource folder (not in res_in_disk)."""
    files = _Files(context)
    return [value for value in data if not files.resource_files(value)]
