"""The Messiah asset source: resource.repository files, resource folders, worlds and levels.

Collecting fans out over parse units — one per repository, one per world or level, and batches of
attribute files — each a pure function of the files it reads, so the engine caches it by content.
`assemble` then builds, in the driver, the typed index the rules read (`MessiahIndex`, exactly as
spec/asset-project.md types it) and the source-agnostic `Asset`s the other stages see.

`build_index(root)` and `collect_project(root, options)` run the same three steps in-process.
"""

from __future__ import annotations

import dataclasses
import math
import os
import posixpath
import re
from collections import defaultdict
from typing import NamedTuple

import blake3
from lxml import etree

from orchestrator import Reader, digest_bytes, digest_value, paused_gc, record, to_posix
from stages.rules.lines import DocumentLines
from stages.sources import raise_on_fatal
from stages.sources.base import (
    HARD,
    LEVEL,
    RESOURCE,
    SOFT,
    WORLD,
    Asset,
    FileEntry,
    ParseUnit,
    Problem,
    Ref,
    SourceResult,
    unsafe_name,
)

from .index import MessiahIndex, MessiahResource, ResourceFile

REPOSITORY_FILE = "resource.repository"
# Attribute file and payload names, in the order the spec prefers them.
ATTRIBUTE_FILES = ("resource.xml", "resource", "texture.xml")
PAYLOAD_FILES = ("resource.data", "texture.data")
WORLD_SUFFIX = ".iworld"
LEVEL_SUFFIX = ".ilevel"

GUID_PATTERN = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
GUID_RE = re.compile(f"^{GUID_PATTERN}$")
# GUIDs inside free text (attribute files, Anno values): not glued to other hex digits.
GUID_IN_TEXT = re.compile(f"(?<![0-9A-Za-z]){GUID_PATTERN}(?![0-9A-Za-z])".encode("ascii"))

# Attribute files per batch, roughly: batches are hash buckets of the folder path, so adding one
# resource changes one batch, not the boundaries of every batch after it.
ATTRIBUTE_BATCH = 64


def _xml_parser() -> etree.XMLParser:
    # Project files are untrusted: no entity expansion, no network, no DTD loading.
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        huge_tree=True,
        remove_comments=True,
        remove_pis=True,
    )


def is_guid(text: str | None) -> bool:
    return bool(text) and GUID_RE.match(text) is not None  # type: ignore[arg-type]


# -- the file table, read without opening a file ------------------------------------------------


@record
class ResourceFolder(NamedTuple):
    """A GUID-named folder below a repository that holds an attribute file (relpaths)."""

    folder: str
    guid: str
    repository_dir: str  # the nearest enclosing repository folder ("" for the project root)
    attribute: str
    data: str | None
    hdr: str | None
    source: str | None
    files: tuple[str, ...]  # every file directly in the folder, sorted


@record
class Layout(NamedTuple):
    repositories: tuple[str, ...]  # relpaths of resource.repository files, in repository order
    worlds: tuple[str, ...]
    levels: tuple[str, ...]
    folders: tuple[ResourceFolder, ...]  # sorted by folder path


def _parent(path: str) -> str:
    cut = path.rfind("/")
    return path[:cut] if cut >= 0 else ""


def repository_order(repository_file: str) -> tuple[str, ...]:
    """The sort key of "repository order" (spec/asset-project.md): the repository's folder,
    compared segment by segment, so a folder's repository comes before its subfolders' ones
    (`ExtraRepo` < `ExtraRepo/Sub` < `ExtraRepoB`; plain string order puts `Sub` last)."""
    folder = _parent(repository_file)
    return tuple(folder.split("/")) if folder else ()


class _KeptLayout(NamedTuple):
    key: str  # digest of the listing's paths
    layout: Layout


_last_layout: _KeptLayout | None = None


