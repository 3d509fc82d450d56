"""What a patch from build A to build B must ship: bundles added, removed and changed, assets
added, removed, moved between bundles or changed in content, link.xml's Types, the files to
download and their total size (HotPatcher's question, answered from the two output folders).

Bundles are compared by name (a changed bundle has new hashes and, with `hash.append_hash`, a new
file name); assets by their entry id, their payload hash and the set of bundles holding them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .state import AssetState, BuildState

FORMAT = 1


@dataclass
class BundleChange:
    bundle: str
    old_file: str | None
    new_file: str | None
    old_hash: str | None  # content hash
    new_hash: str | None
    old_size: int
    new_size: int

    @property
    def delta(self) -> int:
        return self.new_size - self.old_size

    def to_json(self) -> dict:
        return {
            "bundle": self.bundle,
            "old": None
            if self.old_file is None
            else {"file": self.old_file, "content_hash": self.old_hash, "size": self.old_size},
            "new": None
            if self.new_file is None
            else {"file": self.new_file, "content_hash": self.new_hash, "size": self.new_size},
            "delta": self.delta,
        }


@dataclass
class AssetChange:
    asset: str
    name: str
    old_bundles: tuple[str, ...]
    new_bundles: tuple[str, ...]
    old_hash: str | None = None
    new_hash: str | None = None
    old_size: int = 0
    new_size: int = 0

    def to_json(self) -> dict:
        return {
            "asset": self.asset,
            "name": self.name,
            "old_bundles": list(self.old_bundles),
            "new_bundles": list(self.new_bundles),
            "old_hash": self.old_hash,
            "new_hash": self.new_hash,
            "delta": self.new_size - self.old_size,
        }


@dataclass
class ShippedFile:
    file: str
    size: int
    why: str  # "bundle added", "bundle changed", "changed"


@dataclass
class PatchDiff:
    bundles_added: list[BundleChange] = field(default_factory=list)
    bundles_removed: list[BundleChange] = field(default_factory=list)
    bundles_changed: list[BundleChange] = field(default_factory=list)
    assets_added: list[AssetChange] = field(default_factory=list)
    assets_removed: list[AssetChange] = field(default_factory=list)
    assets_moved: list[AssetChange] = field(default_factory=list)
    assets_changed: list[AssetChange] = field(default_factory=list)
    link_xml_added: list[str] = field(default_factory=list)
    link_xml_removed: list[str] = field(default_factory=list)
    files: list[ShippedFile] = field(default_factory=list)  # what a patch downloads
    deleted_files: list[str] = field(default_factory=list)  # files of A that B no longer has

    @property
    def download_bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def identical(self) -> bool:
        return not (self.files or self.deleted_files or self.content_changes)

    @property
    def content_changes(self) -> int:
        """How many bundles, assets and link.xml Types differ."""
        return sum(
            len(part)
            for part in (
                self.bundles_added,
                self.bundles_removed,
                self.bundles_changed,
                self.assets_added,
                self.assets_removed,
                self.assets_moved,
                self.assets_changed,
                self.link_xml_added,
                self.link_xml_removed,
            )
        )

    def to_json(self, old: str = "", new: str = "") -> dict:
        return {
            "format": FORMAT,
            "old": old,
            "new": new,
            "identical": self.identical,
            "download_bytes": self.download_bytes,
            "bundles": {
                "added": [c.to_json() for c in self.bundles_added],
                "removed": [c.to_json() for c in self.bundles_removed],
                "changed": [c.to_json() for c in self.bundles_changed],
            },
            "assets": {
                "added": [c.to_json() for c in self.assets_added],
                "removed": [c.to_json() for c in self.assets_removed],
                "moved": [c.to_json() for c in self.assets_moved],
                "changed": [c.to_json() for c in self.assets_changed],
            },
            "link_xml": {"added": self.link_xml_added, "removed": self.link_xml_removed},
            "files": [{"file": f.file, "size": f.size, "why": f.why} for f in self.files],
            "deleted_files": self.deleted_files,
        }


def _asset_change(asset: str, old: AssetState | None, new: AssetState | None) -> AssetChange:
    known = new or old
    return AssetChange(
        asset,
        known.name if known is not None else asset,
        old.bundles if old else (),
        new.bundles if new else (),
        old.hash if old else None,
        new.hash if new else None,
        old.size if old else 0,
        new.size if new else 0,
    )


def diff_states(old: BuildState, new: BuildState) -> PatchDiff:
    """Everything that differs between two builds, each list sorted by name."""
    patch = PatchDiff()
    for name in sorted(set(old.bundles) | set(new.bundles)):
        a, b = old.bundles.get(name), new.bundles.get(name)
        if a == b:
            continue
        change = BundleChange(
            name,
            a.file if a else None,
            b.file if b else None,
            a.content_hash if a else None,
            b.content_hash if b else None,
            a.size if a else 0,
            b.size if b else 0,
        )
        if a is None:
            patch.bundles_added.append(change)
        elif b is None:
            patch.bundles_removed.append(change)
        elif (a.content_hash, a.raw_hash, a.file) != (b.content_hash, b.raw_hash, b.file):
            patch.bundles_changed.append(change)
    differing = [  # most assets are the same in both: compare those without a change record
        asset
        for asset in set(old.assets) | set(new.assets)
        if old.assets.get(asset) != new.assets.get(asset)
    ]
    for asset in sorted(differing):
        a_asset, b_asset = old.assets.get(asset), new.assets.get(asset)
        moved = _asset_change(asset, a_asset, b_asset)
        if a_asset is None:
            patch.assets_added.append(moved)
        elif b_asset is None:
            patch.assets_removed.append(moved)
        else:
            if set(a_asset.bundles) != set(b_asset.bundles):
                patch.assets_moved.append(moved)
            if a_asset.hash != b_asset.hash:
                patch.assets_changed.append(moved)
    old_types, new_types = set(old.link_types), set(new.link_types)
    patch.link_xml_added = sorted(new_types - old_types)
    patch.link_xml_removed = sorted(old_types - new_types)
    old_files = {b.file: b.raw_hash for b in old.bundles.values()}
    for change in patch.bundles_added + patch.bundles_changed:
        new_bundle = new.bundles[change.bundle]
        if old_files.get(new_bundle.file) != new_bundle.raw_hash:
            why = "bundle added" if change.old_file is None else "bundle changed"
            patch.files.append(ShippedFile(new_bundle.file, new_bundle.size, why))
    for relpath in sorted(new.loose):
        if old.loose.get(relpath) != new.loose[relpath]:
            why = "added" if relpath not in old.loose else "changed"
            patch.files.append(ShippedFile(relpath, new.loose[relpath].size, why))
    patch.files.sort(key=lambda f: f.file)
    new_files = {b.file for b in new.bundles.values()} | set(new.loose)
    patch.deleted_files = sorted(
        ({b.file for b in old.bundles.values()} | set(old.loose)) - new_files
    )
    return patch


# -- text --------------------------------------------------------------------------------------


def _size(n: int) -> str:
    return f"{n:,} bytes"


def _delta(n: int) -> str:
    return f"{n:+,}"


def _bundles(names: tuple[str, ...]) -> str:
    return ", ".join(names) or "(none)"


def diff_text(patch: PatchDiff, old: str, new: str) -> str:
    """The patch for people: a headline, then one section per kind of change that has any."""
    if patch.identical:
        return f"{old} and {new} are identical: a patch ships nothing\n"
    lines = [
        f"patch {old} -> {new}: {len(patch.files)} file(s) to download, "
        f"{_size(patch.download_bytes)}",
        f"  bundles: {len(patch.bundles_added)} added, {len(patch.bundles_removed)} removed, "
        f"{len(patch.bundles_changed)} changed; assets: {len(patch.assets_added)} added, "
        f"{len(patch.assets_removed)} removed, {len(patch.assets_moved)} moved, "
        f"{len(patch.assets_changed)} changed",
    ]

    def section(title: str, rows: list[str]) -> None:
        if rows:
            lines.extend(["", f"{title} ({len(rows)})", *(f"  {row}" for row in rows)])

    section(
        "bundles added",
        [f"+ {c.bundle}  {c.new_file}  {_size(c.new_size)}" for c in patch.bundles_added],
    )
    section(
        "bundles removed",
        [f"- {c.bundle}  {c.old_file}  {_size(c.old_size)}" for c in patch.bundles_removed],
    )
    section(
        "bundles changed",
        [
            f"~ {c.bundle}  {(c.old_hash or '')[:16]} -> {(c.new_hash or '')[:16]}  "
            f"{c.old_size:,} -> {c.new_size:,} bytes ({_delta(c.delta)})"
            for c in patch.bundles_changed
        ],
    )
    section(
        "assets added",
        [f"+ {c.asset}  {c.name}  in {_bundles(c.new_bundles)}" for c in patch.assets_added],
    )
    section(
        "assets removed",
        [f"- {c.asset}  {c.name}  from {_bundles(c.old_bundles)}" for c in patch.assets_removed],
    )
    section(
        "assets moved",
        [
            f"> {c.asset}  {c.name}  {_bundles(c.old_bundles)} -> {_bundles(c.new_bundles)}"
            for c in patch.assets_moved
        ],
    )
    section(
        "assets changed",
        [
            f"~ {c.asset}  {c.name}  in {_bundles(c.new_bundles)}  "
            f"{(c.old_hash or '')[:16]} -> {(c.new_hash or '')[:16]} "
            f"({_delta(c.new_size - c.old_size)} bytes stored)"
            for c in patch.assets_changed
        ],
    )
    section(
        "link.xml",
        [f"+ {t}" for t in patch.link_xml_added] + [f"- {t}" for t in patch.link_xml_removed],
    )
    section("files to download", [f"{f.file}  {_size(f.size)}  ({f.why})" for f in patch.files])
    section("files to delete", list(patch.deleted_files))
    return "\n".join(lines) + "\n"
