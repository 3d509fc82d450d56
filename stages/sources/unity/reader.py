"""The Unity asset source (`source: unity`): a text-serialized Unity project as assets with references.

Asset ids are project-relative paths (`Assets/…/x.prefab`); `.meta` GUIDs resolve references. Roots
are the enabled scenes of EditorBuildSettings and everything in `Resources/` folders. Nested prefabs
are followed through: Unity bakes a nested prefab's content into its parent, so the parent gets a
`m_SourcePrefab` reference to the nested prefab plus the nested content's references (hoisted),
but not the prefabs nested deeper — which is what Unity's bundle manifests record. Shader Graph
files are JSON: each `"guid"` key in them is a reference. Beyond the assets, the result names the
bundles `.meta` files assign (`bundles.from_meta`), the files Unity never bundles (DefaultAssets),
the assembly of its types (`UnityEngine`, for link.xml) and `copy` as the cooker of unlisted Types.
"""

from __future__ import annotations

import os
import posixpath
from typing import Any, NamedTuple

from orchestrator import Reader, record, to_posix
from stages.sources.base import (
    HARD,
    RESOURCE,
    WORLD,
    Asset,
    FileEntry,
    ParseUnit,
    Problem,
    Ref,
    SourceResult,
    unsafe_name,
)

from .classes import (
    DEFAULT_IMPORTER,
    RUNTIME_ASSEMBLY,
    asset_type,
    extension,
    is_code,
    is_default_asset,
    is_json_serialized,
    is_native,
)
from .documents import (
    MetaInfo,
    RawRef,
    YAMLError,
    first_class_id,
    is_text_serialized,
    load_documents,
    read_meta,
    scan_json_references,
    scan_references,
)
from .index import UnityIndex, bundles_from_meta

__all__ = [
    "SOURCE",
    "UnitySource",
    "UnityIndex",
    "bundles_from_meta",
    "collect_unity",
    "walk_project",
]

SETTINGS_FILE = "ProjectSettings/EditorBuildSettings.asset"
STREAMING_ASSETS = (
    "Assets/StreamingAssets"  # build output with `.meta` files of its own: not content
)
CONTENT_FOLDERS = ("Assets/", "Packages/")
PROJECT_FOLDERS = ("Assets", "Packages", "ProjectSettings")
DEFAULT_BATCH = 256

# Fields that name program code (MonoScripts): never content references.
CODE_FIELDS = frozenset({"m_Script", "script"})
MONOSCRIPT_FILE_ID = 11500000
# Fields by which a prefab instance points into the prefab it instantiates: the instance itself,
# not a reference of the content (they become one `m_SourcePrefab` reference).
INSTANCE_FIELDS = frozenset(
    {"m_SourcePrefab", "target", "m_CorrespondingSourceObject", "m_PrefabParentObject"}
)
NESTED_LABEL = "m_SourcePrefab"
NOT_BUNDLED_REASON = (
    f"its .meta names the {DEFAULT_IMPORTER}: Unity imports it as a DefaultAsset, "
    f"which it never puts in a bundle"
)
# Unity ships an asset's bytes as they are (an `.xml` TextAsset included): no canonicalizing cooker.
DEFAULT_COOKER = "copy"


@record
class ScanProblem(NamedTuple):
    """What a parse unit found wrong with a file, reported by the driver as a `Problem`."""

    kind: str
    message: str
    line: int | None = None


@record
class FileScan(NamedTuple):
    """What parsing found in one asset file."""

    path: str
    first_class: int | None
    refs: tuple[RawRef, ...]
    problem: ScanProblem | None


@record
class MetaScan(NamedTuple):
    """One `.meta` file (info None: no valid guid in it)."""

    path: str
    info: MetaInfo | None


@record
class BuildScene(NamedTuple):
    path: str
    guid: str
    enabled: bool


@record
class SettingsScan(NamedTuple):
    """The scenes listed in EditorBuildSettings, in build order."""

    scenes: tuple[BuildScene, ...]
    problem: ScanProblem | None


