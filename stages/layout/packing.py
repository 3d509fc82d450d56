"""Packing: which bundle holds each cooked asset, and how bundles depend on each other.

1. Layout rules name *explicit* assets — and so does the project itself with `bundles.from_meta`
   (a source's `SourceResult.bundles`: Unity's `assetBundleName` in `.meta` files): `maps: all`
   gives one bundle per world of `cook.maps`
   (the world and its levels; a level two worlds share stays with the first world listed), and
   `include`/`exclude` globs select assets by virtual or project-relative path. One asset named
   by two rules is a ConfigError naming both.
2. From each bundle's explicit assets, the references the cook follows reach *implicit* assets
   (a walk stops at explicit assets: they live in their own bundle). An implicit asset used by one
   bundle joins it; used by several it is extracted to `shared/<hash of the users' names>` or
   duplicated into each, per `shared_dependencies`.
3. Cooked assets no bundle takes go to `default`; with `duplicate`, what they reach that is not
   explicit anywhere is copied in too, with `extract` the default bundle depends on its holder.
4. Dependencies: bundle A depends on B when an asset in A references an asset that B holds and A
   does not. Reverse edges and cycles (strongly connected components) follow.

Assets the engine never bundles (a source's `SourceResult.not_bundled`: Unity's DefaultAssets)
are in no bundle: a rule or the project naming one loses it, with a `not_bundled` warning (a
bundle left with no asset is not made), and references to one are no edges.

`shared_dependencies: priority` (Cocos Creator's rule, for any layout whose rules carry
`priority:`, or bundles a source assigns with priorities) replaces 2–4: bundles are filled one
priority group at a time, highest first (`priority.fill_by_priority`): an asset an earlier group
owns is a *redirect* (the bundle records the owner and depends on it, and does not descend),
anything else is held, and after each group its assets are owned by the group's first bundle
holding them. A source may then refine the fill (`SourceResult.pack_hook`: Cocos auto atlases).

Every list is ordered by the cook list (breadth-first from the roots) or by name: the same inputs
always give the same bundles.
"""

from __future__ import annotations

import posixpath
import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from orchestrator import ConfigError, control_character, digest_bytes, record
from stages.algorithms.globs import GlobSet
from stages.algorithms.graphs import strongly_connected
from stages.algorithms.priority import DEFAULT_PRIORITY, PRIORITY, Fill, fill_by_priority
from stages.sources.base import HARD, LEVEL, WORLD, Asset, Problem

DEFAULT_BUNDLE = "default"
SHARED_PREFIX = "shared/"
TEMPLATE_FIELDS = ("stem", "package")
RESERVED_NAMES = ("manifest.json", "staging.json", "link.xml", "reports")  # loose outputs
POLICIES = ("extract", "duplicate", PRIORITY)
NAMES_SHOWN = 5  # layout rules a warning names before it counts the rest


@record
class Redirect(NamedTuple):
    """An asset a bundle names but does not hold: `bundle` (of a higher priority) owns it."""

    asset: str
    bundle: str


@record
@dataclass(frozen=True, slots=True)
class Bundle:
    name: str
    kind: str  # "layout" | "shared" | "default"
    explicit: tuple[str, ...]
    implicit: tuple[str, ...]
    dependencies: tuple[str, ...] = ()
    reverse_dependencies: tuple[str, ...] = ()
    used_by: tuple[str, ...] = ()  # shared bundles: the bundles whose assets use it
    # `shared_dependencies: priority` only (None / empty otherwise):
    priority: int | None = None
    redirects: tuple[Redirect, ...] = ()
    source_fields: dict[str, Any] = field(default_factory=dict)  # a source's manifest fields

    @property
    def assets(self) -> tuple[str, ...]:
        return self.explicit + self.implicit


