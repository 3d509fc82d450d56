"""Collect's outputs patched Item by Item (issue 29): what changed in a repository, a map, an
attribute file or the listing of resource folders changes the assets and the index entries of
the GUIDs it touches, and nothing else is assembled again.

`replan` is the planning half (collect's `update`, when files were added or removed): the
resource folders those files are in are classified again from the listing, and the attribute
batches that gained or lost a file are planned again from their stored units. `patch` is the
assembling half (collect's `finish`): the parts that were parsed again are diffed with the ones
they replace, GUID by GUID, and each touched GUID's asset and its `repo/`, `disk/` and `virt/`
entries are derived as `assemble` would derive them (reader.py), from the previous entries and
the new parts.

Either returns None when the change is not one it patches — a repository, world or level file
added or removed, a part whose problems changed, a GUID with Items in a repository that was not
parsed again, a GUID in several folders whose first folder moved, the attribute batches' number
changing — and collect then plans or assembles everything, which is always right. The law
(tests/test_incremental_laws.py) holds the patched outputs to a clean build's, entry for entry.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from orchestrator import KeyedPatch, record, to_posix
from stages.rules.keyed_index import ILEVELS, PREFIXES
from stages.sources.base import SOFT, Asset, FileEntry, ParseUnit, Ref

from .index import MessiahIndex, MessiahResource, ResourceFile
from .reader import (
    GUID_RE,
    LEVEL_SUFFIX,
    REPOSITORY_FILE,
    WORLD_SUFFIX,
    MessiahSource,
    RepositoryItem,
    ResourceFolder,
    _Assembler,
    _attribute_bucket_bits,
    _nearest_repository,
    _parent,
    attribute_bucket,
    attribute_unit_id,
    item_resource,
    repository_order,
    resource_folder,
    scan_layout,
)

REPO, DISK, VIRT = (PREFIXES[name] for name in ("res_in_repo", "res_in_disk", "res_virt_info"))


@record
class ListingState(NamedTuple):
    """What the next `replan` starts from: how many resource folders the project has (the
    number of attribute batches follows from it)."""

    folders: int


class Replanned(NamedTuple):
    """What the listing's change plans again: the attribute batches whose files changed, the
    batches left with none, the resource folders touched (folder → what it is now, None when
    it is no longer one), and the listing's new state."""

    units: list[ParseUnit]
    removed: tuple[str, ...]
    folders: dict[str, ResourceFolder | None]
    state: ListingState


def replan(
    files: list[FileEntry],
    added: Iterable[str],
    removed: Iterable[str],
    stored: Callable[[list[str]], Mapping[str, Any]],
    state: Any,
) -> Replanned | None:
    """The parse units files added and removed change (see the module docstring); `stored`
    gives stored units by id (their payload a `ParseJob`)."""
    if not isinstance(state, ListingState):
        return None
    moved = sorted(set(added) | set(removed))
    for path in moved:
        name = path.rpartition("/")[2]
        if name == REPOSITORY_FILE or name.endswith((WORLD_SUFFIX, LEVEL_SUFFIX)):
            return None
    paths = [entry.path for entry in files]
    folders = sorted({_parent(path) for path in moved if GUID_RE.match(_basename(_parent(path)))})
    if not folders:
        return Replanned([], (), {}, state)
    now = {folder: _folder_now(folder, paths) for folder in folders}
    bits = _attribute_bucket_bits(state.folders)
    by_bucket: dict[int, list[str]] = {}
    for folder in folders:
        by_bucket.setdefault(attribute_bucket(folder, bits), []).append(folder)
    unit_ids = [attribute_unit_id(bits, bucket) for bucket in sorted(by_bucket)]
    units = stored(unit_ids)
    before: dict[str, list[str]] = {
        unit_id: list(units[unit_id].payload.unit.files) if unit_id in units else []
        for unit_id in unit_ids
    }
    count = state.folders
    for folder, found in now.items():
        unit_id = attribute_unit_id(bits, attribute_bucket(folder, bits))
        was = any(_parent(path) == folder for path in before[unit_id])
        count += (found is not None) - was
    if _attribute_bucket_bits(count) != bits:
        return None  # the batches are cut anew
    planned, gone = [], []
    for bucket, touched in sorted(by_bucket.items()):
        unit_id = attribute_unit_id(bits, bucket)
        kept = [path for path in before[unit_id] if _parent(path) not in touched]
        new = [found.attribute for found in map(now.get, touched) if found is not None]
        after = sorted(kept + new, key=_parent)
        if after == before[unit_id]:
            continue
        if after:
            planned.append(ParseUnit(unit_id, "attributes", tuple(after)))
        elif unit_id in units:
            gone.append(unit_id)
    return Replanned(planned, tuple(gone), now, ListingState(count))