def is_builtin_guid(guid: str) -> bool:
    """Unity's built-in resource files (`0000000000000000e000000000000000`, `…f000…`)."""
    return len(guid) == 32 and guid.startswith("0" * 16) and guid[17:] == "0" * 15


class UnitySource:
    """The Unity project format. One module-level instance (SOURCE) so it pickles by reference."""

    name = "unity"
    version = 2  # 2: a `.meta`'s importer; Shader Graph references

    # -- plan ---------------------------------------------------------------------------------
    def plan(self, files: list[FileEntry], options: dict) -> list[ParseUnit]:
        """One unit per folder (split past `batch_size` files) so ids survive unrelated edits."""
        batch = int(options.get("batch_size", DEFAULT_BATCH))
        by_folder: dict[str, list[str]] = {}
        for entry in files:
            if _is_content_file(entry.path):
                by_folder.setdefault(posixpath.dirname(entry.path), []).append(entry.path)
        units = [ParseUnit(id="unity:settings", kind="settings", files=(SETTINGS_FILE,))]
        for folder in sorted(by_folder):
            paths = sorted(by_folder[folder])
            for start in range(0, len(paths), batch):
                suffix = f"#{start // batch}" if start else ""
                units.append(
                    ParseUnit(
                        id=f"unity:{folder}{suffix}",
                        kind="files",
                        files=tuple(paths[start : start + batch]),
                    )
                )
        return units

    # -- parse --------------------------------------------------------------------------------
    def parse(self, unit: ParseUnit, reader: Reader, options: dict) -> Any:
        """Scan a unit's files (metas, native assets); returns a tuple of scans."""
        if unit.kind == "settings":
            return _parse_settings(reader)
        return tuple(
            _parse_meta(path, reader) if path.endswith(".meta") else _parse_asset(path, reader)
            for path in unit.files
        )

    # -- assemble -----------------------------------------------------------------------------
    def assemble(
        self, root: str, files: list[FileEntry], parts: dict[str, Any], options: dict
    ) -> SourceResult:
        """Resolve GUIDs, hoist nested prefab content, find roots, orphans and external GUIDs."""
        return _Assembler(to_posix(os.path.abspath(root)), files, parts).run()


SOURCE = UnitySource()


def _is_content_file(path: str) -> bool:
    if not path.startswith(CONTENT_FOLDERS):
        return False
    if path.startswith(STREAMING_ASSETS + "/"):
        return False
    # Unity ignores hidden files and folders and those ending in `~`.
    if any(part.startswith(".") or part.endswith("~") for part in path.split("/")):
        return False
    return not is_code(path)  # code is never content; its `.meta` still maps its GUID


def _parse_meta(path: str, reader: Reader) -> MetaScan:
    try:
        return MetaScan(path, read_meta(reader.read_bytes(path)))
    except FileNotFoundError:
        return MetaScan(path, None)


def _parse_asset(path: str, reader: Reader) -> FileScan:
    """Native and JSON-serialized assets (Shader Graph) are read and scanned; imported files
    (textures, audio, text) hold no references."""
    json_serialized = is_json_serialized(path)
    if not (json_serialized or is_native(path)):
        return FileScan(path, None, (), None)
    try:
        data = reader.read_bytes(path)
    except (FileNotFoundError, OSError) as error:
        return FileScan(path, None, (), ScanProblem("unreadable", f"cannot read: {error}"))
    if json_serialized:
        return FileScan(path, None, tuple(scan_json_references(data)), None)
    if not is_text_serialized(data):
        return FileScan(
            path,
            None,
            (),
            ScanProblem(
                "binary_asset",
                "binary-serialized asset: its references are not read "
                "(set Asset Serialization to Force Text)",
            ),
        )
    return FileScan(path, first_class_id(data), tuple(scan_references(data)), None)