def scan_layout(files: list[FileEntry]) -> Layout:
    """Classify the project's files: repositories, worlds, levels, resource folders.

    `plan` and `assemble` both need it for the same listing: the last result is kept, keyed by
    a digest of the paths (cheap next to classifying a 100,000-resource tree twice).
    """
    global _last_layout
    key = digest_bytes("\n".join(entry.path for entry in files).encode("utf-8"))
    if _last_layout is not None and _last_layout.key == key:
        return _last_layout.layout
    with paused_gc():
        layout = _scan_layout(files)
    _last_layout = _KeptLayout(key, layout)
    return layout


def _scan_layout(files: list[FileEntry]) -> Layout:
    repositories, worlds, levels = [], [], []
    by_folder: dict[str, list[str]] = defaultdict(list)
    for entry in files:
        path = entry.path
        folder, _, name = path.rpartition("/")
        if name == REPOSITORY_FILE:
            repositories.append(path)
        elif name.endswith(WORLD_SUFFIX):
            worlds.append(path)
        elif name.endswith(LEVEL_SUFFIX):
            levels.append(path)
        by_folder[folder].append(path)
    repository_dirs = {_parent(path) for path in repositories}
    # Resource folders are mostly siblings: the walk up to the nearest repository is the same
    # for every child of one parent.
    nearest: dict[str, str | None] = {}
    guid_match = GUID_RE.match
    folders = []
    for folder in sorted(by_folder):
        parent, _, guid = folder.rpartition("/")
        if not guid or guid_match(guid) is None:
            continue
        if parent in nearest:
            repository_dir = nearest[parent]
        else:
            repository_dir = nearest[parent] = _nearest_repository(folder, repository_dirs)
        if repository_dir is None:
            continue
        found = resource_folder(folder, guid, repository_dir, by_folder[folder])
        if found is not None:
            folders.append(found)
    return Layout(
        tuple(sorted(repositories, key=repository_order)),
        tuple(sorted(worlds)),
        tuple(sorted(levels)),
        tuple(folders),
    )


def resource_folder(
    folder: str, guid: str, repository_dir: str, paths: list[str]
) -> ResourceFolder | None:
    """The resource folder `folder` is, given the files directly in it; None without an
    attribute file."""
    cut = len(folder) + 1
    names = {path[cut:]: path for path in paths}
    attribute = next((names[n] for n in ATTRIBUTE_FILES if n in names), None)
    if attribute is None:
        return None
    data = next((names[n] for n in PAYLOAD_FILES if n in names), None)
    members = sorted(paths)
    hdr = next((p for p in members if p.endswith(".hdr")), None)
    source = next((p for p in members if p.startswith("source", cut)), None)
    return ResourceFolder(
        folder, guid, repository_dir, attribute, data, hdr, source, tuple(members)
    )


def _nearest_repository(folder: str, repository_dirs: set[str]) -> str | None:
    current = _parent(folder)
    while True:
        if current in repository_dirs:
            return current
        if not current:
            return None
        current = _parent(current)


def index_layout_digest(layout: Layout) -> str:
    """Digest of what the index takes from the listing: repositories, worlds, and per resource
    folder its GUID, repository and chosen files (not the folder's other files)."""
    # f[1:7]: (guid, repository_dir, attribute, data, hdr, source) as a plain tuple, which the
    # JSON encoder writes natively.
    return digest_value([layout.repositories, layout.worlds, [f[1:7] for f in layout.folders]])


# -- parse units and their parts -----------------------------------------------------------------


@record
class RepositoryItem(NamedTuple):
    guid: str
    type: str
    name: str
    package: str
    deps: tuple[str, ...]
    annos: tuple[tuple[str, str], ...]  # (Key, Value) in document order


@record
class RepositoryPart(NamedTuple):
    path: str
    items: tuple[RepositoryItem, ...]
    problems: tuple[Problem, ...]


@record
class MapPart(NamedTuple):
    """A world (refs = level relpaths) or a level (refs = GUIDs), in file order."""

    path: str
    kind: str
    refs: tuple[str, ...]
    problems: tuple[Problem, ...]


