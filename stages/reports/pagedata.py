"""The page's data, made from an output folder's files: the headline figures (printed in the HTML)
and compact, column-wise data the page's script reads lazily.

At 100,000 assets the page must stay a few MB and open in a second or two, so names are stored
once and referred to by index: assets as columns (id, name, type, stored size, bundle, the
asset that brought it into the build), bundles as columns of index lists, rule failures with
their rule and file as indices. A `why` chain is stored as a parent pointer (the cook list's
chains form a tree: each is its parent's chain plus the asset); the few that do not are kept
whole.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from .outputs import (
    COOKLIST_JSON,
    LOOSE_FILES,
    VALIDATE_JSON,
    BundleContents,
    link_xml_types,
    read_json,
)

FORMAT = 1
SEVERITIES = ("error", "warning", "info")
#: Hex digits of a bundle's content hash the page holds (as many as `hash.append_hash` puts
#: in a file name).
HASH_DIGITS = 32
FILE_IS_NAME_AND_HASH = 0  # the bundle's file is `<name>_<hash digits>`
FILE_IS_NAME = 1  # the bundle's file is its name


@dataclass
class Tile:
    """A bundle as the treemap draws it."""

    index: int
    name: str
    size: int
    kind: str
    assets: int


class FileColumns(NamedTuple):
    """A bundle's file, size and hash as the page's bundle columns hold them."""

    file: int | str  # FILE_IS_NAME_AND_HASH, FILE_IS_NAME, or the file's name spelt out
    size: int
    hash: str  # the first HASH_DIGITS of its content hash


@dataclass
class PageContent:
    figures: dict  # headline numbers, printed in the HTML itself
    data: dict  # the compact data for the page's script
    tiles: list[Tile]  # bundles for the treemap


class Names:
    """A table of strings referred to by index (each stored once in the page)."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.items: list[str] = []

    def __call__(self, name: str) -> int:
        found = self.index.get(name)
        if found is None:
            found = self.index[name] = len(self.items)
            self.items.append(name)
        return found


def content(
    output_dir: Path, manifest: dict | None, contents: dict[str, BundleContents]
) -> PageContent:
    """Everything the page shows about the build's content (not about the run)."""
    validation = read_json(output_dir, VALIDATE_JSON)
    cooklist = read_json(output_dir, COOKLIST_JSON) or {}
    manifest = manifest or {"bundles": {}, "assets": {}, "cooklist": []}
    assets = _assets(manifest, contents, cooklist)
    bundles = _bundles(manifest, contents, assets.index)
    failures = failures_of(validation)
    data = {
        "format": FORMAT,
        "build": manifest.get("build", {}),
        "assets": assets.columns(),
        "chains": assets.chains,
        "roots": assets.roots,
        "bundles": bundles,
        "validation": failures,
        "missing": _pairs(cooklist.get("missing")),
        "ambiguous": _pairs(cooklist.get("ambiguous")),
        "neverCook": _pairs(cooklist.get("never_cook_refs")),
        "cycles": [list(c) for c in cooklist.get("cycles", [])],
        "bundleCycles": [list(c) for c in manifest.get("bundle_cycles", [])],
        "linkXml": link_xml_types(output_dir),
    }
    build = manifest.get("build") or {}
    figures = {
        "has_manifest": bool(manifest["bundles"] or manifest["assets"]),
        "platform": build.get("platform", ""),
        "tool_version": build.get("tool_version", ""),
        "assets_cooked": len(cooklist["cooked"])
        if "cooked" in cooklist
        else len(manifest["cooklist"]),
        "assets_packed": len(manifest["assets"]),
        "bundles": len(bundles["name"]),
        "missing": len(data["missing"]),
        "ambiguous": len(data["ambiguous"]),
        "cycles": len(data["cycles"]),
        "duplicated": sum(1 for held in assets.bundles if isinstance(held, list)),
        "unreadable_bundles": sum(1 for c in contents.values() if c.error),
        **size_figures(output_dir, data),
    }
    return PageContent(figures, data, tiles_of(bundles))


def size_figures(output_dir: Path, data: dict) -> dict:
    """The figures that move when a bundle's file does: bytes of bundles, of the whole output,
    of assets stored more than once; and the rule failures' counts."""
    sizes = data["bundles"]["size"]
    held, stored = data["assets"]["bundle"], data["assets"]["size"]
    loose = sum((output_dir / f).stat().st_size for f in LOOSE_FILES if (output_dir / f).is_file())
    failures = data["validation"]
    return {
        "bundle_bytes": sum(sizes),
        "output_bytes": sum(sizes) + loose,
        "duplicated_bytes": sum(
            stored[i] * (len(bundles) - 1)
            for i, bundles in enumerate(held)
            if isinstance(bundles, list)
        ),
        "validation": failures["counts"] if failures else None,
    }


def tiles_of(bundles: dict) -> list[Tile]:
    """The treemap's tiles from the page's bundle columns."""
    return [
        Tile(i, name, size, kind, len(members))
        for i, (name, size, kind, members) in enumerate(
            zip(bundles["name"], bundles["size"], bundles["kind"], bundles["assets"])
        )
    ]


def _pairs(mapping: Any) -> list[list[str]]:
    return (
        [[key, str(value)] for key, value in mapping.items()] if isinstance(mapping, dict) else []
    )