@record
@dataclass
class Packing:
    """Bundles by name (sorted), asset id → bundles holding it (cook order), bundle cycles."""

    bundles: dict[str, Bundle]
    asset_bundles: dict[str, tuple[str, ...]]
    cycles: list[tuple[str, ...]] = field(default_factory=list)
    policy: str = "extract"
    problems: list[Problem] = field(default_factory=list)  # warnings, as a source's problems


@record
@dataclass
class PackingInfo:
    """The `packing` value: what a build's bundles say as a whole (the bundles themselves and
    each asset's bundles are keyed values of their own)."""

    cycles: list[tuple[str, ...]] = field(default_factory=list)
    policy: str = "extract"
    problems: list[Problem] = field(default_factory=list)


@dataclass
class _LeftOut:
    """The assets no bundle may hold (asset id → why), and the warnings for each bundle that
    names one."""

    reasons: dict[str, str]
    cooked: dict[str, Asset]
    problems: list[Problem] = field(default_factory=list)

    def allows(self, asset_id: str, bundle: str, named_by: str) -> bool:
        """Whether `bundle` may take the asset `named_by` names; if not, a warning says so."""
        reason = self.reasons.get(asset_id)
        if reason is None:
            return True
        self.problems.append(
            Problem(
                "not_bundled",
                file_of(self.cooked[asset_id]),
                f"{asset_id} is left out of bundle {bundle!r} ({named_by} names it): {reason}",
            )
        )
        return False


def pack(
    assets: Sequence[Asset],
    layout: Sequence[dict],
    maps: Sequence[str],
    policy: str = "extract",
    follow_soft: bool = True,
    assigned: dict[str, list[str]] | None = None,
    priorities: dict[str, int] | None = None,
    refine: Callable[[Fill, dict[str, Asset]], None] | None = None,
    not_bundled: dict[str, str] | None = None,
) -> Packing:
    """Pack the cooked `assets` (in cook-list order) per the build file's `bundles` section and
    the bundles the project assigns itself (`assigned`, see `source_bundles`, with the
    `priorities` the project gives them; None: `bundles.from_meta` is off); `refine` is a
    source's hook on the priority fill; `not_bundled`: the assets no bundle may hold (→ why)."""
    if policy not in POLICIES:
        raise ConfigError(
            f"unknown policy {policy!r} ({' | '.join(POLICIES)})",
            key="bundles.shared_dependencies",
        )
    every = {a.id: a for a in assets}
    left_out = _LeftOut({a: why for a, why in (not_bundled or {}).items() if a in every}, every)
    if assigned is not None and not any(assigned.values()):
        left_out.problems.append(_nothing_assigned(layout))
    # What no bundle may hold is packed nowhere: references to it are no edges.
    cooked = {a: asset for a, asset in every.items() if a not in left_out.reasons}
    edges = {a: _followed(asset, cooked, follow_soft) for a, asset in cooked.items()}
    if policy == PRIORITY:
        roots, bundle_priorities = _priority_roots(
            every, layout, maps, assigned or {}, priorities or {}, left_out
        )
        packing = _pack_by_priority(cooked, edges, roots, bundle_priorities, refine)
    else:
        explicit = _explicit_assets(every, layout, maps, assigned or {}, left_out=left_out)
        packing = _pack_by_sharing(cooked, edges, explicit, policy)
    if left_out.reasons:  # every cooked asset has its entry, in cook order: these have none
        packing.asset_bundles = {a: packing.asset_bundles.get(a, ()) for a in every}
    packing.problems = left_out.problems
    return packing


