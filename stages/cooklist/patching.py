"""When an edit of the assets provably leaves the cook list as it was.

The cook list (closure.py, roots.py) sees an asset only through a few facts: its id, its
references, its item count and whether it has a payload, the never-cook prefix or editor
segment that excludes it, whether it is localised, whether a root specification of the build
file names it (always_cook prefixes, startup names, layout globs, cultures) and, when
ambiguous, the text that reports it. `CookFacts.of` digests exactly those facts under one
`cook`/`bundles` configuration; the assets' order is their sorted id order, which an edited
entry keeps. So an edit that leaves every asset's facts digest as it was (an Item renamed where
no prefix, glob or name of the build file looks, its payload or attribute file edited, its
Deps rewritten in the same order) leaves the cook list as it was, and the digests of all the
facts key the closure unit: a clean build after such an edit finds the same key.

An asset that comes or goes, or whose facts move, changes the key: the closure runs again, on
facts patched from the changed entries alone (`patched_state`).

The state also keeps which ids the assets' references name (`referenced`) and which assets
name none (`leaves`): an asset removed that no reference names was followed by no cooked asset
(cooklist/delta.py tells that so, without reading every asset). Both are patched from the
changed entries when those tell them exactly: an asset removed or edited that named nothing
before (a leaf), or one added; an asset gone that named something leaves ids only it named,
unknown without its entry, so they are read again from every asset.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Collection
from typing import NamedTuple

from orchestrator import record
from stages.algorithms.globs import compile_globs
from stages.sources.base import Asset

from .closure import ambiguous_report
from .roots import (
    COOK_DEFAULTS,
    asset_culture,
    cookable,
    editor_segment,
    is_localised,
    matching_prefix,
)

FACTS_SIZE = 12  # bytes of an asset's facts digest
#: Up to this many ids, whether a reference names each is one search of the stored bytes; more,
#: and the bytes are decoded once (a search costs a scan of them).
SEARCHED = 8


class CookFacts:
    """The facts of assets that one `cook` and `bundles` configuration can see."""

    def __init__(self, cook: dict, bundles: dict) -> None:
        self.cook = {**COOK_DEFAULTS, **(cook or {})}
        self.never = list(self.cook["never_cook"])
        self.always = list(self.cook["always_cook"])
        self.cultures = set(self.cook["cultures"])
        self.startup = [n.strip().replace("\\", "/").strip("/") for n in self.cook["startup"]]
        self.globs = [
            (compile_globs(rule.get("include") or []), compile_globs(rule.get("exclude") or []))
            for rule in bundles.get("layout") or []
            if rule.get("include")
        ]

    def of(self, asset: Asset) -> bytes:
        paths = asset.virtual_paths + asset.folders
        named = (
            bool(matching_prefix(asset, self.always)),
            tuple(
                name == asset.id
                or name in asset.virtual_paths
                or name in asset.folders
                or name in asset.files
                for name in self.startup
            ),
            tuple(
                any(map(includes, paths)) and not any(map(excludes, paths))
                for includes, excludes in self.globs
            ),
            bool(self.cultures) and asset_culture(asset) in self.cultures,
        )
        ambiguous = ambiguous_report({asset.id: asset})[asset.id] if asset.items > 1 else None
        facts = (
            asset.id,
            tuple((ref.target, ref.strength, ref.label) for ref in asset.refs),
            asset.items,
            cookable(asset),
            matching_prefix(asset, self.never),
            editor_segment(asset),
            is_localised(asset),
            named,
            ambiguous,
        )
        return hashlib.blake2b(repr(facts).encode("utf-8"), digest_size=FACTS_SIZE).digest()


@record
class ClosureState(NamedTuple):
    """What the dependency stage's plan leaves for its `update`: every asset's facts digest
    under the configuration it planned with, and what the references name. Byte strings, not
    dicts: the stage's record is loaded on every run, and 100,000 entries would take a tenth of
    a second to decode."""

    source_section: str  # digest of the build file's `source` section (`assigned` reads it)
    ids: bytes  # the asset ids in sorted order, UTF-8, newline-separated (ids hold no control
    # character: sources refuse them, base.unsafe_name)
    digests: bytes  # CookFacts.of of each, FACTS_SIZE bytes apiece, in the same order
    # the ids some asset's reference names (strength and label aside), and the assets whose
    # references name none: sorted, newline-separated like `ids`
    referenced: bytes = b""
    leaves: bytes = b""

    def unnamed(self, asset_ids: Collection[str]) -> list[str]:
        """Those of `asset_ids` that no asset's reference names, sorted."""
        return sorted(set(asset_ids) - present(self.referenced, asset_ids))

    def facts(self) -> dict[str, bytes]:
        """Asset id → facts digest, in id order."""
        ids = self.ids.decode("utf-8").split("\n") if self.digests else []
        size = FACTS_SIZE
        return {i: self.digests[n * size : (n + 1) * size] for n, i in enumerate(ids)}


def _state(source_section: str, facts: dict[str, bytes], named: Named) -> ClosureState:
    ids = sorted(facts)
    return ClosureState(
        source_section,
        _joined(ids),
        b"".join(facts[i] for i in ids),
        named.referenced,
        named.leaves,
    )


def _joined(ids: list[str]) -> bytes:
    return "\n".join(ids).encode("utf-8")