@record
class AttributePart(NamedTuple):
    files: tuple[tuple[str, tuple[str, ...]], ...]  # (attribute file, GUIDs it names in order)
    problems: tuple[Problem, ...]


def attribute_bucket(folder: str, bits: int) -> int:
    """The batch of a resource folder's attribute file: the first `bits` of the first 16 bits
    of the folder path's BLAKE3 (as `digest_bytes(...)[:4]`, read as bytes rather than hex)."""
    return int.from_bytes(blake3.blake3(folder.encode("utf-8")).digest(2), "big") >> (16 - bits)


def attribute_unit_id(bits: int, bucket: int) -> str:
    return f"attrs:{bits}-{bucket:04x}"


def _attribute_bucket_bits(count: int) -> int:
    """Bits of the folder hash that name a batch: about ATTRIBUTE_BATCH files per batch.

    The bit count only changes when the project doubles or halves in size.
    """
    if count <= ATTRIBUTE_BATCH:
        return 0
    return min(16, round(math.log2(count / ATTRIBUTE_BATCH)))


def _parse_xml(data: bytes, path: str) -> tuple[etree._Element | None, Problem | None]:
    try:
        return etree.fromstring(data, _xml_parser()), None
    except etree.XMLSyntaxError as exc:
        line = exc.lineno if exc.lineno else (exc.position[0] if exc.position else None)
        return None, Problem("unreadable", path, f"not well-formed XML: {exc.msg}", line=line)


def _text(element: etree._Element | None) -> str:
    return (element.text or "").strip() if element is not None else ""


def parse_repository(path: str, data: bytes) -> RepositoryPart:
    root, problem = _parse_xml(data, path)
    if problem is not None:
        fatal = dataclasses.replace(
            problem,
            kind="broken_repository",
            fatal=True,
            message=f"malformed resource.repository: {problem.message}",
        )
        return RepositoryPart(path, (), (fatal,))
    assert root is not None  # parsed, since there was no problem
    lines = DocumentLines(root, data)  # an item's line past 65,535 too, when a problem names it
    items, problems = [], []
    for item in root.iterfind("Items/Item"):
        fields: dict[str, str] = {}
        deps: list[str] = []
        annos: list[tuple[str, str]] = []
        for child in item:
            tag = child.tag
            if tag == "Deps":
                # Every Deps child, an empty one as "": the index shows what the file says;
                # references skip the empty ones (resource_asset).
                deps.append(_text(child))
            elif tag == "Annotation":
                for anno in child.iterfind("Anno"):
                    annos.append((_text(anno.find("Key")), _text(anno.find("Value"))))
            elif isinstance(tag, str) and tag not in fields:
                fields[tag] = _text(child)
        guid = fields.get("GUID", "")
        if not guid:
            problems.append(
                Problem(
                    "item_without_guid",
                    path,
                    f"Item without a GUID (Name {fields.get('Name', '')!r}) ignored",
                    line=lines.line(item),
                )
            )
            continue
        unsafe = next(
            (
                found
                for key in ("GUID", "Package", "Name", "Type")
                if (found := unsafe_name(f"Item {key}", fields.get(key, ""), path))
            ),
            None,
        )
        if unsafe is not None:  # left out (with collect.skip_broken; else the build stops)
            problems.append(dataclasses.replace(unsafe, line=lines.line(item)))
            continue
        items.append(
            RepositoryItem(
                guid,
                fields.get("Type", ""),
                fields.get("Name", ""),
                fields.get("Package", ""),
                tuple(deps),
                tuple(annos),
            )
        )
    return RepositoryPart(path, tuple(items), tuple(problems))


def normalise_level_path(text: str) -> str:
    path = posixpath.normpath(text.strip().replace("\\", "/"))
    return path[2:] if path.startswith("./") else path


