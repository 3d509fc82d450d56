"""The cook list for people: why an asset is (not) cooked, the cook list as text, and the
reference graph as JSON or Graphviz DOT.

People know assets by name, not by id: the text forms show each asset as `display_name` gives
it (a resource by virtual path, type and id; a world or level by its path), chains included.
The data (`why`'s answers, `CookList.to_json`, the graph) keep ids, which machines read.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import NamedTuple

from orchestrator import OrchestrateError
from stages.sources.base import LEVEL, RESOURCE, SOFT, WORLD, Asset, CookList

from .closure import chain_text
from .roots import (
    COOK_DEFAULTS,
    asset_culture,
    cookable,
    editor_segment,
    matching_prefix,
    resolve,
    unavailable_reason,
)

# -- names for people ------------------------------------------------------------------------


def display_name(asset: Asset) -> str:
    """How people know an asset, from its own fields whatever the source: a resource as
    `Package/Name (Type) GUID` (every virtual path, ` | `-separated, when the GUID has several
    items; its folder when it has none; the id left out when a path already shows it, as a
    Unity asset's path does); a world or level by its path."""
    shown = " | ".join(asset.virtual_paths) or (asset.folders[0] if asset.folders else "")
    if asset.kind in (WORLD, LEVEL):
        shown = shown or asset.id
        return shown if asset.id in shown else f"{shown} {asset.id}"
    if not shown:
        return f"{asset.id} ({asset.type})" if asset.type else asset.id
    parts = [shown]
    if asset.type:
        parts.append(f"({asset.type})")
    if asset.id not in shown:
        parts.append(asset.id)
    return " ".join(parts)


def namer(assets: dict[str, Asset]) -> Callable[[str], str]:
    """id → `display_name` of its asset; an id the project does not have (a missing reference,
    a name from the build file) is shown as it is."""
    names: dict[str, str] = {}

    def name(asset_id: str) -> str:
        known = names.get(asset_id)
        if known is None:
            asset = assets.get(asset_id)
            known = names[asset_id] = display_name(asset) if asset is not None else asset_id
        return known

    return name


def _ids(asset_id: str) -> str:
    return asset_id


# -- why -------------------------------------------------------------------------------------


#: How many names `orchestrate why` suggests for a name the project does not have.
CLOSEST_SHOWN = 5


class WhyAnswer(NamedTuple):
    id: str
    cooked: bool
    chain: tuple[str, ...]  # root first, the asset last (empty when not cooked)
    reason: str
    known: bool = True  # the project has the asset, or references it (a missing reference)


class UnknownAsset(OrchestrateError):
    """A name given to `orchestrate why` that is no asset of the project and nothing references:
    bad input (exit 2), with the closest names it has."""

    exit_code = 2


def unknown_asset(assets: dict[str, Asset], name: str, shown: Callable[[str], str]) -> UnknownAsset:
    """The error for a name nothing in the project answers to, naming the closest it has."""
    closest = closest_assets(assets, name)
    hint = "; closest: " + " | ".join(map(shown, closest)) if closest else "; nothing close"
    return UnknownAsset(
        f"no asset {name.strip()!r} in the project (no GUID, virtual path or path is that "
        f"name, and nothing references it){hint}"
    )


def closest_assets(assets: dict[str, Asset], name: str, count: int = CLOSEST_SHOWN) -> list[str]:
    """Ids of the assets whose id, virtual path, folder or file is most like `name`, ignoring
    case: those that contain it first (shortest first), then by difflib's similarity."""
    wanted = name.strip().replace("\\", "/").strip("/").casefold()
    owner: dict[str, str] = {}
    for asset in assets.values():
        for text in (asset.id, *asset.virtual_paths, *asset.folders, *asset.files):
            owner.setdefault(text.casefold(), asset.id)
    containing = sorted((t for t in owner if wanted and wanted in t), key=lambda t: (len(t), t))
    similar = difflib.get_close_matches(wanted, list(owner), n=count * 4, cutoff=0.5)
    found: dict[str, None] = {}
    for text in [*containing, *similar]:
        found.setdefault(owner[text], None)
    return list(found)[:count]


def why(
    assets: dict[str, Asset],
    cooklist: CookList,
    name: str,
    cook: dict | None = None,
    shown: Callable[[str], str] = _ids,
) -> list[WhyAnswer]:
    """Why an asset (GUID, virtual path or project-relative path) is cooked — its chain — or why
    not. `cook` (the build file's section) sharpens the answer for assets nothing reached.
    The reasons show the ids of their chains as `shown` gives them (ids by default; `namer`
    for people)."""
    ids = resolve(assets, name) or [name.strip()]
    answers = []
    for asset_id in ids:
        if asset_id in cooklist.chains:
            chain = cooklist.chains[asset_id]
            root = _root_text(cooklist, chain[0])
            answers.append(
                WhyAnswer(
                    asset_id, True, chain, f"cooked: {chain_text(map(shown, chain))} ({root})"
                )
            )
        else:
            reason = _not_cooked_reason(assets, cooklist, asset_id, cook, shown)
            known = (
                asset_id in assets
                or asset_id in cooklist.missing
                or asset_id in cooklist.never_cook_refs
            )
            answers.append(WhyAnswer(asset_id, False, (), reason, known))
    return answers


def _root_text(cooklist: CookList, root_id: str) -> str:
    """The root kinds that name `root_id`, as "root from maps, layout"."""
    kinds = [kind for kind, members in cooklist.roots.items() if root_id in members]
    return f"root from {', '.join(kinds)}" if kinds else "root"


def _found(cooklist: CookList, table: dict[str, str], asset_id: str, shown) -> str:
    """A missing or never-cooked id's reason, with its chain as `shown` gives it."""
    finding = cooklist.findings.get(asset_id)
    return table[asset_id] if finding is None else finding.text(shown)


def _not_cooked_reason(assets, cooklist: CookList, asset_id: str, cook: dict | None, shown) -> str:
    if asset_id in cooklist.missing:
        return f"missing: {_found(cooklist, cooklist.missing, asset_id, shown)}"
    if asset_id in cooklist.never_cook_refs:
        return f"not cooked: {_found(cooklist, cooklist.never_cook_refs, asset_id, shown)}"
    asset = assets.get(asset_id)
    if asset is None:
        return "not found in the project (no asset with this GUID, virtual path or path)"
    if not cookable(asset):
        return f"missing: {unavailable_reason(asset_id, asset)}"
    cook = {**COOK_DEFAULTS, **(cook or {})}
    prefix = matching_prefix(asset, cook["never_cook"])
    if prefix is not None:
        return f"not cooked: never_cook {prefix} (and unreachable)"
    segment = editor_segment(asset)
    if segment is not None and not cook["include_editor_content"]:
        return f"not cooked: editor content ({segment}/)"
    culture = asset_culture(asset)
    if culture is not None and culture not in cook["cultures"]:
        return f"not cooked: culture {culture} is not listed in cook.cultures (and unreachable)"
    if asset.kind == LEVEL:
        return "not cooked: unreachable (no cooked world uses it)"
    return "not cooked: unreachable (no root references it)"


def why_text(answers: list[WhyAnswer], shown: Callable[[str], str] = _ids) -> str:
    """`orchestrate why`: one line per answer, the asset as `shown` gives it (pass the same
    `shown` as to `why`)."""
    return "\n".join(f"{shown(a.id)}: {a.reason}" for a in answers) + "\n"


# -- text and graph exports ------------------------------------------------------------------


def cooklist_text(cooklist: CookList, assets: dict[str, Asset]) -> str:
    """The cook list for people: each cooked asset with the chain that brought it in (or the
    kinds of root it is), then every problem, each asset by its `display_name`."""
    name = namer(assets)
    lines = [f"cooked ({len(cooklist.cooked)}):"]
    for asset_id in cooklist.cooked:
        chain = cooklist.chains[asset_id]
        if len(chain) > 1:
            lines.append(f"  {name(asset_id)}  <- {chain_text(map(name, chain[:-1]))}")
        else:
            lines.append(f"  {name(asset_id)}  ({_root_text(cooklist, asset_id)})")
    for title, table, has_chains in (
        ("missing", cooklist.missing, True),
        ("ambiguous", cooklist.ambiguous, False),
        ("never_cook references", cooklist.never_cook_refs, True),
    ):
        if table:
            lines.append(f"{title} ({len(table)}):")
            lines += [
                f"  {name(key)}: "
                + (_found(cooklist, table, key, name) if has_chains else table[key])
                for key in table
            ]
    if cooklist.cycles:
        lines.append(f"cycles ({len(cooklist.cycles)}):")
        lines += [f"  {chain_text(map(name, cycle + cycle[:1]))}" for cycle in cooklist.cycles]
    if cooklist.external:
        lines.append(f"external ({len(cooklist.external)}): {', '.join(cooklist.external)}")
    if cooklist.failure:
        lines.append(f"FAILED: {cooklist.failure}")
    return "\n".join(lines) + "\n"


def graph_json(
    assets: dict[str, Asset], cooklist: CookList | None = None, cooked_only: bool = False
) -> dict:
    """The reference graph: nodes (with cooked/missing status) and typed edges, in asset order."""
    cooked = set(cooklist.cooked) if cooklist else set()
    missing = cooklist.missing if cooklist else {}
    keep = (lambda i: i in cooked) if cooked_only else (lambda i: True)
    nodes: list[dict] = []
    edges: list[dict] = []
    dangling: dict[str, None] = {}
    for asset in assets.values():
        if not keep(asset.id):
            continue
        nodes.append(
            {
                "id": asset.id,
                "kind": asset.kind,
                "type": asset.type,
                "virtual_paths": list(asset.virtual_paths),
                "cooked": asset.id in cooked,
                "missing": asset.id in missing,
            }
        )
        for ref in asset.refs:
            if cooked_only and ref.target in assets and not keep(ref.target):
                continue
            edges.append(
                {"from": asset.id, "to": ref.target, "strength": ref.strength, "label": ref.label}
            )
            if ref.target not in assets:
                dangling.setdefault(ref.target, None)
    nodes += [
        {
            "id": target,
            "kind": "missing",
            "type": "",
            "virtual_paths": [],
            "cooked": False,
            "missing": True,
        }
        for target in dangling
    ]
    return {"nodes": nodes, "edges": edges}


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def graph_dot(
    assets: dict[str, Asset], cooklist: CookList | None = None, cooked_only: bool = False
) -> str:
    """The reference graph in Graphviz DOT: soft edges dashed, missing nodes red, cooked bold."""
    graph = graph_json(assets, cooklist, cooked_only)
    shapes = {WORLD: "doubleoctagon", LEVEL: "octagon", RESOURCE: "box", "missing": "box"}
    lines = ["digraph assets {", "  rankdir=LR;", '  node [fontname="sans-serif"];']
    for node in graph["nodes"]:
        label = node["virtual_paths"][0] if node["virtual_paths"] else node["id"]
        attributes = [f"label={_dot_quote(label)}", f"shape={shapes.get(node['kind'], 'box')}"]
        if node["missing"]:
            attributes.append("color=red")
        elif node["cooked"]:
            attributes.append("style=bold")
        lines.append(f"  {_dot_quote(node['id'])} [{', '.join(attributes)}];")
    for edge in graph["edges"]:
        style = ", style=dashed" if edge["strength"] == SOFT else ""
        lines.append(
            f"  {_dot_quote(edge['from'])} -> {_dot_quote(edge['to'])} "
            f"[label={_dot_quote(edge['label'])}{style}];"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"