def _parse_settings(reader: Reader) -> SettingsScan:
    """EditorBuildSettings is small and structured: PyYAML reads it exactly."""
    try:
        data = reader.read_bytes(SETTINGS_FILE)
    except FileNotFoundError:
        return SettingsScan(
            (), ScanProblem("missing_build_settings", "no EditorBuildSettings: no scene roots")
        )
    try:
        documents = load_documents(data)
    except YAMLError as error:
        line = getattr(getattr(error, "problem_mark", None), "line", None)
        return SettingsScan(
            (),
            ScanProblem(
                "broken_build_settings",
                f"not valid YAML: {error}",
                line + 1 if line is not None else None,
            ),
        )
    scenes = []
    for document in documents:
        doc = document.body
        body: Any = next(iter(doc.values()), {}) if isinstance(doc, dict) else {}
        for scene in (body.get("m_Scenes") or []) if isinstance(body, dict) else []:
            if isinstance(scene, dict) and scene.get("path"):
                scenes.append(
                    BuildScene(
                        str(scene["path"]),
                        str(scene.get("guid") or "").lower(),
                        str(scene.get("enabled", 1)) not in ("0", "False", "false"),
                    )
                )
    return SettingsScan(tuple(scenes), None)


class _Assembler:
    """The driver-side half of collect: everything that needs the whole project at once."""

    def __init__(self, root: str, files: list[FileEntry], parts: dict[str, Any]) -> None:
        self.root = root
        self.existing = {entry.path for entry in files}
        self.folders = _with_ancestors({posixpath.dirname(path) for path in self.existing})
        self.metas: dict[str, MetaInfo] = {}
        self.scans: dict[str, FileScan] = {}
        self.settings = SettingsScan((), None)
        self.problems: list[Problem] = []
        self._reported: set[tuple[str, str]] = set()
        self.external: set[str] = set()
        for unit_id in sorted(parts):
            part = parts[unit_id]
            if isinstance(part, SettingsScan):
                self.settings = part
                continue
            for scan in part:
                if isinstance(scan, MetaScan):
                    self._add_meta(scan)
                else:
                    self.scans[scan.path] = scan

    def run(self) -> SourceResult:
        guid_to_path = self._guid_map()
        self._report_orphan_metas()
        resolved = {
            path: self._resolve(scan, guid_to_path)
            for path, scan in sorted(self.scans.items())
            if self._is_asset(path)
        }
        nested = {path: _nested_prefabs(refs) for path, refs in resolved.items()}
        hoister = _Hoister(resolved, nested)
        assets = {path: self._asset(path, hoister.refs_of(path)) for path in resolved}
        scenes = self._scene_roots(guid_to_path)
        resources = [path for path in assets if _in_resources_folder(path)]
        orphans = tuple(p.file[: -len(".meta")] for p in self.problems if p.kind == "orphan_meta")
        index = UnityIndex(
            guid_to_path=guid_to_path,
            metas=dict(sorted(self.metas.items())),
            asset_ids=tuple(assets),
            scenes=tuple(scenes),
            external=tuple(sorted(self.external)),
            orphans=tuple(sorted(orphans)),
        )
        return SourceResult(
            assets=assets,
            index=index,
            problems=self.problems,
            roots={"scenes": scenes, "resources": resources},
            external=index.external,
            bundles=bundles_from_meta(index),
            type_assemblies={a.type: RUNTIME_ASSEMBLY for a in assets.values()},
            default_cooker=DEFAULT_COOKER,
            not_bundled={
                path: NOT_BUNDLED_REASON
                for path in assets
                if path in self.metas
                and is_default_asset(path, self.metas[path].importer, self.metas[path].is_folder)
            },
        )

    # -- metas --------------------------------------------------------------------------------
    def _add_meta(self, scan: MetaScan) -> None:
        if scan.info is None:
            self._problem("meta_without_guid", scan.path, "no valid `guid:` in this .meta file")
            return
        for what, value in (
            ("assetBundleName", scan.info.bundle_name),
            ("assetBundleVariant", scan.info.bundle_variant),
        ):
            unsafe = unsafe_name(what, value, scan.path)
            if unsafe is not None:  # the .meta is left out (collect.skip_broken; else exit 2)
                self.problems.append(unsafe)
                return
        self.metas[scan.path[: -len(".meta")]] = scan.info

    def _guid_map(self) -> dict[str, str]:
        guid_to_path: dict[str, str] = {}
        for path in sorted(self.metas):
            guid = self.metas[path].guid
            if guid in guid_to_path:
                # Unity gives one of the two a new GUID on import; the first path keeps it here.
                self._problem(
                    "duplicate_guid",
                    path + ".meta",
                    f"GUID {guid} is also declared by {guid_to_path[guid]}.meta",
                )
                continue
            guid_to_path[guid] = path
        return guid_to_path

    def _report_orphan_metas(self) -> None:
        for path in sorted(self.metas):
            if path in self.existing or path in self.folders:
                continue
            if self.metas[path].is_folder and os.path.isdir(f"{self.root}/{path}"):
                continue  # an empty folder: the file table lists files only
            self._problem("orphan_meta", path + ".meta", f"the .meta exists but {path} does not")

    # -- assets -------------------------------------------------------------------------------
    def _is_asset(self, path: str) -> bool:
        if path in self.metas:
            return True
        if path.startswith("Assets/"):
            self._problem(
                "missing_meta", path, "no .meta file: Unity has not imported it (no GUID)"
            )
            return True
        return False  # Packages/manifest.json and other package bookkeeping

    def _resolve(self, scan: FileScan, guid_to_path: dict[str, str]) -> list[tuple[str, str, bool]]:
        """(target, label, is-instance-field) per content reference, in file order."""
        if scan.problem is not None:
            self._problem(scan.problem.kind, scan.path, scan.problem.message)
        resolved = []
        for ref in scan.refs:
            if ref.label in CODE_FIELDS:
                if ref.guid not in guid_to_path:
                    self.external.add(ref.guid)  # a package or engine script
                continue
            path = guid_to_path.get(ref.guid)
            if path is not None:
                if is_code(path) or path == scan.path:
                    continue  # a MonoScript named outside m_Script, or a sub-object of this asset
                resolved.append((path, ref.label, ref.label in INSTANCE_FIELDS))
            elif is_builtin_guid(ref.guid) or ref.type == 0:
                self.external.add(ref.guid)
                resolved.append((ref.guid, ref.label, False))
            elif ref.file_id == MONOSCRIPT_FILE_ID:
                self.external.add(ref.guid)  # a script outside the project, named by another field
            else:
                resolved.append((ref.guid, ref.label, False))  # missing: no .meta declares it
        return resolved

    def _asset(self, path: str, refs: tuple[Ref, ...]) -> Asset:
        meta = self.metas.get(path)
        folder = posixpath.dirname(path)
        scan = self.scans[path]
        return Asset(
            id=path,
            kind=WORLD if extension(path) == ".unity" else RESOURCE,
            type=asset_type(path, scan.first_class),
            virtual_paths=(path,),
            folders=(folder,),
            files=tuple(sorted([path, path + ".meta"] if meta else [path])),
            refs=refs,
            package=folder,
            name=posixpath.basename(path),
        )

    def _scene_roots(self, guid_to_path: dict[str, str]) -> list[str]:
        problem = self.settings.problem
        if problem is not None:
            self._problem(problem.kind, SETTINGS_FILE, problem.message, problem.line)
        scenes: list[str] = []
        for scene in self.settings.scenes:
            if not scene.enabled:
                continue
            path = scene.path
            if path not in self.scans and scene.guid in guid_to_path:
                path = guid_to_path[scene.guid]  # moved since the list was saved: Unity follows it
            if path not in scenes:
                scenes.append(path)
        return scenes

    def _problem(self, kind: str, file: str, message: str, line: int | None = None) -> None:
        if (kind, file) not in self._reported:
            self._reported.add((kind, file))
            self.problems.append(Problem(kind=kind, file=file, message=message, line=line))