def _split(ids: bytes) -> set[str]:
    return set(ids.decode("utf-8").split("\n")) if ids else set()


def present(ids: bytes, asked: Collection[str], searched: int = SEARCHED) -> set[str]:
    """Those of `asked` that sorted newline-separated `ids` hold: up to `searched` of them, one
    search of the bytes each; more, and the bytes are decoded once (a search scans them)."""
    if len(asked) > searched:
        return set(asked) & _split(ids)
    padded = b"\n" + ids + b"\n"
    return {a for a in asked if b"\n" + a.encode("utf-8") + b"\n" in padded}


def merged(ids: bytes, added: set[str], removed: set[str], searched: int = SEARCHED) -> bytes:
    """Sorted newline-separated `ids` with `added` (ids it does not hold) and without `removed`
    (ids it holds): decoded only when an id comes in or more than `searched` go."""
    if added or len(removed) > searched:
        return _joined(sorted((_split(ids) | added) - removed))
    padded = b"\n" + ids + b"\n"
    for asset_id in removed:
        padded = padded.replace(b"\n" + asset_id.encode("utf-8") + b"\n", b"\n", 1)
    return padded[1:-1]


class Named(NamedTuple):
    """What the references of assets name: the ids named, and the assets naming none (each
    sorted, newline-separated, as ClosureState keeps them)."""

    referenced: bytes
    leaves: bytes


def references(assets) -> Named:
    """What the references of `assets` (a mapping, every asset) name."""
    referenced: set[str] = set()
    leaves: set[str] = set()
    for asset_id, asset in assets.items():
        if asset.refs:
            referenced.update(ref.target for ref in asset.refs)
        else:
            leaves.add(asset_id)
    return Named(_joined(sorted(referenced)), _joined(sorted(leaves)))


def closure_state(view: CookFacts, assets: dict[str, Asset], source_section: str) -> ClosureState:
    facts = {i: view.of(asset) for i, asset in assets.items()}
    return _state(source_section, facts, references(assets))


def same_facts(view: CookFacts, state: ClosureState, assets, changes) -> bool:
    """Whether an edit of the assets (`changes`: keyed.Changes of `assets`, the keyed value,
    read only at the changed keys) leaves every asset's facts as they were, and so the cook
    list and the closure unit's key."""
    if changes.removed:
        return False
    ids = state.ids.decode("utf-8").split("\n") if state.digests else []
    for asset_id in changes.changed:
        n = bisect.bisect_left(ids, asset_id)
        if n == len(ids) or ids[n] != asset_id:
            return False  # added
        if state.digests[n * FACTS_SIZE : (n + 1) * FACTS_SIZE] != view.of(assets[asset_id]):
            return False
    return True


def added_ids(view: CookFacts, state: ClosureState, assets, changes) -> list[str] | None:
    """The assets an edit of the assets added (`changes`, read only at the changed keys), when
    every other asset it changed keeps its facts (a clean closure sees it as before); None when
    one does not."""
    ids = state.ids.decode("utf-8").split("\n") if state.digests else []
    added = []
    for asset_id in sorted(changes.changed):
        n = bisect.bisect_left(ids, asset_id)
        if n == len(ids) or ids[n] != asset_id:
            added.append(asset_id)
        elif state.digests[n * FACTS_SIZE : (n + 1) * FACTS_SIZE] != view.of(assets[asset_id]):
            return None
    return added


def patched_state(
    view: CookFacts, state: ClosureState, assets, changes, named: Named
) -> ClosureState:
    """The state a plan from scratch would make after the edit, from the changed entries only
    and what the references name after it (`patched_references`, else `references`)."""
    facts = state.facts()
    for asset_id in changes.removed:
        facts.pop(asset_id, None)
    for asset_id in changes.changed:
        facts[asset_id] = view.of(assets[asset_id])
    return _state(state.source_section, facts, named)


def patched_references(view: CookFacts, state: ClosureState, assets, changes) -> Named | None:
    """What the references name after an edit of the assets, from the changed entries alone,
    or None when they do not tell it exactly (the module's docstring). The stored ids are
    searched, not decoded, unless an id comes in or many change."""
    were_leaves = present(state.leaves, changes.changed | changes.removed)
    if not were_leaves.issuperset(changes.removed):
        return None  # the ids only it named are unknown
    ids = state.ids.decode("utf-8").split("\n") if state.digests else []
    named: set[str] = set()
    leaves: set[str] = set()
    for asset_id in sorted(changes.changed):
        asset = assets[asset_id]
        n = bisect.bisect_left(ids, asset_id)
        if n < len(ids) and ids[n] == asset_id and asset_id not in were_leaves:
            if state.digests[n * FACTS_SIZE : (n + 1) * FACTS_SIZE] != view.of(asset):
                return None  # what it named may have moved, and what it named is unknown
            continue  # its facts as they were: its references too
        if asset.refs:  # added, or naming nothing before
            named.update(ref.target for ref in asset.refs)
        else:
            leaves.add(asset_id)
    referenced = merged(state.referenced, named - present(state.referenced, named), set())
    return Named(referenced, merged(state.leaves, leaves - were_leaves, were_leaves - leaves))


def facts_digest(state: ClosureState) -> str:
    """What the closure unit is keyed on (with the source's roots and externals)."""
    return hashlib.blake2b(state.ids + b"\0" + state.digests, digest_size=16).hexdigest()
