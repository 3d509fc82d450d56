"""A build's published state in brief: what two builds are compared on.

Per bundle its file, size and hashes; per asset (a bundle entry) its name, the bundles holding
it, the hash and stored size of its payload; per loose file (manifest, staging, link.xml) its
size and digest; the Types link.xml preserves. Made from an output folder's files (manifest and
bundle tables of contents), and kept as JSON in `reports/build-state.json` so that the next
build's report can say what changed without the previous build's files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from orchestrator import digest_file
from stages.bundlefile.format import TocEntry

from .outputs import LOOSE_FILES, link_xml_types, read_manifest, read_toc

FORMAT = 2  # 2: assets as columns
#: Hex digits of an entry's payload hash kept: 128 bits tell payloads apart.
ENTRY_HASH_LEN = 32


class BundleState(NamedTuple):
    file: str
    size: int
    content_hash: str
    raw_hash: str


class LooseState(NamedTuple):
    """A loose file of the output (manifest, staging, link.xml)."""

    size: int
    digest: str


class AssetState(NamedTuple):
    """Named tuples, not dataclasses: a state holds one per asset, 100,000 of them."""

    name: str  # the entry's name in its bundle: a virtual path, or a map's file name
    bundles: tuple[str, ...]
    hash: str  # of the payload (ENTRY_HASH_LEN hex digits)
    size: int  # stored (compressed) bytes in one bundle


@dataclass
class BuildState:
    bundles: dict[str, BundleState] = field(default_factory=dict)
    assets: dict[str, AssetState] = field(default_factory=dict)
    loose: dict[str, LooseState] = field(default_factory=dict)
    link_types: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        """The state as JSON-able data; assets as columns (one row per asset made into JSON
        costs a third of a second at 100,000 assets, columns a tenth of that)."""
        assets = sorted(self.assets)
        rows = [self.assets[asset] for asset in assets]
        names, holders, hashes, sizes = zip(*rows) if rows else ((), (), (), ())
        return {
            "format": FORMAT,
            "bundles": {
                name: [b.file, b.size, b.content_hash, b.raw_hash]
                for name, b in sorted(self.bundles.items())
            },
            "assets": {
                "id": assets,
                "name": names,
                "bundles": holders,
                "hash": hashes,
                "size": sizes,
            },
            "loose": {name: list(value) for name, value in sorted(self.loose.items())},
            "link_types": self.link_types,
        }

    @classmethod
    def from_json(cls, document: dict) -> BuildState:
        """The state from `to_json`'s document; ValueError when it is not one."""
        try:
            if document["format"] != FORMAT:
                raise ValueError(f"build state format {document['format']}")
            columns = document["assets"]
            ids = columns["id"]
            rows = zip(
                columns["name"], map(tuple, columns["bundles"]), columns["hash"], columns["size"]
            )
            assets = dict(zip(ids, map(AssetState._make, rows)))
            if len(assets) != len(ids) or any(len(columns[c]) != len(ids) for c in columns):
                raise ValueError("asset columns of different lengths")
            return cls(
                {name: BundleState(*row) for name, row in document["bundles"].items()},
                assets,
                {name: LooseState(*row) for name, row in document["loose"].items()},
                list(document["link_types"]),
            )
        except (KeyError, TypeError, IndexError) as exc:
            raise ValueError(f"not a build state: {exc}") from None


def state_of(
    output_dir: Path, manifest: dict | None = None, contents: dict | None = None
) -> BuildState:
    """The state of an output folder from its manifest and its bundles' tables of contents
    (`contents`: bundle → BundleContents already read, to read each file once)."""
    output_dir = Path(output_dir)
    manifest = manifest if manifest is not None else read_manifest(output_dir)
    state = BuildState()
    first: dict[str, TocEntry] = {}
    holders: dict[str, list[str]] = {}
    for name in sorted(manifest["bundles"]):
        bundle = manifest["bundles"][name]
        state.bundles[name] = BundleState(
            bundle["file"], bundle["size"], bundle["content_hash"], bundle["raw_hash"]
        )
        entries = (
            contents[name].entries if contents is not None else read_toc(output_dir, bundle["file"])
        )
        for entry in entries:
            held = holders.get(entry.id)
            if held is None:
                holders[entry.id] = [name]
                first[entry.id] = entry
            else:
                held.append(name)
    for asset, entry in first.items():
        state.assets[asset] = AssetState(
            entry.name, tuple(holders[asset]), entry.hash[:ENTRY_HASH_LEN], entry.stored_size
        )
    for relpath in LOOSE_FILES:
        path = output_dir / relpath
        if path.is_file():
            state.loose[relpath] = LooseState(path.stat().st_size, digest_file(str(path)))
    state.link_types = link_xml_types(output_dir) or []
    return state
