"""The cook list: roots from the build file, the dependency closure, and the reports around it.

Source-agnostic: it sees `Asset`s with typed references, never a project format. The rules are
spec/pipeline.md's "Collect: the cook roots" and "Dependency":

- roots, in order: `maps`, `startup`, `always_cook`, the listed cultures' assets, then the assets
  the bundle layout names; with none of maps/startup/always_cook/layout, every asset but editor
  content and `L10N/` is a root (Unreal's fallback; listed cultures still add theirs);
- one breadth-first search from the first group of roots, then from the layout-named assets not
  yet reached; the first chain that reaches an asset is its chain (shortest, deterministic);
- `never_cook` and editor content are neither cooked nor traversed; reaching them is reported;
- missing references are reported once, with the chain of the asset that referenced them.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Iterable

from orchestrator import digest_value
from stages.algorithms.graphs import strongly_connected
from stages.sources.base import HARD, SOFT, Asset, CookList, Finding

from .roots import (
    COOK_DEFAULTS,
    cook_roots,
    cookable,
    editor_segment,
    matching_prefix,
    unavailable_reason,
)

# -- the closure -----------------------------------------------------------------------------


def chain_text(chain: Iterable[str]) -> str:
    return " > ".join(chain)


class _Closure:
    def __init__(self, assets: dict[str, Asset], cook: dict, external: Iterable[str]) -> None:
        self.assets = assets
        self.cook = {**COOK_DEFAULTS, **(cook or {})}
        self.external_ids = set(external)
        self.never = list(self.cook["never_cook"])
        self.follow_soft = bool(self.cook["follow_soft_references"])
        self.include_editor = bool(self.cook["include_editor_content"])
        self.chains: dict[str, tuple[str, ...]] = {}
        self.missing: dict[str, str] = {}
        self.never_refs: dict[str, str] = {}
        self.findings: dict[str, Finding] = {}  # the reasons of both, by parts
        self.external: dict[str, None] = {}
        self.queue: deque[str] = deque()

    def excluded(self, asset: Asset) -> str | None:
        prefix = matching_prefix(asset, self.never)
        if prefix is not None:
            return f"never_cook {prefix}"
        if not self.include_editor:
            segment = editor_segment(asset)
            if segment is not None:
                return f"editor content ({segment}/)"
        return None

    def reach(
        self, target: str, chain: tuple[str, ...], reference: str = "", root: str = ""
    ) -> None:
        """`target` reached by `chain` (its referrer's chain, with the reference's "soft: label"
        when soft), or as a root (`root`: "root from cook.maps", …)."""
        if target in self.chains or target in self.missing or target in self.never_refs:
            return
        if target in self.external_ids:
            self.external.setdefault(target, None)
            return
        asset = self.assets.get(target)
        if asset is None or not cookable(asset):
            self.found(
                self.missing, target, unavailable_reason(target, asset), chain, reference, root
            )
            return
        reason = self.excluded(asset)
        if reason is not None:
            self.found(self.never_refs, target, reason, chain, reference, root)
            return
        self.chains[target] = chain + (target,)
        self.queue.append(target)

    def found(self, table: dict[str, str], target: str, cause: str, *how) -> None:
        finding = self.findings[target] = Finding(cause, *how)
        table[target] = finding.text()

    def add_roots(self, kind: str, ids: list[str]) -> None:
        for asset_id in ids:
            origin = (
                "bundles.layout"
                if kind == "layout"
                else kind
                if kind.startswith("source:")
                else f"cook.{kind}"
            )
            self.reach(asset_id, (), root=f"root from {origin}")

    def run(self) -> None:
        while self.queue:
            source = self.queue.popleft()
            chain = self.chains[source]
            for ref in self.assets[source].refs:
                if ref.strength == SOFT and not self.follow_soft:
                    continue
                if ref.target in self.chains:
                    continue
                reference = f"{ref.strength}: {ref.label}" if ref.strength == SOFT else ""
                self.reach(ref.target, chain, reference)

    def followed(self, asset_id: str) -> list[str]:
        return [
            ref.target
            for ref in self.assets[asset_id].refs
            if ref.target in self.chains and (self.follow_soft or ref.strength == HARD)
        ]


def find_cycles(order: list[str], edges: Callable[[str], list[str]]) -> list[list[str]]:
    """One shortest cycle per strongly connected component (iterative Tarjan), each starting at
    its member discovered first, components in discovery order."""
    rank = {node: n for n, node in enumerate(order)}
    # Each node's edges asked for once: Tarjan and the test for a lone node's loop to itself
    # each asked again (0.26 s of the closure's 1.3 s over 100,000 cooked assets).
    edges = functools.cache(edges)
    components = [
        component
        for component in strongly_connected(order, edges)
        if len(component) > 1 or component[0] in edges(component[0])
    ]
    cycles = []
    for component in sorted(components, key=lambda c: min(rank[m] for m in c)):
        members = set(component)
        head = min(component, key=rank.__getitem__)
        cycles.append(_shortest_cycle(head, members, edges))
    return cycles


def _shortest_cycle(head: str, members: set[str], edges) -> list[str]:
    parent: dict[str, str] = {}
    queue = deque([head])
    while queue:
        node = queue.popleft()
        for child in edges(node):
            if child == head:
                path = [node]
                while path[-1] != head:
                    path.append(parent[path[-1]])
                return path[::-1]
            if child in members and child not in parent:
                parent[child] = node
                queue.append(child)
    return [head]


def ambiguous_report(assets: dict[str, Asset]) -> dict[str, str]:
    """Every id with several repository items, and where its payload comes from."""
    report = {}
    for asset in assets.values():
        if asset.items > 1:
            payload = (
                f"payload from {asset.folders[0]}, the first folder in sorted path order"
                if asset.folders
                else "no resource folder"
            )
            report[asset.id] = (
                f"{asset.items} repository items ({', '.join(asset.virtual_paths)}) "
                f"in folders [{', '.join(asset.folders)}]; {payload}"
            )
    return report


def compute_cooklist(
    assets: dict[str, Asset],
    cook: dict,
    bundles: dict | None = None,
    external: Iterable[str] = (),
    source_roots: dict[str, list[str]] | None = None,
) -> CookList:
    """The cook list for a build file's `cook` and `bundles` sections (plus the source's own
    roots, `SourceResult.roots`, and its known-external ids)."""
    roots = cook_roots(assets, cook, bundles, source_roots)
    closure = _Closure(assets, cook, external)
    for name, reason in roots.unresolved.items():
        closure.found(closure.missing, name, reason)
    for kind, ids in roots.first.items():
        # The fallback roots are already filtered; anything left out there is not an error.
        closure.add_roots(kind, ids)
    closure.run()
    closure.add_roots("layout", roots.layout)
    closure.run()
    cooked = list(closure.chains)
    cycles = find_cycles(cooked, closure.followed)
    all_roots = {kind: list(ids) for kind, ids in roots.first.items()}
    all_roots["layout"] = list(roots.layout)
    failure = ""
    if closure.cook["fail_on_missing"] and closure.missing:
        failure = f"cook.fail_on_missing: {len(closure.missing)} missing reference(s)"
    return CookList(
        cooked=cooked,
        chains=closure.chains,
        missing=closure.missing,
        ambiguous=ambiguous_report(assets),
        never_cook_refs=closure.never_refs,
        cycles=cycles,
        roots=all_roots,
        external=list(closure.external),
        failure=failure,
        findings=closure.findings,
    )


def assets_digest(assets: dict[str, Asset]) -> str:
    """A content digest of the assets (the dependency unit keys on it)."""
    return digest_value(
        [
            [
                a.id,
                a.kind,
                a.type,
                a.virtual_paths,
                a.folders,
                a.files,
                [[r.target, r.strength, r.label] for r in a.refs],
                a.items,
            ]
            for a in assets.values()
        ]
    )