def _pack_by_sharing(
    cooked: dict[str, Asset],
    edges: dict[str, tuple[str, ...]],
    explicit: dict[str, list[str]],
    policy: str,
) -> Packing:
    """`extract` and `duplicate`: implicit assets join the one bundle using them, or are
    extracted to a shared bundle or copied into each when several do."""
    rank = {asset_id: i for i, asset_id in enumerate(cooked)}
    owner = {a: name for name, ids in explicit.items() for a in ids}
    users: dict[str, list[str]] = {}
    for name in sorted(explicit):
        for asset_id in _reach(explicit[name], edges, stop=owner):
            users.setdefault(asset_id, []).append(name)

    holders: dict[str, list[str]] = {a: [b] for a, b in owner.items()}
    implicit: dict[str, list[str]] = {name: [] for name in explicit}
    used_by: dict[str, tuple[str, ...]] = {}
    for asset_id in sorted(users, key=rank.__getitem__):
        names = users[asset_id]
        if len(names) > 1 and policy == "extract":
            shared = shared_bundle_name(names)
            used_by[shared] = tuple(sorted(names))
            names = [shared]
        for name in names:
            implicit.setdefault(name, []).append(asset_id)
        holders[asset_id] = names

    leftovers = [a for a in cooked if a not in holders]
    if leftovers:
        implicit.setdefault(DEFAULT_BUNDLE, [])
        explicit.setdefault(DEFAULT_BUNDLE, [])
        taken = set(leftovers) if policy == "extract" else set(_reach(leftovers, edges, owner))
        for asset_id in sorted(taken | set(leftovers), key=rank.__getitem__):
            if DEFAULT_BUNDLE not in holders.setdefault(asset_id, []):
                holders[asset_id].append(DEFAULT_BUNDLE)
                implicit[DEFAULT_BUNDLE].append(asset_id)

    contents = {
        name: explicit.get(name, []) + implicit.get(name, [])
        for name in set(explicit) | set(implicit)
    }
    # A reference to an asset the bundle holds itself (a duplicate copy included) is no edge.
    forward = {
        name: sorted(
            {h for a in ids for t in edges[a] if name not in holders[t] for h in holders[t]}
        )
        for name, ids in contents.items()
    }
    reverse: dict[str, list[str]] = {name: [] for name in contents}
    for name in sorted(forward):
        for dep in forward[name]:
            reverse[dep].append(name)
    _check_output_names(contents)
    bundles = {}
    for name in sorted(contents):
        kind = (
            "shared"
            if name in used_by
            else "default"
            if name == DEFAULT_BUNDLE and name not in owner.values()
            else "layout"
        )
        bundles[name] = Bundle(
            name,
            kind,
            tuple(explicit.get(name, ())),
            tuple(implicit.get(name, ())),
            tuple(forward[name]),
            tuple(reverse[name]),
            used_by.get(name, ()),
        )
    asset_bundles = {a: tuple(sorted(holders[a])) for a in cooked}
    return Packing(bundles, asset_bundles, bundle_cycles(forward), policy)


def _nothing_assigned(layout: Sequence[dict]) -> Problem:
    """`bundles.from_meta` on a project whose files assign no bundle: say what does instead."""
    if layout:
        names = [repr(rule.get("name", "")) for rule in layout]
        shown = ", ".join(names[:NAMES_SHOWN]) + (
            f", … {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else ""
        )
        instead = f"the bundles are those bundles.layout names ({shown})"
    else:
        instead = f"bundles.layout names none either: every cooked asset goes to {DEFAULT_BUNDLE!r}"
    return Problem(
        "from_meta_assigns_nothing",
        "build file",
        "bundles.from_meta is true, but the project's files assign no asset to a bundle "
        f"(in a Unity project: no .meta file sets assetBundleName); {instead}",
    )


def file_of(asset: Asset) -> str:
    """The project file an asset is: its id when that is one of its files (Unity), else its
    first file."""
    if asset.id in asset.files or not asset.files:
        return asset.id
    return asset.files[0]


