"""`shared_dependencies: priority`: filling bundles one priority group at a time (Cocos Creator's
rule, for any layout whose rules carry `priority:`, or bundles a source assigns with priorities).

Bundles are walked highest priority first (`fill_by_priority`): an asset an earlier group owns
is a *redirect* (the bundle records the owner and depends on it, and does not descend), anything
else is held, and after each group its assets are owned by the group's first bundle holding them.
A source may then refine the `Fill` (`SourceResult.pack_hook`: Cocos auto atlases) before
`packing` makes the bundles of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

from orchestrator import record

PRIORITY = "priority"
DEFAULT_PRIORITY = 1  # a bundle whose rule names none (Creator's default for a bundle folder)


@record
@dataclass
class Fill:
    """The priority fill, which a source's hook may refine before the bundles are made."""

    order: list[str]  # bundles in walk order: priority, highest first, then `natural_key` name
    priority: dict[str, int]
    roots: dict[str, list[str]]  # bundle → its explicit assets, in root order
    held: dict[str, list[str]]  # bundle → the assets it holds, in walk order (no redirects)
    redirects: dict[str, dict[str, str]]  # bundle → {asset: owning bundle}
    deps: dict[str, list[str]]  # bundle → the bundles its redirects point to (Creator's `deps`)
    owner: dict[str, str]  # asset → the bundle that owns it
    dropped: set[str] = field(default_factory=set)  # cooked assets a hook took out of the build
    fields: dict[str, dict[str, Any]] = field(default_factory=dict)  # a source's manifest fields


_RUN = re.compile(r"(\d+)|(\D)")


def natural_key(text: str) -> tuple:
    """Creator's `compareUUID` order (`a.localeCompare(b, 'en', {numeric: true})`), closely:
    runs of digits compare by value, letters case-insensitively, punctuation before digits
    before letters; ties keep the code-point order."""
    key = []
    for digits, char in _RUN.findall(text):
        if digits:
            key.append((1, int(digits), ""))
        elif char.isalpha():
            key.append((2, 0, char.casefold()))
        else:
            key.append((0, 0, char))
    return (tuple(key), text)


def fill_by_priority(
    roots: dict[str, list[str]], priorities: dict[str, int], edges: dict[str, tuple[str, ...]]
) -> Fill:
    """Walk the bundles one priority group at a time, highest first; within a group each bundle
    depth-first from each root: an asset an earlier group owns is a redirect (not descended),
    anything else is held and descended into. After a group, what its bundles hold is owned by
    the group's first bundle holding it (so equal priorities each keep their own copy)."""
    order = sorted(roots, key=lambda name: (-priorities[name], natural_key(name)))
    fill = Fill(order, dict(priorities), roots, {}, {}, {}, {})
    for _priority, members in groupby(order, key=priorities.__getitem__):
        group = list(members)
        for name in group:
            held: list[str] = []
            redirects: dict[str, str] = {}
            deps: list[str] = []
            seen: set[str] = set()
            for root in roots[name]:
                stack = [root]
                while stack:
                    asset_id = stack.pop()
                    if asset_id in seen:
                        continue
                    seen.add(asset_id)
                    owner = fill.owner.get(asset_id)
                    if owner is not None:
                        redirects[asset_id] = owner
                        if owner not in deps:
                            deps.append(owner)
                        continue
                    held.append(asset_id)
                    stack.extend(reversed(edges[asset_id]))  # references in file order
            fill.held[name], fill.redirects[name], fill.deps[name] = held, redirects, deps
        for name in group:
            for asset_id in fill.held[name]:
                fill.owner.setdefault(asset_id, name)
    return fill