def _basename(path: str) -> str:
    return path.rpartition("/")[2]


def _folder_now(folder: str, paths: list[str]) -> ResourceFolder | None:
    """What a folder is in the listing `paths` (sorted): a resource folder, or None."""
    prefix = folder + "/"
    start = bisect.bisect_left(paths, prefix)
    members = []
    for path in paths[start:]:
        if not path.startswith(prefix):
            break
        if "/" not in path[len(prefix) :]:
            members.append(path)
    if not members:
        return None
    repository_dir = _nearest(folder, paths)
    if repository_dir is None:
        return None
    return resource_folder(folder, _basename(folder), repository_dir, members)


def _nearest(folder: str, paths: list[str]) -> str | None:
    """The folder of the nearest repository file above `folder` in the listing, or None."""
    current = _parent(folder)
    while True:
        candidate = f"{current}/{REPOSITORY_FILE}" if current else REPOSITORY_FILE
        at = bisect.bisect_left(paths, candidate)
        if at < len(paths) and paths[at] == candidate:
            return current
        if not current:
            return None
        current = _parent(current)


class _GiveUp(Exception):
    """The change is not one `patch` makes: collect assembles everything."""


def patch(
    root: str,
    assets: Mapping[str, Asset],
    index: Mapping[str, Any],
    results: Any,
    load: Callable[[str], Any],
    folders: Mapping[str, ResourceFolder | None],
) -> tuple[KeyedPatch, KeyedPatch] | None:
    """The patches of `assets` and `index` (collect's previous values) for the unit results
    that changed (`results.changed`, `.removed`, `.before`; `load` reads a previous result by
    digest) and the resource folders `replan` touched; None to assemble everything."""
    try:
        return _Patcher(root, assets, index, results, load, folders).run()
    except _GiveUp:
        return None