# -- sharing by priority ------------------------------------------------------------------------
def _priority_roots(
    cooked: dict[str, Asset],
    layout: Sequence[dict],
    maps: Sequence[str],
    assigned: dict[str, list[str]],
    priorities: dict[str, int],
    left_out: _LeftOut,
) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Bundle → roots and priority. An asset may be a root of several bundles: the fill decides
    who owns it. Layout rules give their bundles their `priority:`. A bundle the project names
    whose every root is left out is not made."""
    roots = {}
    for name in sorted(assigned):
        check_bundle_name(name, "bundles.from_meta")
        named = [a for a in assigned[name] if a in cooked]
        kept = [a for a in named if left_out.allows(a, name, "bundles.from_meta")]
        if kept or not named:
            roots[name] = kept
    bundle_priorities = {name: priorities.get(name, DEFAULT_PRIORITY) for name in roots}
    rule_of: dict[str, int] = {}
    for name, ids in _explicit_assets(cooked, layout, maps, {}, rule_of, left_out).items():
        roots.setdefault(name, [])
        roots[name] += [a for a in ids if a not in roots[name]]
        given = layout[rule_of[name]].get("priority")
        bundle_priorities[name] = given if given is not None else DEFAULT_PRIORITY
    return roots, bundle_priorities


def _pack_by_priority(
    cooked: dict[str, Asset],
    edges: dict[str, tuple[str, ...]],
    roots: dict[str, list[str]],
    priorities: dict[str, int],
    refine: Callable[[Fill, dict[str, Asset]], None] | None,
) -> Packing:
    fill = fill_by_priority(roots, priorities, edges)
    if refine is not None:
        refine(fill, cooked)
    holders: dict[str, list[str]] = {}
    for name in fill.order:
        for asset_id in fill.held[name]:
            holders.setdefault(asset_id, []).append(name)
    leftovers = [a for a in cooked if a not in holders and a not in fill.dropped]
    contents = {name: list(fill.held[name]) for name in fill.order}
    if leftovers:  # cooked, but no bundle reached them (roots of the cook outside any bundle)
        contents.setdefault(DEFAULT_BUNDLE, [])
        for asset_id in leftovers:
            holders[asset_id] = [DEFAULT_BUNDLE]
            contents[DEFAULT_BUNDLE].append(asset_id)
    forward = {name: sorted(fill.deps.get(name, ())) for name in contents}
    if leftovers and DEFAULT_BUNDLE not in fill.held:
        forward[DEFAULT_BUNDLE] = sorted(
            {
                h
                for a in contents[DEFAULT_BUNDLE]
                for t in edges[a]
                for h in holders.get(t, ())
                if h != DEFAULT_BUNDLE
            }
        )
    reverse: dict[str, list[str]] = {name: [] for name in contents}
    for name in sorted(forward):
        for dep in forward[name]:
            reverse.setdefault(dep, []).append(name)
    _check_output_names(contents)
    bundles = {}
    for name in sorted(contents):
        own_roots = set(fill.roots.get(name, ()))
        held = contents[name]
        explicit = tuple(a for a in held if a in own_roots)
        implicit = tuple(a for a in held if a not in own_roots)
        kind = "default" if name == DEFAULT_BUNDLE and name not in fill.held else "layout"
        redirects = tuple(Redirect(a, b) for a, b in fill.redirects.get(name, {}).items())
        bundles[name] = Bundle(
            name,
            kind,
            explicit,
            implicit,
            tuple(forward[name]),
            tuple(reverse.get(name, ())),
            (),
            fill.priority.get(name),
            redirects,
            dict(fill.fields.get(name, {})),
        )
    asset_bundles = {a: tuple(sorted(holders.get(a, ()))) for a in cooked}
    return Packing(bundles, asset_bundles, bundle_cycles(forward), PRIORITY)


def shared_bundle_name(users: Sequence[str]) -> str:
    """`shared/` + the first 16 hex of BLAKE3 over the users' sorted names, one per line."""
    return SHARED_PREFIX + digest_bytes("\n".join(sorted(users)).encode("utf-8"))[:16]


