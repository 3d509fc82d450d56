"""The packing after one asset joined the cooked assets, patched from the last one instead of
packed again.

`pack` (packing.py) reads every cooked asset: its references make the bundles' implicit assets,
shared bundles and dependencies. An asset that comes into the cook with no reference the pack
follows to another cooked asset, that no cooked asset follows a reference to, and that one
`include` rule of the layout names into a bundle that exists already, changes only that bundle's
explicit assets (it goes in cook order among those of its rule) and gets its own entry: it
reaches nothing, nothing reaches it, so no implicit asset, shared bundle, dependency or cycle
moves. That is the benchmark's added texture (benchmarks/common.py asset_added).

Whether a cooked asset follows a reference to the newcomer is told without reading them: the
pack keeps, in its state, every id a cooked asset follows a reference to that is not cooked
itself (`dangling`); the newcomer was not cooked, so a reference to it would be there.
Anything else (an asset gone, several new, a priority fill, the project's own assignment)
returns None: the pack runs again from scratch.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from stages.algorithms.priority import PRIORITY
from stages.layout.options import PackOptions
from stages.layout.packing import Bundle, Packing, PackingInfo
from stages.layout.placement import LayoutMatcher
from stages.sources.base import HARD, RESOURCE, Asset


def dangling_targets(cooked: Iterable[Asset], ids: set[str], follow_soft: bool) -> tuple[str, ...]:
    """The ids cooked assets follow a reference to (as packing follows them) that are not
    cooked, sorted."""
    return tuple(
        sorted(
            {
                ref.target
                for asset in cooked
                for ref in asset.refs
                if ref.target not in ids and (follow_soft or ref.strength == HARD)
            }
        )
    )


class Joined(NamedTuple):
    """The packing patched for one newcomer, and what the pack's state keeps of it."""

    packing: Packing
    placements: dict[str, str]  # every cooked asset's signature, in cook order
    dangling: tuple[str, ...]


def joined(
    newcomer: Asset,
    cooked_ids: Sequence[str],
    options: PackOptions,
    matcher: LayoutMatcher,
    dangling: Sequence[str],
    before: Mapping[str, Any],
    assets: Mapping[str, Asset],
) -> Joined | None:
    """The packing of `cooked_ids` (cook order: the last run's and `newcomer`) when the last
    run's (`before`: its `bundles`, `asset_bundles`, `packing` and `placements` values) stands
    but for the newcomer, or None when that is not proven (the module's docstring). `assets`
    is read only at the members of the newcomer's bundle."""
    asset_id = newcomer.id
    if options.policy == PRIORITY or options.assigned or asset_id in options.not_bundled:
        return None
    if newcomer.kind != RESOURCE or asset_id in dangling:
        return None
    cooked = set(cooked_ids)
    followed = [
        ref.target
        for ref in newcomer.refs
        if ref.target != asset_id and (options.follow_soft or ref.strength == HARD)
    ]
    if any(target in cooked for target in followed):
        return None
    placement = matcher.placement(newcomer)
    named = [(n, match.bundle) for n, match in enumerate(placement.rules) if match.bundle]
    if len(named) != 1 or any(match.error for match in placement.rules):
        return None
    rule, name = named[0]
    bundles = before["bundles"]
    if name not in bundles:
        return None
    bundle: Bundle = bundles[name]
    if bundle.kind != "layout":
        return None
    for member in bundle.explicit:  # each named by the same rule: in cook order
        found = assets.get(member)
        if found is None or matcher.placement(found).rules[rule].bundle != name:
            return None
    rank = {a: n for n, a in enumerate(cooked_ids)}
    explicit = list(bundle.explicit)
    explicit.insert(bisect.bisect_left(explicit, rank[asset_id], key=rank.__getitem__), asset_id)
    every = dict(bundles.items())
    every[name] = dataclasses.replace(bundle, explicit=tuple(explicit))
    held = dict(before["asset_bundles"].items())
    held[asset_id] = (name,)
    info: PackingInfo = before["packing"]
    packing = Packing(
        every,
        {a: held[a] for a in cooked_ids},
        list(info.cycles),
        info.policy,
        list(info.problems),
    )
    signed = dict(before["placements"].items())
    signed[asset_id] = matcher.signature(newcomer)
    placements = {a: signed[a] for a in cooked_ids}
    return Joined(packing, placements, tuple(sorted(set(dangling) | set(followed))))
