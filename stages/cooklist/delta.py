"""The cook list after assets came or went, patched from the last one instead of computed again.

The closure (closure.py) is one breadth-first search from the first roots (maps, the source's
roots, startup, always_cook, cultures), then one from the assets the bundle layout names that
the first did not reach; the cook list is the order of discovery, its cycles are found over
that order. An asset added or removed changes it only where the asset stands, when:

- it is named by an `include` rule of the layout and by no first root (a `maps: all` rule, a
  project's own assignment, a startup name, an always_cook prefix, a culture: all plan again);
- it is cookable and nothing excludes it (never_cook, editor content), so it is cooked as a
  root of the second search, with the chain (id,);
- no cooked asset follows a reference to it (one would have reached it: an asset added was
  then reported missing; an asset removed would now be), so it lies on no cycle and reaches
  the cook list through its root alone (for an asset removed that no asset's reference names,
  which the dependency stage's state tells, without reading the cooked assets);
- an asset added reaches nothing the closure did not reach before the second search began
  (every reference it follows names an asset cooked in the first search, or a root), and an
  asset removed had reached nothing first (no chain, missing or never-cook report runs
  through it): nothing else is discovered at another time or by another chain.

Then the asset is cooked, or no longer, among the second search's roots in layout order (the
layout lists the assets of one include rule in id order, rule after rule), and every other
table stays as it was. Anything else (an asset whose facts changed, an ambiguous id, ids the
source calls external) returns None: the closure runs again from scratch.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from stages.algorithms.globs import compile_globs
from stages.sources.base import HARD, Asset, CookList

from .roots import (
    COOK_DEFAULTS,
    asset_culture,
    asset_paths,
    cookable,
    editor_segment,
    matching_prefix,
    normalise_path,
    resolve,
)


class _Layout:
    """The first `bundles.layout` rule (by position; len(rules) for the project's own
    assignment) that names an asset, as `roots.layout_named` orders them."""

    def __init__(self, assets: Mapping[str, Asset], cook: dict, bundles: dict) -> None:
        self.assets = assets
        self.rules = list(bundles.get("layout") or [])
        self.matchers = [
            (compile_globs(rule.get("include") or []), compile_globs(rule.get("exclude") or []))
            if rule.get("include")
            else None
            for rule in self.rules
        ]
        self.by_maps: dict[str, int] = {}
        for position, rule in enumerate(self.rules):
            if rule.get("maps") != "all":
                continue
            for world in cook.get("maps") or []:
                world = normalise_path(world)
                self.by_maps.setdefault(world, position)
                found = assets.get(world)
                for ref in found.refs if found else ():
                    if ref.label == "level":
                        self.by_maps.setdefault(ref.target, position)
        self.assigned = {a for ids in (bundles.get("assigned") or {}).values() for a in ids}

    def include_rule(self, asset: Asset) -> int | None:
        """The first include rule naming `asset`."""
        paths = asset_paths(asset)
        for position, matcher in enumerate(self.matchers):
            if matcher is None:
                continue
            includes, excludes = matcher
            if any(map(includes, paths)) and not any(map(excludes, paths)):
                return position
        return None

    def rule(self, asset_id: str) -> int:
        """The first rule naming `asset_id` (an id the layout lists)."""
        found = self.by_maps.get(asset_id)
        asset = self.assets.get(asset_id)
        named = self.include_rule(asset) if asset is not None else None
        candidates = [p for p in (found, named) if p is not None]
        return min(candidates) if candidates else len(self.rules)


def patched_cooklist(
    before: CookList,
    assets: Mapping[str, Asset],
    cook: dict,
    bundles: dict,
    added: Iterable[str],
    removed: Iterable[str],
    unnamed: Collection[str] = (),
) -> CookList | None:
    """The cook list `compute_cooklist(assets, cook, bundles, …)` gives after the assets
    `added` came and the assets `removed` went (every other asset's facts as they were when
    `before` was computed: patching.same_facts), or None when that is not proven (the
    module's docstring). `unnamed`: assets removed that no asset's reference names (the
    dependency stage's state knows); when every one is, the cooked assets are not read."""
    cook = {**COOK_DEFAULTS, **(cook or {})}
    if "all" in before.roots or before.external or "layout" not in before.roots:
        return None
    first = {asset_id for kind, ids in before.roots.items() if kind != "layout" for asset_id in ids}
    follow_soft = bool(cook["follow_soft_references"])
    layout = _Layout(assets, cook, bundles)
    cooked = list(before.cooked)
    chains = dict(before.chains)
    roots = list(before.roots["layout"])
    ambiguous = dict(before.ambiguous)
    gone = set(removed)
    if gone:
        if not _removable(before, gone, first, layout, assets, follow_soft, unnamed):
            return None
        cooked = [asset_id for asset_id in cooked if asset_id not in gone]
        roots = [asset_id for asset_id in roots if asset_id not in gone]
        for asset_id in gone:
            chains.pop(asset_id, None)
            ambiguous.pop(asset_id, None)
    for asset_id in sorted(added):
        asset = assets[asset_id]
        if not _addable(before, asset, cook, first, layout, chains, follow_soft):
            return None
        position = layout.include_rule(asset)
        if position is None:  # no root names it and nothing reaches it: not cooked
            continue
        at = _layout_position(roots, layout, position, asset_id)
        roots.insert(at, asset_id)
        cooked.insert(_second_search_position(cooked, chains, first, roots, at), asset_id)
        chains[asset_id] = (asset_id,)
    if not roots:  # the layout names nothing now: every asset may be a root (the fallback)
        return None
    return CookList(
        cooked=cooked,
        chains={asset_id: chains[asset_id] for asset_id in cooked},
        missing=before.missing,
        ambiguous=ambiguous,
        never_cook_refs=before.never_cook_refs,
        cycles=before.cycles,
        roots={kind: roots if kind == "layout" else ids for kind, ids in before.roots.items()},
        external=before.external,
        failure=before.failure,
        findings=before.findings,
    )


def _followed(asset: Asset, follow_soft: bool) -> list[str]:
    return [ref.target for ref in asset.refs if follow_soft or ref.strength == HARD]


def _removable(
    before: CookList,
    gone: set[str],
    first: set[str],
    layout: _Layout,
    assets: Mapping[str, Asset],
    soft: bool,
    unnamed: Collection[str],
) -> bool:
    """Whether each asset in `gone` was cooked as a root of the second search alone, reached
    nothing first, no cooked asset left follows a reference to it (none does when no asset's
    reference names it: `unnamed`; else the cooked assets are read), and no name the layout
    gives whether or not the asset exists (a world's level, the project's assignment) names
    it."""
    layout_roots = set(before.roots["layout"])
    for asset_id in gone:
        if asset_id in first or asset_id in before.missing or asset_id in before.never_cook_refs:
            return False
        if asset_id in layout.by_maps or asset_id in layout.assigned:
            return False
        if asset_id in before.chains:
            if before.chains[asset_id] != (asset_id,) or asset_id not in layout_roots:
                return False
        elif asset_id in layout_roots:
            return False
    if any(gone.intersection(cycle) for cycle in before.cycles):
        return False  # on a cycle (of itself alone: nothing else cooked references it)
    if any(len(chain) > 1 and chain[0] in gone for chain in before.chains.values()):
        return False  # it discovered an asset
    if any(finding.chain and finding.chain[0] in gone for finding in before.findings.values()):
        return False  # it reached a missing or never-cooked id first
    if gone.issubset(unnamed):
        return True
    for asset_id in before.cooked:
        asset = assets.get(asset_id)
        if asset is not None and asset_id not in gone and gone.intersection(_followed(asset, soft)):
            return False
    return True


def _addable(
    before: CookList,
    asset: Asset,
    cook: dict,
    first: set[str],
    layout: _Layout,
    chains: dict[str, tuple[str, ...]],
    soft: bool,
) -> bool:
    """Whether the asset added is no first root, is named by the layout's include rules alone
    (if at all), was reached by no cooked asset, and (when a root) is cooked and reaches only
    what the first search or a root reached."""
    asset_id = asset.id
    if asset_id in first or asset_id in chains or asset.items > 1:
        return False
    if asset_id in before.missing or asset_id in before.never_cook_refs:
        return False  # a cooked asset references it
    if asset_id in {normalise_path(world) for world in cook["maps"]}:
        return False
    if any(asset_id in resolve({asset_id: asset}, name) for name in cook["startup"]):
        return False
    if matching_prefix(asset, cook["always_cook"]) is not None:
        return False
    if cook["cultures"] and asset_culture(asset) in set(cook["cultures"]):
        return False
    if asset_id in layout.by_maps or asset_id in layout.assigned:
        return False
    position = layout.include_rule(asset)
    if position is None:
        return True
    if layout.rules[position].get("maps") == "all":
        return False  # the rule lists the worlds it names before the assets it includes
    if not cookable(asset) or matching_prefix(asset, cook["never_cook"]) is not None:
        return False
    if not cook["include_editor_content"] and editor_segment(asset) is not None:
        return False
    for target in _followed(asset, soft):
        chain = chains.get(target)
        if chain is None or (len(chain) > 1 and chain[0] not in first):
            return False  # found later, or not at all: the asset would change who finds it
    return True


def _layout_position(roots: list[str], layout: _Layout, position: int, asset_id: str) -> int:
    """Where the layout lists an asset its include rule `position` names: the rules name their
    assets in rule order, each rule's in id order (`roots.layout_named`)."""
    low, high = 0, len(roots)
    while low < high:
        middle = (low + high) // 2
        if (layout.rule(roots[middle]), roots[middle]) < (position, asset_id):
            low = middle + 1
        else:
            high = middle
    return low


def _second_search_position(
    cooked: list[str],
    chains: Mapping[str, tuple[str, ...]],
    first: set[str],
    roots: list[str],
    at: int,
) -> int:
    """Where in the cook list a root of the second search goes that the layout lists at `at`:
    after the first search's discoveries, among the second search's roots in layout order."""
    start = next((n for n, a in enumerate(cooked) if chains[a][0] not in first), len(cooked))
    later = set(roots[at + 1 :])
    n = start
    while n < len(cooked) and len(chains[cooked[n]]) == 1 and cooked[n] not in later:
        n += 1
    return n