class _Hoister:
    """Each asset's references with nested prefab content hoisted into it (memoised, cycle-safe)."""

    def __init__(
        self, resolved: dict[str, list[tuple[str, str, bool]]], nested: dict[str, list[str]]
    ) -> None:
        self.resolved = resolved
        self.nested = nested
        self._content: dict[str, list[tuple[str, str]]] = {}

    def refs_of(self, path: str) -> tuple[Ref, ...]:
        """Own references (the nested prefabs as `m_SourcePrefab`), then each nested prefab's content."""
        nested = set(self.nested[path])
        entries = [
            (target, NESTED_LABEL if instance and target in nested else label)
            for target, label, instance in self.resolved[path]
        ]
        for prefab in self.nested[path]:
            entries += [
                (target, f"{label} via {prefab}")
                for target, label in self._content_of(prefab, (path,))
            ]
        refs, seen = [], {path}
        for target, label in entries:
            if target not in seen:
                seen.add(target)
                refs.append(Ref(target, HARD, label))
        return tuple(refs)

    def _content_of(self, path: str, stack: tuple[str, ...]) -> list[tuple[str, str]]:
        """What a prefab's baked content references: its own fields and its nested prefabs' content."""
        if path in self._content:
            return self._content[path]
        if path not in self.resolved or path in stack:
            return []  # a missing prefab has no content; a nesting cycle is cut
        nested = set(self.nested[path])
        content = [
            (target, label)
            for target, label, instance in self.resolved[path]
            if not (instance and target in nested)
        ]
        for prefab in self.nested[path]:
            content += [
                (target, f"{label} via {prefab}")
                for target, label in self._content_of(prefab, stack + (path,))
            ]
        self._content[path] = content
        return content