class _Patcher:
    def __init__(self, root, assets, index, results, load, folders) -> None:
        self.root = root
        self.assets = assets
        self.index = index
        self.results = results
        self.load = load
        self.folders = folders
        self.repositories = sorted(
            (unit_id[5:] for unit_id in results if unit_id.startswith("repo:")),
            key=repository_order,
        )
        self.repository_dirs = {_parent(path) for path in self.repositories}
        self.assembler = _Assembler(root, None, {})
        self.asset_set: dict[str, Asset] = {}
        self.asset_removed: set[str] = set()
        self.index_set: dict[str, Any] = {}
        self.index_removed: set[str] = set()
        # repository relpath → GUID → its Items there now, for the GUIDs whose Items changed
        self.items: dict[str, dict[str, list[RepositoryItem]]] = {}
        self.new_parts: dict[str, Any] = {}  # repository relpath → its part now
        self.grouped: dict[str, dict[str, list[RepositoryItem]]] = {}  # a new part's, by GUID
        self.attribute_refs: dict[str, tuple[str, ...]] = {}
        self.bits: int | None = None

    # -- what changed ---------------------------------------------------------------------------
    def run(self) -> tuple[KeyedPatch, KeyedPatch]:
        results = self.results
        for unit_id in results.removed or ():
            if not unit_id.startswith("attrs:") or self.load(results.before[unit_id]).problems:
                raise _GiveUp  # a repository or map gone, or problems with a batch
        touched: set[str] = {_basename(folder) for folder in self.folders}
        worlds_changed = False
        for unit_id in sorted(results.changed):
            after = results[unit_id]
            digest = results.before.get(unit_id)
            before = self.load(digest) if digest is not None else None
            if (before.problems if before is not None else ()) != after.problems:
                raise _GiveUp  # a problem found or gone: the source's problems change
            kind = unit_id.partition(":")[0]
            if kind == "repo":
                if before is None:
                    raise _GiveUp
                touched |= self._repository_changed(before, after)
            elif kind == "map":
                self.asset_set[after.path] = self.assembler.map_asset(after)
                worlds_changed = worlds_changed or after.kind == "world"
            else:
                old = dict(before.files) if before is not None else {}
                for path, guids in after.files:
                    self.attribute_refs[path] = guids
                    if old.get(path) != guids:
                        touched.add(_basename(_parent(path)))
        for guid in sorted(touched):
            self._guid(guid)
        self._virtual_paths(touched)
        if worlds_changed:
            self._used_levels()
        return (
            KeyedPatch(self.asset_set, tuple(sorted(self.asset_removed))),
            KeyedPatch(self.index_set, tuple(sorted(self.index_removed))),
        )

    def _repository_changed(self, before: Any, after: Any) -> set[str]:
        """The GUIDs whose Items in this repository changed (added, edited, removed, moved)."""
        old, new = _by_guid(before.items), _by_guid(after.items)
        changed = {guid for guid in old.keys() | new.keys() if old.get(guid) != new.get(guid)}
        self.items[after.path] = {guid: new.get(guid, []) for guid in changed}
        self.new_parts[after.path] = after
        self.grouped[after.path] = new
        return changed

    # -- one GUID -------------------------------------------------------------------------------
    def _guid(self, guid: str) -> None:
        old_resources: tuple[MessiahResource, ...] = self.index.get(REPO + guid) or ()
        resources, items = self._resources(guid, old_resources)
        old_files: tuple[ResourceFile, ...] = self.index.get(DISK + guid) or ()
        folders = self._folders(guid, old_files)
        files = tuple(self.assembler.resource_file(folder, resources) for folder in folders)
        self._set(REPO + guid, resources)
        self._set(DISK + guid, files)
        old_asset = self.assets.get(guid)
        if not resources and not folders:
            if old_asset is not None:
                self.asset_removed.add(guid)
            return
        self._whole_folders(guid, folders, old_asset)
        refs = {folder.attribute: self._attribute_guids(folder.attribute) for folder in folders}
        if items is not None:
            index = MessiahIndex("", res_in_disk={guid: files})
            asset = self.assembler.resource_asset(guid, items, resources, folders, refs, index)
        else:  # its Items are as they were: so are the references they make
            assert old_asset is not None
            asset = _with_folders(old_asset, folders, refs)
        self.asset_set[guid] = asset

    def _resources(
        self, guid: str, old: tuple[MessiahResource, ...]
    ) -> tuple[tuple[MessiahResource, ...], list[RepositoryItem] | None]:
        """The GUID's Items as the index lists them now, and as parsed (None: unknown, and
        unchanged, because a repository not parsed again holds some)."""
        changed = [path for path in self.items if guid in self.items[path]]
        parsed = set(self.new_parts)  # the index's paths are project-relative
        elsewhere = [r for r in old if r.RepositoryFullPath not in parsed]
        if not changed:  # its Items are as they were (and none, when the index lists none)
            return old, (None if old else [])
        if elsewhere:
            raise _GiveUp  # Items in a repository not parsed again: its annotations unknown
        resources: list[MessiahResource] = []
        items: list[RepositoryItem] = []
        for path in self.repositories:  # repository order, then document order
            part = self.new_parts.get(path)
            if part is None:
                continue
            repository = self.assembler.repository(_parent(path))
            mine = self.grouped[path].get(guid, [])
            items += mine
            resources += [item_resource(item, repository) for item in mine]
        return tuple(resources), items

    def _folders(self, guid: str, old: tuple[ResourceFile, ...]) -> list[ResourceFolder]:
        """The GUID's resource folders now, in folder order: those the listing's change touched
        as they are now, the others as the index had them (their files left out)."""
        known: dict[str, ResourceFolder | None] = {}
        for entry in old:  # its paths project-relative, as the index is stored
            attribute = entry.Resource
            folder = _parent(attribute)
            repository_dir = _nearest_repository(folder, self.repository_dirs)
            if repository_dir is None:
                raise _GiveUp
            known[folder] = ResourceFolder(
                folder,
                guid,
                repository_dir,
                attribute,
                entry.Data,
                entry.HDR,
                entry.Source,
                (),
            )
        for folder, now in self.folders.items():
            if _basename(folder) == guid:
                known[folder] = now
        return [found for _, found in sorted(known.items()) if found is not None]

    def _whole_folders(self, guid: str, folders: list[ResourceFolder], old: Asset | None) -> None:
        """Give the first folder its files (the asset's payload): the listing's, when the
        change touched it, else the asset's as they were."""
        first = folders[0] if folders else None
        if first is None or first.folder in self.folders:
            return
        if old is None or not old.folders or old.folders[0] != first.folder:
            raise _GiveUp  # another folder of the GUID is first now: its files are unknown
        folders[0] = first._replace(files=old.files)

    def _attribute_guids(self, attribute: str) -> tuple[str, ...]:
        """The GUIDs an attribute file names, from the batch that parsed it."""
        if attribute not in self.attribute_refs:
            part = self.results[self._batch_of(_parent(attribute))]
            self.attribute_refs.update(part.files)
        return self.attribute_refs.get(attribute, ())

    def _batch_of(self, folder: str) -> str:
        if self.bits is None:
            batch = next((u for u in self.results if u.startswith("attrs:")), None)
            if batch is None:
                raise _GiveUp
            self.bits = int(batch[6:].partition("-")[0])
        unit_id = attribute_unit_id(self.bits, attribute_bucket(folder, self.bits))
        if unit_id not in self.results:
            raise _GiveUp
        return unit_id

    # -- what several GUIDs share -------------------------------------------------------------
    def _virtual_paths(self, touched: set[str]) -> None:
        """`virt/` entries naming an Item of a touched GUID, before or after: the previous
        entry's Items of repositories not parsed again, and the new ones of those that were."""
        paths: set[str] = set()
        for guid in touched:
            if not any(guid in items for items in self.items.values()):
                continue  # its Items are as they were
            for resource in self.index.get(REPO + guid) or ():
                paths.add(resource.VirtualPath)
            for resource in self.index_set.get(REPO + guid) or ():
                paths.add(resource.VirtualPath)
        if not paths:
            return
        parsed = set(self.new_parts)  # the index's paths are project-relative
        new: dict[str, list[MessiahResource]] = {vp: [] for vp in paths}
        for path in self.repositories:
            part = self.new_parts.get(path)
            if part is None:
                continue
            repository = self.assembler.repository(_parent(path))
            for item in part.items:
                virtual_path = f"{item.package}/{item.name}"
                if virtual_path in new:
                    new[virtual_path].append(item_resource(item, repository))
        for virtual_path in sorted(paths):
            old = self.index.get(VIRT + virtual_path) or ()
            kept = [r for r in old if r.RepositoryFullPath not in parsed]
            merged = sorted(
                kept + new[virtual_path],
                key=lambda r: repository_order(r.RepositoryFullPath),
            )
            self._set(VIRT + virtual_path, tuple(merged))

    def _used_levels(self) -> None:
        worlds = [self.results[u] for u in self.results if u.endswith(WORLD_SUFFIX)]
        used = self.assembler.used_levels([part for part in worlds if part.kind == "world"])
        self._set(ILEVELS, tuple(sorted(used)))

    def _set(self, key: str, value: Any) -> None:
        if value:
            self.index_set[key] = value
        elif key in self.index:
            self.index_removed.add(key)


