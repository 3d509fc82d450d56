"""What each asset needs (spec: "Dependencies"): from its serialized JSON and its importer data.

References are asset ids in order, each once. An id that names nothing is not a dependency: it
is returned as unresolved so the source can count it against the file that holds it.
"""

from __future__ import annotations

from typing import NamedTuple

from orchestrator import record

from .project import AssetInfo, Catalog
from .scan import FileScan, normalize_id
from .types import is_serialized

TEXTURE_NAME = "texture"
SPRITE_FRAME_NAME = "spriteFrame"


@record
class Needs(NamedTuple):
    """An asset's dependencies (resolved ids, in order) and the ids that named nothing."""

    targets: tuple[str, ...]
    unresolved: tuple[str, ...]


class Dependencies:
    """Resolves the references of every asset of a catalog (sub-asset lookups prepared once)."""

    def __init__(self, catalog: Catalog, scans: dict[str, FileScan]) -> None:
        self.catalog = catalog
        self.scans = scans
        self.folder_ids = frozenset(folder.id for folder in catalog.folders.values())
        self.children: dict[str, list[str]] = {}
        for info in catalog.assets.values():
            if info.parent:
                self.children.setdefault(info.parent, []).append(info.id)

    def needs(self, info: AssetInfo) -> Needs:
        targets: list[str] = []
        unresolved: list[str] = []
        for raw in self._raw(info):
            target = normalize_id(raw)
            if not target or target == info.id or target in targets:
                continue
            if target in self.catalog.assets:
                targets.append(target)
            elif target.split("@", 1)[0] in self.catalog.scripts or target in self.folder_ids:
                continue  # code, or a folder: never content
            elif target not in unresolved:
                unresolved.append(target)
        return Needs(tuple(targets), tuple(unresolved))

    def _raw(self, info: AssetInfo) -> list[str]:
        importer, user = info.importer, info.user
        if not info.parent and is_serialized(importer, info.path):
            scan = self.scans.get(info.path)
            return list(scan.uuids) if scan is not None else []
        if importer in ("texture", "sprite-frame"):
            given = user.get("imageUuidOrDatabaseUri")
            if isinstance(given, str) and given and not given.startswith("db://"):
                return [given]
            if importer == "texture" or not info.parent:
                return [info.parent] if info.parent else []
            sibling = self.child_named(info.parent, TEXTURE_NAME)
            return [sibling or info.parent]
        if importer == "bitmap-font":
            image = _text(user.get("textureUuid"))
            if not image:
                return []
            return [
                self.child_named(image, SPRITE_FRAME_NAME)
                or self.child_named(image, TEXTURE_NAME)
                or image
            ]
        if importer == "spine-data":
            return self._spine_pages(_text(user.get("atlasUuid")))
        if importer in ("particle", "label-atlas"):
            frame = _text(user.get("spriteFrameUuid"))
            return [frame] if frame else []
        if importer == "sprite-atlas":
            return list(self.children.get(info.id, ()))
        return []

    def child_named(self, parent: str, name: str) -> str | None:
        """The sub-asset of `parent` called `name`, if any."""
        for child in self.children.get(normalize_id(parent), ()):
            if self.catalog.assets[child].name == name:
                return child
        return None

    def _spine_pages(self, atlas_id: str) -> list[str]:
        atlas = self.catalog.assets.get(normalize_id(atlas_id)) if atlas_id else None
        scan = self.scans.get(atlas.path) if atlas is not None else None
        if scan is None:
            return [atlas_id] if atlas_id and atlas is None else []
        textures = []
        for page in scan.pages:
            image = self.catalog.by_path.get(page)
            if image is None:
                continue  # a page image the atlas names but the project lacks
            textures.append(self.child_named(image, TEXTURE_NAME) or image)
        return textures


def _text(value) -> str:
    return value if isinstance(value, str) else ""