def _nested_prefabs(refs: list[tuple[str, str, bool]]) -> list[str]:
    nested: list[str] = []
    for target, label, _instance in refs:
        if label == NESTED_LABEL and target not in nested and not _looks_like_guid(target):
            nested.append(target)
    return nested


def _looks_like_guid(text: str) -> bool:
    return len(text) == 32 and "/" not in text and all(c in "0123456789abcdef" for c in text)


def _in_resources_folder(path: str) -> bool:
    """Unity's rule: anything under a folder named Resources is always built, unless in an Editor folder."""
    segments = path.split("/")[:-1]
    return "Resources" in segments and "Editor" not in segments


def _with_ancestors(folders: set[str]) -> set[str]:
    result = set()
    for folder in folders:
        while folder and folder not in result:
            result.add(folder)
            folder = posixpath.dirname(folder)
    return result


# -- in-process convenience -----------------------------------------------------------------------
def walk_project(root: str) -> list[FileEntry]:
    """The project's file table (Assets, Packages, ProjectSettings), sorted, with stat signatures."""
    root = to_posix(os.path.abspath(root))
    entries = []
    for top in PROJECT_FOLDERS:
        for folder, dirs, names in os.walk(f"{root}/{top}"):
            dirs.sort()
            for name in names:
                full = os.path.join(folder, name)
                stat = os.stat(full)
                rel = to_posix(os.path.relpath(full, root))
                entries.append(FileEntry(rel, stat.st_size, stat.st_mtime_ns, stat.st_ino))
    entries.sort(key=lambda entry: entry.path)
    return entries


def collect_unity(root: str, options: dict | None = None) -> SourceResult:
    """Plan, parse and assemble a Unity project in this process, reading from disk."""
    options = dict(options or {})
    files = walk_project(root)
    units = SOURCE.plan(files, options)
    parts = {unit.id: SOURCE.parse(unit, Reader(root), options) for unit in units}
    return SOURCE.assemble(root, files, parts, options)