def _followed(asset: Asset, cooked: dict[str, Asset], follow_soft: bool) -> tuple[str, ...]:
    """The cooked targets of the references the cook follows, in file order, once each."""
    seen: dict[str, None] = {}
    for ref in asset.refs:
        if (
            ref.target in cooked
            and ref.target != asset.id
            and (follow_soft or ref.strength == HARD)
        ):
            seen.setdefault(ref.target)
    return tuple(seen)


def _reach(starts: Sequence[str], edges: dict[str, tuple[str, ...]], stop: dict) -> list[str]:
    """Assets reachable from `starts` (excluded), not entering any asset in `stop`."""
    seen = set(starts)
    queue, found = list(starts), []
    while queue:
        nxt = []
        for asset_id in queue:
            for target in edges[asset_id]:
                if target not in seen and target not in stop:
                    seen.add(target)
                    found.append(target)
                    nxt.append(target)
        queue = nxt
    return found


# -- the layout rules -------------------------------------------------------------------------
def source_bundles(source, source_name: str = "") -> dict[str, list[str]]:
    """`bundles.from_meta`: bundle → asset ids as the project's own files assign them; a
    ConfigError when the project's source has no such assignment."""
    assigned = getattr(source, "bundles", None)
    if assigned is None:
        named = f"the {source_name!r} source" if source_name else "this project's source"
        raise ConfigError(
            f"bundles.from_meta is true, but {named} does not assign bundles in "
            f"its files (a Unity project does, through assetBundleName in .meta "
            f"files); use bundles.layout",
            key="bundles.from_meta",
        )
    return {name: list(ids) for name, ids in sorted(assigned.items())}


FROM_META = -1  # the "rule index" of an assignment the project's files make


def _explicit_assets(
    cooked: dict[str, Asset],
    layout: Sequence[dict],
    maps: Sequence[str],
    assigned: dict[str, list[str]],
    rule_of: dict[str, int] | None = None,
    left_out: _LeftOut | None = None,
) -> dict[str, list[str]]:
    """Bundle name → explicit asset ids (assigned first, then rule order, then cook order);
    checks conflicts. `rule_of`, when given, receives the layout rule index of each bundle.
    An asset `left_out` refuses joins no bundle (a bundle left with none is not made)."""
    bundles: dict[str, list[str]] = {}
    named_by: dict[str, tuple[int, str]] = {}  # asset → (rule index, bundle)
    for name in sorted(assigned):
        check_bundle_name(name, "bundles.from_meta")
        for asset_id in assigned[name]:
            if asset_id in cooked and asset_id not in named_by:
                named_by[asset_id] = (FROM_META, name)
                if left_out is None or left_out.allows(asset_id, name, "bundles.from_meta"):
                    bundles.setdefault(name, []).append(asset_id)
    for index, rule in enumerate(layout):
        where = f"bundles.layout[{index}]"
        template = rule.get("name", "")
        _check_template(template, where)
        picks = []  # (bundle name, asset id)
        if rule.get("maps") == "all":
            for world in maps:
                asset = cooked.get(world)
                if asset is None or asset.kind != WORLD:
                    continue
                name = render_name(template, asset, where)
                levels = [
                    t.target
                    for t in asset.refs
                    if t.target in cooked and cooked[t.target].kind == LEVEL
                ]
                picks += [(name, world)] + [(name, level) for level in levels]
        include, exclude = rule.get("include") or [], rule.get("exclude") or []
        if include:
            included, excluded = GlobSet(include), GlobSet(exclude)
            for asset in cooked.values():
                paths = asset_paths(asset)
                if any(map(included, paths)) and not (excluded and any(map(excluded, paths))):
                    picks.append((render_name(template, asset, where), asset.id))
        if rule.get("maps") != "all" and not include:
            raise ConfigError(
                f"layout rule {template!r} names no assets: give `maps: all` or `include` globs",
                key=where,
            )
        for name, asset_id in picks:
            if asset_id in named_by:
                first, first_bundle = named_by[asset_id]
                if first == FROM_META:
                    raise ConfigError(
                        f"asset {asset_id} is assigned to bundle {first_bundle!r} by the project "
                        f"(bundles.from_meta) and named by {where} ({template!r})",
                        key=where,
                    )
                if first != index:
                    raise ConfigError(
                        f"asset {asset_id} is named by two layout rules: bundles.layout[{first}]"
                        f" ({layout[first].get('name')!r}) and {where} ({template!r})",
                        key=where,
                    )
                continue  # a level two worlds share: it stays with the first
            named_by[asset_id] = (index, name)
            if left_out is not None and not left_out.allows(asset_id, name, where):
                continue
            bundles.setdefault(name, []).append(asset_id)
            if rule_of is not None:
                rule_of.setdefault(name, index)
    return bundles