def _by_guid(items: Iterable[RepositoryItem]) -> dict[str, list[RepositoryItem]]:
    found: dict[str, list[RepositoryItem]] = {}
    for item in items:
        found.setdefault(item.guid, []).append(item)
    return found


def _with_folders(
    asset: Asset, folders: list[ResourceFolder], attribute_refs: dict[str, tuple[str, ...]]
) -> Asset:
    """An asset whose Items are unchanged with its folders (and their attribute files'
    references) as they are now: the references its Items make come first, as `assemble`
    orders them."""
    refs = [ref for ref in asset.refs if ref.label != "attribute file"]
    seen = {ref.target for ref in refs}
    for folder in folders:
        for target in attribute_refs.get(folder.attribute, ()):
            if target != asset.id and target not in seen:
                refs.append(Ref(target, SOFT, "attribute file"))
                seen.add(target)
    return dataclasses.replace(
        asset,
        folders=tuple(folder.folder for folder in folders),
        files=folders[0].files if folders else (),
        refs=tuple(refs),
    )


class IncrementalMessiahSource(MessiahSource):
    """The Messiah source as the build uses it: planned and assembled whole (reader.py), or
    re-planned and patched from what changed (this module)."""

    def listing_state(self, files: list[FileEntry]) -> ListingState:
        """What `replan` starts from after a full plan of `files`."""
        return ListingState(len(scan_layout(files).folders))

    def replan(self, files, added, removed, stored, state) -> Replanned | None:
        return replan(files, added, removed, stored, state)

    def patch(self, root, assets, index, results, load, folders):
        return patch(to_posix(root).rstrip("/") or "/", assets, index, results, load, folders)


SOURCE = IncrementalMessiahSource()
