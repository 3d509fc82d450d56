"""The index of a Cocos project for rules and `orchestrate why`: ids, URLs, unresolved references."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from orchestrator import digest_value, record

from .uuids import decompress_uuid


@record
@dataclass
class CocosIndex:
    """Read-only after collect. Its paths are project-relative: stored, it is the same value
    wherever the checkout lies."""

    urls: dict[str, str] = field(default_factory=dict)  # asset id → URL
    paths: dict[str, str] = field(default_factory=dict)  # asset id → the file (or meta) it is in
    scripts: frozenset[str] = frozenset()  # script uuids (not content, but they exist)
    folders: frozenset[str] = frozenset()  # folder uuids
    orphans: frozenset[str] = frozenset()  # uuids whose meta remains without its file
    unresolved: dict[str, tuple[str, ...]] = field(
        default_factory=dict
    )  # file → ids naming nothing
    bundle_folders: dict[str, str] = field(default_factory=dict)  # bundle → project folder
    atlas_frames: frozenset[str] = frozenset()  # sprite frames an auto atlas packs
    atlas_folders: frozenset[str] = frozenset()  # project folders holding a `.pac`

    def resolves(self, asset_id: str) -> bool:
        """Whether an id names an asset, a script or a folder of the project (or the engine)."""
        text = decompress_uuid(asset_id.strip())
        base, sep, sub = text.partition("@")
        text = base.lower() + sep + sub
        return text in self.urls or base.lower() in self.scripts or text in self.folders

    def canonical(self, name: str) -> str:
        """A name as `orchestrate why` resolves it: a compressed uuid becomes its id."""
        text = decompress_uuid(name.strip())
        return text if text != name.strip() else name

    def describe(self, asset_id: str) -> str | None:
        """What people read next to an id: its URL."""
        return self.urls.get(asset_id)

    def digest(self) -> str:
        return digest_value(
            {
                "urls": sorted(self.urls.items()),
                "scripts": sorted(self.scripts),
                "folders": sorted(self.folders),
                "orphans": sorted(self.orphans),
                "unresolved": sorted(self.unresolved.items()),
                "bundles": sorted(self.bundle_folders.items()),
                "frames": sorted(self.atlas_frames),
                "atlas_folders": sorted(self.atlas_folders),
            }
        )

    def in_auto_atlas_folder(self, asset_id: str) -> bool:
        """Whether an asset's file lies under a folder that holds a `.pac`."""
        folder = posixpath.dirname(self.paths.get(asset_id, ""))
        while folder:
            if folder in self.atlas_folders:
                return True
            folder = posixpath.dirname(folder)
        return False