def asset_paths(asset: Asset) -> list[str]:
    """What layout globs match: virtual paths, then project-relative folders and files."""
    paths = list(asset.virtual_paths) + list(asset.folders) + list(asset.files)
    return paths if asset.kind == "resource" else [asset.id, *paths]


def render_name(template: str, asset: Asset, where: str) -> str:
    """A bundle name from its template: `{stem}` (file or item name without extension) and
    `{package}` (the asset's Package, slashes kept; a map's folder)."""
    base = asset.name or posixpath.basename(asset.id)
    stem = posixpath.splitext(base)[0] if asset.kind in (WORLD, LEVEL) else base
    package = asset.package or posixpath.dirname(asset.id)
    name = template.format(stem=stem, package=package)
    check_bundle_name(name, where)
    return name


def _check_template(template: str, where: str) -> None:
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise ConfigError(f"bad bundle name template {template!r}: {exc}", key=where) from None
    unknown = [f for f in fields if f not in TEMPLATE_FIELDS]
    if unknown:
        raise ConfigError(
            f"bundle name template {template!r} uses {unknown}; the fields are "
            f"{{stem}} and {{package}}",
            key=f"{where}.name",
        )


_DRIVE = re.compile(r"^[A-Za-z]:")


def check_bundle_name(name: str, where: str = "bundles.layout") -> None:
    """Bundle names become paths in the output folder and lines of its ledger: refuse any that
    could leave the folder or hold a control character (a newline would start another line)."""
    problem = None
    if not name:
        problem = "is empty"
    elif name.startswith("/"):
        problem = "starts with /"
    elif "\\" in name:
        problem = "contains a backslash"
    elif _DRIVE.match(name) or ":" in name:
        problem = "contains a drive letter or colon"
    elif any(part in ("", ".", "..") for part in name.split("/")):
        problem = "has an empty, . or .. segment"
    elif (found := control_character(name)) is not None:
        problem = f"holds a control character ({found})"
    elif name.split("/")[0] in RESERVED_NAMES:
        problem = "is reserved for the build's loose files"
    if problem:
        raise ConfigError(f"unsafe bundle name {name!r}: it {problem}", key=where)


def _check_output_names(contents: dict[str, list[str]]) -> None:
    """A bundle named like another bundle's folder (`a` and `a/b`) cannot both be files."""
    names = set(contents)
    for name in sorted(names):
        parts = name.split("/")
        for i in range(1, len(parts)):
            folder = "/".join(parts[:i])
            if folder in names:
                raise ConfigError(
                    f"bundle {folder!r} would also be the folder of bundle {name!r}",
                    key="bundles.layout",
                )


# -- the bundle graph -------------------------------------------------------------------------
def bundle_cycles(forward: dict[str, list[str]]) -> list[tuple[str, ...]]:
    """Strongly connected components of more than one bundle, each sorted."""
    components = strongly_connected(sorted(forward), lambda node: forward.get(node, ()))
    cycles = [tuple(sorted(component)) for component in components if len(component) > 1]
    return sorted(cycles)