def parse_map(path: str, kind: str, data: bytes) -> MapPart:
    root, problem = _parse_xml(data, path)
    if problem is not None:
        return MapPart(path, kind, (), (problem,))
    assert root is not None
    refs: list[str] = []
    if kind == WORLD:
        for element in root.iterfind(".//Level/Path"):
            text = _text(element)
            if text:
                refs.append(normalise_level_path(text))
    else:
        for element in root.iter():
            text = (element.text or "").strip() if isinstance(element.tag, str) else ""
            if text and GUID_RE.match(text):
                refs.append(text)
    return MapPart(path, kind, tuple(dict.fromkeys(refs)), ())


def guids_in_attribute_file(data: bytes) -> tuple[str, ...]:
    """The GUIDs an attribute file names, in file order, once each (a regex: no tree needed)."""
    return tuple(dict.fromkeys(m.decode("ascii") for m in GUID_IN_TEXT.findall(data)))


class MessiahSource:
    """The Messiah project format, as an `AssetSource`."""

    name = "messiah"
    # 2: a repository part keeps empty Deps texts ("").
    version = 2

    def plan(self, files: list[FileEntry], options: dict) -> list[ParseUnit]:
        layout = scan_layout(files)
        units = [ParseUnit(f"repo:{path}", "repository", (path,)) for path in layout.repositories]
        units += [ParseUnit(f"map:{path}", WORLD, (path,)) for path in layout.worlds]
        units += [ParseUnit(f"map:{path}", LEVEL, (path,)) for path in layout.levels]
        bits = _attribute_bucket_bits(len(layout.folders))
        batches: dict[int, list[str]] = defaultdict(list)
        for folder in layout.folders:
            batches[attribute_bucket(folder.folder, bits)].append(folder.attribute)
        units += [
            ParseUnit(attribute_unit_id(bits, bucket), "attributes", tuple(batches[bucket]))
            for bucket in sorted(batches)
        ]
        return units

    def parse(self, unit: ParseUnit, reader: Reader, options: dict):
        if unit.kind == "repository":
            path = unit.files[0]
            return parse_repository(path, reader.read_bytes(path))
        if unit.kind in (WORLD, LEVEL):
            path = unit.files[0]
            return parse_map(path, unit.kind, reader.read_bytes(path))
        found, problems = [], []
        for path in unit.files:
            try:
                found.append((path, guids_in_attribute_file(reader.read_bytes(path))))
            except FileNotFoundError:
                problems.append(Problem("unreadable", path, "attribute file vanished while read"))
        return AttributePart(tuple(found), tuple(problems))

    def assemble(
        self, root: str, files: list[FileEntry], parts: dict, options: dict
    ) -> SourceResult:
        """`parts` may carry `digests` (unit id → stored result digest, as the collect stage's
        do): then the index carries a digest derived from them instead of hashing its content."""
        assembler = _Assembler(to_posix(root).rstrip("/") or "/", scan_layout(files), parts)
        with paused_gc():
            return assembler.result()


def item_resource(item: RepositoryItem, repository: Repository) -> MessiahResource:
    """An Item of a repository as the index lists it."""
    return tuple.__new__(
        MessiahResource,
        (
            item.guid,
            item.package,
            item.name,
            item.type,
            item.deps,
            repository.name,
            f"{item.package}/{item.name}",
            repository.path,
        ),
    )


class Repository(NamedTuple):
    """A repository as its resources name it."""

    name: str  # its folder's name (the project's, for the top-level repository)
    path: str  # its resource.repository's path, project-relative (absolute once rooted)


class SameGuid(NamedTuple):
    """A GUID's items and the MessiahResources made of them, in repository order, then
    document order."""

    items: list[RepositoryItem]
    resources: list[MessiahResource]