class AssetColumns:
    """The assets of the build, one column per field, with `why` chains as parent pointers."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.ids: list[str] = []
        self.names: list[str] = []
        self.types: list[int] = []
        self.sizes: list[int] = []
        self.raw: list[int] = []
        self.bundles: list[Any] = []  # a bundle index, a list of them (duplicated), or -1
        self.parents: list[int] = []  # -1 a root, -2 not cooked, -3 chain kept whole
        self.type_names = Names()
        self.chains: dict[str, list[int]] = {}
        self.roots: dict[str, str] = {}

    def add(self, asset: str, asset_type: str = "") -> int:
        found = self.index.get(asset)
        if found is None:
            found = self.index[asset] = len(self.ids)
            self.ids.append(asset)
            self.names.append("")
            self.types.append(self.type_names(asset_type))
            self.sizes.append(0)
            self.raw.append(0)
            self.bundles.append(-1)
            self.parents.append(-2)
        return found

    def columns(self) -> dict:
        return {
            "id": self.ids,
            "name": self.names,
            "type": self.types,
            "types": self.type_names.items,
            "size": self.sizes,
            "raw": self.raw,
            "bundle": self.bundles,
            "parent": self.parents,
        }


def _assets(manifest: dict, contents: dict[str, BundleContents], cooklist: dict) -> AssetColumns:
    columns = AssetColumns()
    bundle_index = {name: i for i, name in enumerate(manifest["bundles"])}
    for asset, entry in manifest["assets"].items():
        i = columns.add(asset, entry.get("type", ""))
        held = [bundle_index[b] for b in entry.get("bundles", []) if b in bundle_index]
        columns.bundles[i] = held[0] if len(held) == 1 else (held or -1)
    index, names = columns.index, columns.names
    for bundle_contents in contents.values():
        for row in bundle_contents.entries:
            found = index.get(row.id)
            i = columns.add(row.id) if found is None else found
            if not names[i]:
                names[i], columns.sizes[i], columns.raw[i] = row.name, row.stored_size, row.size
    chains = cooklist.get("chains") or {}
    for asset in chains:
        if asset not in index:
            columns.add(asset)
    for asset, chain in chains.items():
        i = index[asset]
        if len(chain) == 1:
            columns.parents[i] = -1
        elif chains.get(chain[-2]) == chain[:-1]:
            columns.parents[i] = index[chain[-2]]
        else:
            columns.parents[i] = -3
            columns.chains[str(i)] = [columns.add(member) for member in chain]
    kinds: dict[str, list[str]] = {}
    for kind, members in (cooklist.get("roots") or {}).items():
        for member in members:
            kinds.setdefault(member, []).append(kind)
    for asset, root_kinds in kinds.items():
        if asset in index:
            columns.roots[str(index[asset])] = ", ".join(root_kinds)
    return columns


def _bundles(manifest: dict, contents: dict[str, BundleContents], asset_index: dict) -> dict:
    names = list(manifest["bundles"])
    position = {name: i for i, name in enumerate(names)}

    def refs(values: list) -> list[int]:
        return [position[v] for v in values if v in position]

    columns: dict[str, list] = {
        key: []
        for key in (
            "name",
            "file",
            "size",
            "kind",
            "hash",
            "assets",
            "explicit",
            "deps",
            "rdeps",
            "usedBy",
        )
    }
    errors = {}
    for i, name in enumerate(names):
        bundle = manifest["bundles"][name]
        columns["name"].append(name)
        fields = file_columns(name, bundle)
        columns["file"].append(fields.file)
        columns["size"].append(fields.size)
        columns["kind"].append(bundle.get("kind", ""))
        columns["hash"].append(fields.hash)
        columns["assets"].append(
            [asset_index[a] for a in bundle.get("assets", []) if a in asset_index]
        )
        columns["explicit"].append(len(bundle.get("explicit", [])))
        columns["deps"].append(refs(bundle.get("dependencies", [])))
        columns["rdeps"].append(refs(bundle.get("reverse_dependencies", [])))
        columns["usedBy"].append(refs(bundle.get("used_by", [])))
        problem = contents.get(name)
        if problem is not None and problem.error:
            errors[str(i)] = problem.error
    columns["errors"] = errors  # type: ignore[assignment]
    return columns


def file_columns(name: str, bundle: dict) -> FileColumns:
    """A bundle's manifest entry as the page's bundle columns hold it (the usual file names are
    told by a number, not spelt out: a fifth of the data)."""
    content_hash = bundle.get("content_hash", "")[:HASH_DIGITS]
    file = bundle.get("file", "")
    code = (
        FILE_IS_NAME_AND_HASH
        if file == f"{name}_{content_hash}"
        else (FILE_IS_NAME if file == name else file)
    )
    return FileColumns(code, bundle.get("size", 0), content_hash)


def failures_of(document: dict | None) -> dict | None:
    """Rule failures with rules and files as indices, and the counts by severity."""
    if document is None:
        return None
    rules, sources = Names(), Names()
    rows = []
    by_severity: Counter[str] = Counter()
    severity_of: dict[str, str] = {}
    for failure in document.get("failures", []):
        rule = str(failure.get("rule", ""))
        severity = str(failure.get("severity", "error"))
        severity_of[rule] = severity
        by_severity[severity] += 1
        via = failure.get("via")
        rows.append(
            [
                rules(rule),
                sources(str(failure.get("source", ""))),
                sources(via) if via else -1,
                failure.get("errors", []),
                failure.get("lines", []),
                failure.get("message"),
            ]
        )
    names = document.get("rule_names") or {}
    return {
        "rules": rules.items,
        "severity": [severity_of[rule] for rule in rules.items],
        "ruleNames": [names.get(rule, "") for rule in rules.items],
        "sources": sources.items,
        "rows": rows,
        "ruleErrors": document.get("rule_errors", []),
        "skipped": document.get("skipped", []),
        "warnings": document.get("warnings", []),
        "counts": {
            "rules": document.get("rules", 0),
            "checked": document.get("sources_checked", 0),
            "failures": len(rows),
            "broken": len(document.get("rule_errors", [])),
            **{severity: by_severity.get(severity, 0) for severity in SEVERITIES},
        },
    }
