"""The cook list for people: why an asset is (not) cooked, the cook list as text, and the
reference graph as JSON or Graphviz DOT."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

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

# -- why -------------------------------------------------------------------------------------


class WhyAnswer(NamedTuple):
    id: str
    cooked: bool
    chain: tuple[str, ...]  # root first, the asset last (empty when not cooked)
    reason: str


def why(
    assets: dict[str, Asset], cooklist: CookList, name: str, cook: dict | None = None
) -> list[WhyAnswer]:
    """Why an asset (GUID, virtual path or project-relative path) is cooked — its chain — or why
    not. `cook` (the build file's section) sharpens the answer for assets nothing reached."""
    ids = resolve(assets, name) or [name.strip()]
    answers = []
    for asset_id in ids:
        if asset_id in cooklist.chains:
            chain = cooklist.chains[asset_id]
            kinds = [kind for kind, members in cooklist.roots.items() if chain[0] in members]
            root = f"root from {', '.join(kinds)}" if kinds else "root"
            answers.append(
                WhyAnswer(asset_id, True, chain, f"cooked: {chain_text(chain)} ({root})")
            )
        else:
            answers.append(
                WhyAnswer(asset_id, False, (), _not_cooked_reason(assets, cooklist, asset_id, cook))
            )
    return answers


def _not_cooked_reason(assets, cooklist: CookList, asset_id: str, cook: dict | None) -> str:
    if asset_id in cooklist.missing:
        return f"missing: {cooklist.missing[asset_id]}"
    if asset_id in cooklist.never_cook_refs:
        return f"not cooked: {cooklist.never_cook_refs[asset_id]}"
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


Describe = Callable[[str], str | None]
"""A source index's `describe(asset_id)`: a name to show beside the id (a Cocos asset's URL)."""


def why_text(answers: list[WhyAnswer], describe: Describe | None = None) -> str:
    """One line per answer; `describe` (a source index's) names each id beside it (a URL)."""
    return "\n".join(f"{_named(a.id, describe)}: {a.reason}" for a in answers) + "\n"


def _named(asset_id: str, describe: Describe | None) -> str:
    label = describe(asset_id) if describe is not None else None
    return f"{asset_id} ({label})" if label and label != asset_id else asset_id


# -- text and graph exports ------------------------------------------------------------------


def cooklist_text(cooklist: CookList, describe: Describe | None = None) -> str:
    """The cook list for people: cooked ids with their chains, then every problem; `describe`
    (a source index's) names each cooked id beside it (a Cocos asset's URL)."""
    lines = [f"cooked ({len(cooklist.cooked)}):"]
    lines += [
        f"  {_named(asset_id, describe)}  <- {chain_text(cooklist.chains[asset_id])}"
        for asset_id in cooklist.cooked
    ]
    for title, table in (
        ("missing", cooklist.missing),
        ("ambiguous", cooklist.ambiguous),
        ("never_cook references", cooklist.never_cook_refs),
    ):
        if table:
            lines.append(f"{title} ({len(table)}):")
            lines += [f"  {key}: {value}" for key, value in table.items()]
    if cooklist.cycles:
        lines.append(f"cycles ({len(cooklist.cycles)}):")
        lines += [f"  {chain_text(cycle + cycle[:1])}" for cycle in cooklist.cycles]
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