class _Assembler:
    """Builds the index and the assets from the parse parts (driver side, once per build).

    Every resource is touched once per build, so the per-resource work is kept to lookups:
    per-repository facts are computed once, and equal references share one `Ref`.
    """

    def __init__(self, root: str, layout: Layout | None, parts: dict) -> None:
        self.root = root
        self.layout = layout  # None: patching (patching.py), not assembling
        self.parts = parts
        self.problems: list[Problem] = []
        self._repositories: dict[str, Repository] = {}
        self._refs: dict[tuple[str, str, str], Ref] = {}
        self._dep_refs: dict[str, Ref] = {}  # the same for (target, HARD, "Deps")

    def repository_name(self, repository_file: str) -> str:
        folder = _parent(repository_file)
        return folder[folder.rfind("/") + 1 :] if folder else posixpath.basename(self.root)

    def repository(self, repository_dir: str) -> Repository:
        """The repository of a repository folder."""
        known = self._repositories.get(repository_dir)
        if known is None:
            path = f"{repository_dir}/{REPOSITORY_FILE}" if repository_dir else REPOSITORY_FILE
            known = self._repositories[repository_dir] = Repository(
                self.repository_name(path), path
            )
        return known

    def result(self) -> SourceResult:
        layout, parts = self.layout, self.parts
        assert layout is not None
        repository_parts = [parts[f"repo:{path}"] for path in layout.repositories]
        map_parts = {path: parts[f"map:{path}"] for path in layout.worlds + layout.levels}
        attribute_refs: dict[str, tuple[str, ...]] = {}
        for unit_id, part in parts.items():
            if unit_id.startswith("attrs:"):
                attribute_refs.update(part.files)
                self.problems.extend(part.problems)

        by_guid: dict[str, SameGuid] = {}
        all_resources: list[MessiahResource] = []
        new_tuple = tuple.__new__  # a NamedTuple without its Python-level __new__
        for part in repository_parts:
            self.problems.extend(part.problems)
            repository = self.repository(_parent(part.path))
            for item in part.items:
                guid = item.guid
                resource = item_resource(item, repository)
                known = by_guid.get(guid)
                if known is None:
                    by_guid[guid] = new_tuple(SameGuid, ([item], [resource]))
                else:
                    known.items.append(item)
                    known.resources.append(resource)
                all_resources.append(resource)

        index = self.build_index(by_guid, all_resources, map_parts)
        assets: dict[str, Asset] = {}
        for paths in (layout.worlds, layout.levels):
            for path in paths:
                part = map_parts[path]
                self.problems.extend(part.problems)
                assets[path] = self.map_asset(part)
        folders_by_guid: dict[str, list[ResourceFolder]] = {}
        for folder in layout.folders:
            same_guid = folders_by_guid.get(folder.guid)
            if same_guid is None:
                folders_by_guid[folder.guid] = [folder]
            else:
                same_guid.append(folder)
        no_folders: list[ResourceFolder] = []
        for guid in sorted(by_guid.keys() | folders_by_guid.keys()):
            known = by_guid.get(guid)
            if known is None:
                assets[guid] = self.resource_asset(
                    guid, (), (), folders_by_guid[guid], attribute_refs, index
                )
            else:
                assets[guid] = self.resource_asset(
                    guid,
                    known.items,
                    known.resources,
                    folders_by_guid.get(guid, no_folders),
                    attribute_refs,
                    index,
                )
        return SourceResult(assets=assets, index=index, problems=self.problems)

    def map_asset(self, part: MapPart) -> Asset:
        """The asset of a world or a level."""
        path, kind = part.path, part.kind
        label = "level" if kind == WORLD else "placed"
        return Asset(
            path,
            kind,
            "World" if kind == WORLD else "Level",
            (path,),
            (_parent(path),),
            (path,),
            tuple(self.ref(target, HARD, label) for target in part.refs),
            name=posixpath.basename(path),
        )

    @staticmethod
    def used_levels(worlds: list[MapPart]) -> frozenset[str]:
        """`ilevels`: every level a world names (project-relative, as the index is stored)."""
        return frozenset(level for part in worlds for level in part.refs)

    def resource_file(
        self, folder: ResourceFolder, resources: tuple[MessiahResource, ...]
    ) -> ResourceFile:
        """A resource folder as the index lists it (its Type from the GUID's items; its paths
        project-relative, as the index is stored)."""
        repository = self.repository(folder.repository_dir)
        return tuple.__new__(
            ResourceFile,
            (
                folder.guid,
                repository.name,
                self.folder_type(folder.attribute, repository.path, resources),
                folder.attribute,
                folder.data,
                folder.hdr,
                folder.source,
            ),
        )

    def build_index(self, by_guid, all_resources, map_parts) -> MessiahIndex:
        res_in_repo = {guid: tuple(known.resources) for guid, known in by_guid.items()}
        res_virt_info: dict[str, list[MessiahResource]] = {}
        for resource in all_resources:  # repository order, then document order
            known = res_virt_info.get(resource.VirtualPath)
            if known is None:
                res_virt_info[resource.VirtualPath] = [resource]
            else:
                known.append(resource)
        res_in_disk: dict[str, list[ResourceFile]] = {}
        assert self.layout is not None
        for folder in self.layout.folders:  # sorted folder order
            guid = folder.guid
            entry = self.resource_file(folder, res_in_repo.get(guid, ()))
            files_of_guid = res_in_disk.get(guid)
            if files_of_guid is None:
                res_in_disk[guid] = [entry]
            else:
                files_of_guid.append(entry)
        ilevels = self.used_levels([map_parts[path] for path in self.layout.worlds])
        return MessiahIndex(
            root="",  # paths project-relative: stored, it does not depend on the checkout's place
            res_in_repo=res_in_repo,
            res_in_disk={g: tuple(fs) for g, fs in res_in_disk.items()},
            res_virt_info={vp: tuple(rs) for vp, rs in res_virt_info.items()},
            ilevels=ilevels,
            known_digest=self.index_digest(),
        )

    def index_digest(self) -> str:
        """The index is a function of the listing's resource folders and the parts of the
        repositories and worlds (and of the root's name when a repository lies at the root: it
        names that repository): with their stored digests, that names it ("" without)."""
        digests = getattr(self.parts, "digests", None)
        if digests is None:
            return ""
        layout = self.layout
        assert layout is not None
        named_by_root = REPOSITORY_FILE in layout.repositories
        return digest_value(
            [
                "messiah-index",
                3,  # 3: project-relative paths; 2: repositories in repository_order
                self.repository_name(REPOSITORY_FILE) if named_by_root else "",
                index_layout_digest(layout),
                [digests[f"repo:{path}"] for path in layout.repositories],
                [digests[f"map:{path}"] for path in layout.worlds],
            ]
        )

    @staticmethod
    def folder_type(attribute: str, own_repository: str, items: tuple[MessiahResource, ...]) -> str:
        """A resource folder's Type: its own repository's item's, else the GUID's first item's,
        else what its attribute file's name says."""
        for resource in items:
            if resource.RepositoryFullPath == own_repository:
                return resource.Type
        if items:
            return items[0].Type
        return "Texture" if attribute.endswith("/texture.xml") else ""

    def ref(self, target: str, strength: str, label: str) -> Ref:
        """One shared Ref per (target, strength, label): most are Deps of a few popular GUIDs."""
        key = (target, strength, label)
        known = self._refs.get(key)
        if known is None:
            known = self._refs[key] = Ref(target, strength, label)
        return known

    def resource_asset(self, guid, items, resources, folders, attribute_refs, index) -> Asset:
        ref = self.ref
        refs: dict[str, Ref] = {}
        if len(items) == 1:
            # One item: every hard reference comes before every soft one, so the first mention
            # of a target is the one kept.
            item = items[0]
            if item.deps:
                dep_refs = self._dep_refs
                for dep in item.deps:
                    if dep and dep not in refs:  # an empty <Deps/> is no reference
                        known = dep_refs.get(dep)
                        if known is None:
                            known = dep_refs[dep] = Ref(dep, HARD, "Deps")
                        refs[dep] = known
            for key, value in item.annos:
                for target in guids_in_attribute_file(value.encode("utf-8")):
                    if target not in refs:
                        refs[target] = ref(target, SOFT, key or "Anno")
        else:

            def add(target: str, strength: str, label: str) -> None:
                known = refs.get(target)
                if known is None:
                    refs[target] = ref(target, strength, label)
                elif strength == HARD and known.strength == SOFT:
                    refs[target] = ref(target, HARD, label)

            for item in items:
                for dep in item.deps:
                    if dep:
                        add(dep, HARD, "Deps")
                for key, value in item.annos:
                    for target in guids_in_attribute_file(value.encode("utf-8")):
                        add(target, SOFT, key or "Anno")
        for folder in folders:
            for target in attribute_refs.get(folder.attribute, ()):
                # an attribute file naming its own GUID is not a reference
                if target != guid and target not in refs:
                    refs[target] = ref(target, SOFT, "attribute file")
        if resources:
            first = resources[0]
            type_, package, name = first.Type, first.Package, first.Name
            virtual_paths = (
                (first.VirtualPath,)
                if len(resources) == 1
                else tuple(dict.fromkeys(r.VirtualPath for r in resources))
            )
        else:
            type_, package, name = index.res_in_disk[guid][0].Type, "", guid
            virtual_paths = ()
        return Asset(
            id=guid,
            kind=RESOURCE,
            type=type_,
            virtual_paths=virtual_paths,
            folders=(
                (folders[0].folder,) if len(folders) == 1 else tuple(f.folder for f in folders)
            ),
            files=folders[0].files if folders else (),
            refs=tuple(refs.values()),
            package=package,
            name=name,
            items=len(items),
        )


