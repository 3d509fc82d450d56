"""Reading an output folder as it was published: the manifest, each bundle's table of contents,
the JSON reports and link.xml. Only files: it works on a CI artifact without the project."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import orjson
from lxml import etree

from orchestrator import OutputFolder, ProjectError, atomic_write
from stages.bundlefile.format import BundleFormatError, BundleReader, TocEntry
from stages.publishing.manifests import LINK_XML, MANIFEST, STAGING

VALIDATE_JSON = "reports/validate.json"
COOKLIST_JSON = "reports/cooklist.json"
#: The files the page's content is made of (the run record aside).
CONTENT_FILES = (MANIFEST, VALIDATE_JSON, COOKLIST_JSON, LINK_XML)
LOOSE_FILES = (MANIFEST, STAGING, LINK_XML)


class NotABuildOutput(ProjectError):
    """The folder holds no build (no readable manifest.json): exit 2."""


@dataclass(frozen=True)
class BundleContents:
    """A bundle's table of contents, or why it could not be read."""

    entries: tuple[TocEntry, ...]
    error: str | None = None


def open_output(output_dir: Path, relpath: str, folder: OutputFolder | None = None) -> BinaryIO:
    """A file of the output folder, opened without following a link (what a link planted there
    points to must not find its way into a page): OSError when absent or refused. `folder`:
    the output folder already opened (a new one resolves its path and opens its folders)."""
    folder = folder or OutputFolder(output_dir)
    try:
        return os.fdopen(folder.open(relpath, os.O_RDONLY), "rb")
    except ProjectError as exc:
        raise OSError(errno.EPERM, exc.message, str(Path(output_dir) / relpath)) from None


def read_output(output_dir: Path, relpath: str) -> bytes:
    """The bytes of a file of the output folder (see `open_output`)."""
    with open_output(output_dir, relpath) as handle:
        return handle.read()


def read_manifest(output_dir: Path) -> dict:
    """The manifest of an output folder; NotABuildOutput when it is absent or not a manifest."""
    path = Path(output_dir) / MANIFEST
    if not Path(output_dir).is_dir():
        raise NotABuildOutput("not a folder", file=str(output_dir))
    try:
        document = orjson.loads(read_output(output_dir, MANIFEST))
    except FileNotFoundError:
        raise NotABuildOutput(
            "not a build output folder (no manifest.json)", file=str(output_dir)
        ) from None
    except (OSError, orjson.JSONDecodeError) as exc:
        raise NotABuildOutput(f"unreadable manifest: {exc}", file=str(path)) from None
    if (
        not isinstance(document, dict)
        or not isinstance(document.get("bundles"), dict)
        or not isinstance(document.get("assets"), dict)
    ):
        raise NotABuildOutput("not a build manifest (no bundles or assets)", file=str(path))
    return document


def read_toc(
    output_dir: Path, relpath: str, folder: OutputFolder | None = None
) -> tuple[TocEntry, ...]:
    """A bundle file's table of contents (the header and TOC only: one short read)."""
    path = Path(output_dir) / relpath
    try:
        with open_output(output_dir, relpath, folder) as handle:
            return tuple(BundleReader(handle).entries)
    except FileNotFoundError:
        raise ProjectError(
            "the manifest names a bundle file that is missing", file=str(path)
        ) from None
    except (OSError, BundleFormatError) as exc:
        raise ProjectError(f"unreadable bundle: {exc}", file=str(path)) from None


def bundle_contents(
    output_dir: Path, manifest: dict, cache: str | None = None
) -> dict[str, BundleContents]:
    """Every bundle's table of contents; a missing or damaged file is noted, not fatal (the page
    must still open for a broken build).

    With `cache` (a file of the output folder), tables of contents read before are taken from it for bundle files
    whose signature (size, mtime, inode) is the one they were read under, so a rebuild that
    rewrote one bundle of thousands reads one."""
    folder = OutputFolder(output_dir)
    known = _read_toc_cache(output_dir, cache) if cache is not None else {}
    kept: dict[str, list] = {}
    contents = {}
    for name, bundle in manifest["bundles"].items():
        relpath = bundle["file"]
        try:
            st = folder.lstat(relpath)
        except (OSError, ProjectError):
            st = None
        signature = [st.st_size, st.st_mtime_ns, st.st_ino] if st is not None else None
        cached = known.get(relpath)
        if signature is not None and cached is not None and cached[0] == signature:
            entries = tuple(TocEntry(*row) for row in cached[1])
            contents[name] = BundleContents(entries)
            kept[relpath] = cached
            continue
        try:
            entries = read_toc(output_dir, relpath, folder)  # one folder: 6,555 bundles
        except ProjectError as exc:
            contents[name] = BundleContents((), exc.describe())
            continue
        contents[name] = BundleContents(entries)
        if signature is not None:
            kept[relpath] = [signature, [_toc_row(entry) for entry in entries]]
    if cache is not None and kept != known:
        atomic_write(folder, cache, orjson.dumps({"version": TOC_CACHE_VERSION, "bundles": kept}))
    return contents


TOC_CACHE_VERSION = 1


def _toc_row(entry: TocEntry) -> list:
    return [entry.id, entry.name, entry.offset, entry.stored_size, entry.size, entry.hash]


def _read_toc_cache(output_dir: Path, relpath: str) -> dict[str, list]:
    try:
        document = orjson.loads(read_output(output_dir, relpath))
    except (OSError, orjson.JSONDecodeError):
        return {}
    if not isinstance(document, dict) or document.get("version") != TOC_CACHE_VERSION:
        return {}
    bundles = document.get("bundles")
    return bundles if isinstance(bundles, dict) else {}


def read_json(output_dir: Path, relpath: str) -> dict | None:
    """A JSON report of the folder, or None when it is absent or unreadable."""
    try:
        document = orjson.loads(read_output(output_dir, relpath))
    except (OSError, orjson.JSONDecodeError):
        return None
    return document if isinstance(document, dict) else None


def link_xml_types(output_dir: Path) -> list[str] | None:
    """The Types link.xml preserves, as `assembly: Type` sorted; None without a link.xml."""
    path = Path(output_dir) / LINK_XML
    try:
        data = read_output(output_dir, LINK_XML)
        root = etree.fromstring(data, etree.XMLParser(resolve_entities=False))
    except OSError:
        return None
    except etree.XMLSyntaxError as exc:
        raise ProjectError(f"link.xml is not XML: {exc}", file=str(path)) from None
    found: list[str] = []
    for assembly in root.iter("assembly"):
        owner = assembly.get("fullname", "")
        found.extend(f"{owner}: {node.get('fullname', '')}" for node in assembly.iter("type"))
    return sorted(found)
