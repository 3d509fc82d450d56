"""The index of a Unity project: GUIDs, `.meta` facts and bundle names, read-only after collect."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from orchestrator import digest_value, record

from .documents import MetaInfo


@record
@dataclass
class UnityIndex:
    """guid → path, path → `.meta` facts, enabled scenes, and the GUIDs living outside the project."""

    guid_to_path: dict[str, str] = field(
        default_factory=dict
    )  # every `.meta` GUID (folders, code too)
    metas: dict[str, MetaInfo] = field(default_factory=dict)  # asset or folder path → its `.meta`
    asset_ids: tuple[str, ...] = ()  # the content assets (project-relative paths), sorted
    scenes: tuple[str, ...] = ()  # enabled scenes of EditorBuildSettings, in build order
    external: tuple[str, ...] = ()  # referenced GUIDs outside the project (built-ins, package code)
    orphans: tuple[str, ...] = ()  # paths whose `.meta` exists but whose file does not, sorted
    known_digest: str = field(default="", compare=False, repr=False)

    def path_of(self, guid: str) -> str | None:
        """The project path a GUID names, or None when no `.meta` declares it."""
        return self.guid_to_path.get(guid.lower())

    def guid_of(self, path: str) -> str | None:
        """The GUID of a project path, or None when it has no `.meta`."""
        meta = self.metas.get(path)
        return meta.guid if meta else None

    def bundle_of(self, path: str) -> str | None:
        """The asset bundle Unity puts an asset in: its own `.meta` name, else its nearest folder's."""
        current = path
        while current:
            meta = self.metas.get(current)
            if meta is not None and meta.bundle_name:
                name = meta.bundle_name.lower()  # Unity stores and builds bundle names lower-case
                return f"{name}.{meta.bundle_variant.lower()}" if meta.bundle_variant else name
            current = posixpath.dirname(current)
        return None

    def digest(self) -> str:
        """A digest of the whole index (rule units that consult it key on this), computed once."""
        if not self.known_digest:
            self.known_digest = self.content_digest()
        return self.known_digest

    def content_digest(self) -> str:
        return digest_value(
            {
                "guids": sorted(self.guid_to_path.items()),
                "metas": sorted((p, list(m)) for p, m in self.metas.items()),
                "assets": list(self.asset_ids),
                "scenes": list(self.scenes),
                "external": list(self.external),
                "orphans": list(self.orphans),
            }
        )


def bundles_from_meta(index: UnityIndex) -> dict[str, list[str]]:
    """{bundle name (+ '.' + variant): [asset ids]} from the `assetBundleName`s set in `.meta` files."""
    bundles: dict[str, list[str]] = {}
    for asset_id in index.asset_ids:
        name = index.bundle_of(asset_id)
        if name:
            bundles.setdefault(name, []).append(asset_id)
    return {name: bundles[name] for name in sorted(bundles)}
