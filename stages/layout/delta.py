"""The packing after one asset joined or left the cooked assets, patched from the last one
instead of packed again.

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

An asset that leaves the cook (the benchmark's deleted texture, benchmarks/common.py
asset_deleted) is dropped from the last packing when it was *loose*: a resource that follows no
reference to another asset and that no cooked asset follows a reference to. It reached nothing
and nothing reached it, so it made no implicit asset, shared bundle, dependency or cycle, and
it added no id to `dangling`; what it changes is its bundle's explicit assets and its own entry.
When it was its bundle's one explicit asset, the bundle depended on nothing and held nothing
else (an implicit asset is reached from an explicit one; but a rule may name its bundle
`default`, which takes what no bundle does: that one stays, and packs again): a pack from
scratch does not make it, and the patch removes it. Which cooked assets are loose, and where each stood in the
cook order, the pack's state keeps (`loose`): the asset is gone from the assets, so its own
references cannot be read, and its position proves the cook order is the last one but for it.

Anything else (several assets coming or going, a priority fill, the project's own assignment,
an asset no bundle may hold, one no rule names) returns None: the pack runs again
from scratch.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from orchestrator import digest_value
from stages.algorithms.priority import PRIORITY
from stages.layout.options import Loose, PackOptions, PackState
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


def loose_assets(cooked: Sequence[Asset], follow_soft: bool) -> tuple[Loose, ...]:
    """The cooked resources (`cooked`: in cook order) that follow no reference to another id
    and that no other cooked asset follows a reference to, with their cook-order positions."""

    def followed(asset: Asset) -> set[str]:
        return {
            ref.target
            for ref in asset.refs
            if ref.target != asset.id and (follow_soft or ref.strength == HARD)
        }

    named: set[str] = set()
    alone = []
    for position, asset in enumerate(cooked):
        targets = followed(asset)
        named |= targets
        if asset.kind == RESOURCE and not targets:
            alone.append(Loose(asset.id, position))
    return tuple(loose for loose in alone if loose.id not in named)


class Patched(NamedTuple):
    """The packing patched for one asset that joined or left, and what the pack's state keeps
    of it."""

    packing: Packing
    placements: dict[str, str]  # every cooked asset's signature, in cook order
    dangling: tuple[str, ...]
    loose: tuple[Loose, ...]
    asset: str  # the asset that joined or left
    bundle: str  # its bundle: with the bundles' other entries, as the last packing left them


def joined(
    newcomer: Asset,
    cooked_ids: Sequence[str],
    options: PackOptions,
    matcher: LayoutMatcher,
    known: PackState,
    before: Mapping[str, Any],
    assets: Mapping[str, Asset],
) -> Patched | None:
    """The packing of `cooked_ids` (cook order: the last run's and `newcomer`) when the last
    run's (`before`: its `bundles`, `asset_bundles`, `packing` and `placements` values) stands
    but for the newcomer, or None when that is not proven (the module's docstring). `assets`
    is read only at the members of the newcomer's bundle."""
    asset_id = newcomer.id
    if options.policy == PRIORITY or options.assigned or asset_id in options.not_bundled:
        return None
    dangling = known.dangling
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
    packing = _packing(every, held, cooked_ids, before["packing"])
    signed = dict(before["placements"].items())
    signed[asset_id] = matcher.signature(newcomer)
    placements = {a: signed[a] for a in cooked_ids}
    # Nothing references the newcomer, and it references nothing cooked: the loose assets stay
    # loose, the newcomer is one when it follows no reference at all.
    ids = [loose.id for loose in known.loose] + ([] if followed else [asset_id])
    loose = tuple(sorted((Loose(a, rank[a]) for a in ids), key=lambda loose: loose.position))
    dangling = tuple(sorted(set(dangling) | set(followed)))
    return Patched(packing, placements, dangling, loose, asset_id, name)


def left(
    gone: str,
    cooked_ids: Sequence[str],
    options: PackOptions,
    known: PackState,
    before: Mapping[str, Any],
) -> Patched | None:
    """The packing of `cooked_ids` (cook order: the last run's without `gone`) when the last
    run's (`before`: its `bundles`, `asset_bundles`, `packing` and `placements` values) stands
    but for the asset gone, or None when that is not proven (the module's docstring)."""
    if options.policy == PRIORITY or options.assigned or gone in options.not_bundled:
        return None
    position = next((loose.position for loose in known.loose if loose.id == gone), None)
    if position is None:
        return None
    order = [*cooked_ids[:position], gone, *cooked_ids[position:]]
    if digest_value(order) != known.order:
        return None  # the other assets moved in the cook order too
    # Each keyed value decoded in one pass, before any entry is looked up alone (after one
    # is, the rest are decoded one by one).
    held = dict(before["asset_bundles"].items())
    if gone not in held or len(held[gone]) != 1:
        return None
    (name,) = held[gone]
    every = dict(before["bundles"].items())
    bundle: Bundle = every[name]
    if bundle.kind != "layout" or gone not in bundle.explicit:
        return None
    explicit = tuple(a for a in bundle.explicit if a != gone)
    if explicit:
        every[name] = dataclasses.replace(bundle, explicit=explicit)
    elif bundle.implicit:
        return None  # a rule's `default` bundle, holding what no bundle takes: it stays
    else:
        del every[name]
    signed = dict(before["placements"].items())
    packing = _packing(every, held, cooked_ids, before["packing"])
    loose = tuple(
        Loose(a.id, a.position - 1 if a.position > position else a.position)
        for a in known.loose
        if a.id != gone
    )
    placements = {a: signed[a] for a in cooked_ids}
    return Patched(packing, placements, known.dangling, loose, gone, name)


def _packing(
    bundles: dict[str, Bundle],
    held: Mapping[str, tuple[str, ...]],
    cooked_ids: Sequence[str],
    info: PackingInfo,
) -> Packing:
    """The packing of these bundles, each cooked asset's bundles in cook order, and the last
    packing's cycles, policy and problems (a patch moves none of them)."""
    asset_bundles = {a: held[a] for a in cooked_ids}
    return Packing(bundles, asset_bundles, list(info.cycles), info.policy, list(info.problems))