SOURCE = MessiahSource()


# -- in-process convenience ----------------------------------------------------------------------


def walk_project(root: str) -> list[FileEntry]:
    """Every file below `root` as sorted `FileEntry`s with `/` relpaths (symlinked dirs skipped)."""
    root = os.path.abspath(root)
    entries: list[FileEntry] = []
    stack = [(root, "")]
    while stack:
        folder, prefix = stack.pop()
        with os.scandir(folder) as listing:
            for item in listing:
                relpath = f"{prefix}{item.name}"
                if item.is_dir(follow_symlinks=False):
                    stack.append((item.path, relpath + "/"))
                elif item.is_file():
                    st = item.stat()
                    entries.append(FileEntry(relpath, st.st_size, st.st_mtime_ns, st.st_ino))
    entries.sort(key=lambda e: e.path)
    return entries


def collect_project(root: str, options: dict | None = None) -> SourceResult:
    """Plan, parse and assemble a Messiah project in this process, reading from disk.

    `options` is the build file's `collect` section; a malformed resource.repository raises
    `ProjectError` unless `skip_broken` is true (then it is only reported in `problems`). The
    index holds absolute paths, as the spec's predefined sets do (the build stores it with
    project-relative ones: index.py).
    """
    options = dict(options or {})
    files = walk_project(root)
    if options.get("exclude"):
        from stages.algorithms.globs import compile_globs

        excluded = compile_globs(options["exclude"])
        files = [entry for entry in files if not excluded(entry.path)]
    reader = Reader(root)
    parts = {unit.id: SOURCE.parse(unit, reader, options) for unit in SOURCE.plan(files, options)}
    result = SOURCE.assemble(reader.root, files, parts, options)
    raise_on_fatal(result.problems, bool(options.get("skip_broken", False)))
    result.index = result.index.at(reader.root)  # the sets as the spec has them: absolute
    return result


def build_index(root: str) -> MessiahIndex:
    """The rule engine's predefined sets for the project at `root` (broken files are skipped)."""
    return collect_project(root, {"skip_broken": True}).index
