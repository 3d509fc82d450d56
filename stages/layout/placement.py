"""What packing reads of one cooked asset, under one build file: its placement signature.

`pack` (stages/layout/packing.py) reads of each cooked asset only its id, kind, references
(target and strength), the file a warning names (`file_of`) and, for each layout rule, whether
the rule names it and under which bundle name (`include`/`exclude` globs over `asset_paths`,
the `{stem}`/`{package}` template, `maps: all` for a world of `cook.maps`). Everything else
packing uses (the cook order, the options, what the source assigns) is outside the asset. So an
edit that leaves every cooked asset's signature as it was, the cook order and the options as
they were, leaves the packing as it was: `pack.update` proves a rename or an attribute edit
changes no bundle without reading the other assets. A source's priority-fill hook reads whole
assets, so under one the signature is the whole asset."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from orchestrator import ConfigError, digest_value, record
from stages.algorithms.globs import GlobSet
from stages.layout.packing import asset_paths, file_of, render_name
from stages.sources.base import WORLD, Asset


@record
class RuleMatch(NamedTuple):
    """One layout rule's word on an asset: the bundle it names the asset to, "" for none, or
    the error its template gives (the build fails on it, so any change to it is a change)."""

    bundle: str
    error: str = ""


@record
class Placement(NamedTuple):
    """Everything packing reads of one cooked asset (see the module's docstring)."""

    id: str
    kind: str
    refs: tuple[tuple[str, str], ...]
    file: str
    rules: tuple[RuleMatch, ...]
    whole: Asset | None  # the asset itself when a source's hook refines the fill


UNNAMED = RuleMatch("")  # one record for every rule that names no asset: made once


class LayoutMatcher:
    """The build file's layout rules, their globs compiled once, to sign many assets."""

    def __init__(self, layout: Sequence[dict], maps: Sequence[str], whole: bool) -> None:
        self._rules = [
            (
                rule.get("name", ""),
                rule.get("maps") == "all",
                GlobSet(rule.get("include") or []) if rule.get("include") else None,
                GlobSet(rule.get("exclude") or []) if rule.get("exclude") else None,
            )
            for rule in layout
        ]
        self._maps = frozenset(maps)
        self._whole = whole
        self._named: dict[str, RuleMatch] = {}  # bundle name → its match, made once each

    def placement(self, asset: Asset) -> Placement:
        paths = asset_paths(asset)
        matches = []
        for index, (template, by_maps, included, excluded) in enumerate(self._rules):
            named = (by_maps and asset.kind == WORLD and asset.id in self._maps) or (
                included is not None
                and any(map(included, paths))
                and not (excluded is not None and any(map(excluded, paths)))
            )
            matches.append(self._match(template, asset, index) if named else UNNAMED)
        return Placement(
            asset.id,
            asset.kind,
            tuple([(ref.target, ref.strength) for ref in asset.refs]),
            file_of(asset),
            tuple(matches),
            asset if self._whole else None,
        )

    def _match(self, template: str, asset: Asset, index: int) -> RuleMatch:
        try:
            name = render_name(template, asset, f"bundles.layout[{index}]")
        except (ConfigError, KeyError, ValueError, IndexError) as exc:
            return RuleMatch("", f"{type(exc).__name__}: {exc}")
        match = self._named.get(name)
        if match is None:
            match = self._named[name] = RuleMatch(name)
        return match

    def signature(self, asset: Asset) -> str:
        """The digest of the asset's placement: equal digests, equal packing."""
        return digest_value(self.placement(asset))
