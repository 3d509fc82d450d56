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

import posixpath
import re
from collections import deque
from collections.abc import Callable, Iterable
from typing import NamedTuple

from orchestrator.hashing import digest_value

from stages.layout.globs import glob_regex
from .graphs import strongly_connected
from stages.sources.base import HARD, LEVEL, RESOURCE, SOFT, WORLD, Asset, CookList

GUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
ROOT_KINDS = ("maps", "startup", "always_cook", "all", "cultures", "layout")
COOK_DEFAULTS = {"maps": [], "always_cook": [], "never_cook": [], "startup": [], "cultures": [],
                 "include_editor_content": False, "follow_soft_references": True,
                 "fail_on_missing": False}


# -- path matching ---------------------------------------------------------------------------

# Layout globs and `collect.exclude` share the packer's glob dialect (one meaning everywhere).
glob_to_regex = glob_regex


def compile_globs(patterns: Iterable[str]) -> Callable[[str], bool]:
    """One predicate: does a path match any of the globs (whole path)."""
    patterns = list(patterns)
    if not patterns:
        return lambda path: False
    regex = re.compile("|".join(f"(?:{glob_regex(p)})" for p in patterns) + r"\Z", re.DOTALL)
    return lambda path: regex.match(path) is not None


def asset_paths(asset: Asset) -> tuple[str, ...]:
    """The paths prefixes and globs are matched against: virtual paths, then folders."""
    return asset.virtual_paths + asset.folders


def matching_prefix(asset: Asset, prefixes: Iterable[str]) -> str | None:
    """The first prefix that a virtual path or project-relative folder of the asset starts with."""
    paths = asset_paths(asset)
    for prefix in prefixes:
        if any(path.startswith(prefix) for path in paths):
            return prefix
    return None


def _segments(asset: Asset) -> list[list[str]]:
    return [path.split("/") for path in asset_paths(asset)]


def editor_segment(asset: Asset) -> str | None:
    """The path segment that makes the asset editor content (starts with `Editor`), if any."""
    for segments in _segments(asset):
        for segment in segments:
            if segment.startswith("Editor"):
                return segment
    return None


def asset_culture(asset: Asset) -> str | None:
    """The culture of an asset below `L10N/<culture>/`, if any."""
    for segments in _segments(asset):
        for n in range(len(segments) - 1):
            if segments[n] == "L10N":
                return segments[n + 1]
    return None


def is_localised(asset: Asset) -> bool:
    return any("L10N" in segments for segments in _segments(asset))


def cookable(asset: Asset) -> bool:
    """An asset with an item and a payload on disk (a resource needs both)."""
    return asset.items > 0 and bool(asset.files)


def unavailable_reason(asset_id: str, asset: Asset | None) -> str:
    if asset is None:
        return "no repository item" if GUID_RE.match(asset_id) else "not found in the project"
    if asset.items == 0:
        return "resource folder without a repository item"
    return "repository item without a resource folder"


# -- resolving names -------------------------------------------------------------------------

def resolve(assets: dict[str, Asset], name: str) -> list[str]:
    """Asset ids a user's name means: an id (GUID, world/level path), a virtual path, or a
    project-relative path (a resource folder or a file in it); several for a duplicated path."""
    name = name.strip().replace("\\", "/").strip("/")
    if name in assets:
        return [name]
    found = [a.id for a in assets.values()
             if name in a.virtual_paths or name in a.folders or name in a.files]
    return found


# -- roots -----------------------------------------------------------------------------------

class Roots(NamedTuple):
    first: dict[str, list[str]]  # kind → ids (maps, startup, always_cook, cultures | all)
    layout: list[str]  # ids the bundle layout names, in rule order
    unresolved: dict[str, str]  # a name in the build file that matched nothing → reason


def layout_named(assets: dict[str, Asset], cook: dict, bundles: dict) -> list[str]:
    """Asset ids named explicitly by `bundles.layout` (maps: all → each cooked world and its
    levels; include/exclude globs on virtual paths or project-relative paths), in rule order,
    then those the project assigns to bundles itself (`bundles["assigned"]`, by bundle name)."""
    named: dict[str, None] = {}
    for rule in bundles.get("layout") or []:
        if rule.get("maps") == "all":
            for world in cook.get("maps") or []:
                world = _normalise(world)
                named.setdefault(world, None)
                asset = assets.get(world)
                for ref in asset.refs if asset else ():
                    if ref.label == "level":
                        named.setdefault(ref.target, None)
        includes = compile_globs(rule.get("include") or [])
        excludes = compile_globs(rule.get("exclude") or [])
        if rule.get("include"):
            for asset in assets.values():
                paths = asset_paths(asset)
                if any(map(includes, paths)) and not any(map(excludes, paths)):
                    named.setdefault(asset.id, None)
    assigned = bundles.get("assigned") or {}
    for name in sorted(assigned):
        for asset_id in assigned[name]:
            named.setdefault(asset_id, None)
    return list(named)


def _normalise(path: str) -> str:
    """A project-relative path as the assets name it (`/`, no `./`, no trailing `/`)."""
    return posixpath.normpath(path.strip().replace("\\", "/")).lstrip("/")


def cook_roots(assets: dict[str, Asset], cook: dict, bundles: dict | None = None,
               source_roots: dict[str, list[str]] | None = None) -> Roots:
    """The roots of the cook, by kind, in the spec's order. A source's own roots (e.g. Unity's
    build-settings scenes) come right after `maps`: they are the project's maps."""
    cook = {**COOK_DEFAULTS, **(cook or {})}
    first: dict[str, list[str]] = {}
    unresolved: dict[str, str] = {}
    maps = []
    for world in cook["maps"]:
        world = _normalise(world)
        maps.append(world)
        if world not in assets:
            unresolved[world] = "cook.maps names a world that is not in the project"
    first["maps"] = maps
    for kind, ids in (source_roots or {}).items():
        first[f"source:{kind}"] = list(ids)
    startup: list[str] = []
    for name in cook["startup"]:
        ids = resolve(assets, name)
        if not ids:
            unresolved[name] = "cook.startup names no asset (neither a GUID, a virtual path nor a path)"
        startup.extend(ids)
    first["startup"] = startup
    prefixes = list(cook["always_cook"])
    first["always_cook"] = [a.id for a in assets.values() if matching_prefix(a, prefixes)]
    layout = layout_named(assets, cook, bundles or {})
    given_by_source = any(ids for ids in (source_roots or {}).values())
    if not (cook["maps"] or cook["startup"] or cook["always_cook"] or layout or given_by_source):
        # Unreal's fallback: everything except editor content and localised variants.
        first["all"] = [a.id for a in assets.values()
                        if cookable(a) and not editor_segment(a) and not is_localised(a)
                        and not matching_prefix(a, cook["never_cook"])]
    cultures = set(cook["cultures"])
    first["cultures"] = [a.id for a in assets.values() if cultures and asset_culture(a) in cultures]
    ordered = {kind: first[kind] for kind in ROOT_KINDS if kind in first}
    ordered = {"maps": ordered.pop("maps"),
               **{k: v for k, v in first.items() if k.startswith("source:")}, **ordered}
    return Roots(ordered, layout, unresolved)


# -- the closure -----------------------------------------------------------------------------

def _chain_text(chain: Iterable[str]) -> str:
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

    def reach(self, target: str, chain: tuple[str, ...], via: str) -> None:
        """`target` reached by `chain` (its referrer's chain, or () for a root)."""
        if target in self.chains or target in self.missing or target in self.never_refs:
            return
        if target in self.external_ids:
            self.external.setdefault(target, None)
            return
        asset = self.assets.get(target)
        if asset is None or not cookable(asset):
            self.missing[target] = f"{unavailable_reason(target, asset)}; {via}"
            return
        reason = self.excluded(asset)
        if reason is not None:
            self.never_refs[target] = f"{reason}; {via}"
            return
        self.chains[target] = chain + (target,)
        self.queue.append(target)

    def add_roots(self, kind: str, ids: list[str]) -> None:
        for asset_id in ids:
            origin = ("bundles.layout" if kind == "layout" else kind if kind.startswith("source:")
                      else f"cook.{kind}")
            self.reach(asset_id, (), f"root from {origin}")

    def run(self) -> None:
        while self.queue:
            source = self.queue.popleft()
            chain = self.chains[source]
            for ref in self.assets[source].refs:
                if ref.strength == SOFT and not self.follow_soft:
                    continue
                if ref.target in self.chains:
                    continue
                suffix = f" ({ref.strength}: {ref.label})" if ref.strength == SOFT else ""
                self.reach(ref.target, chain, f"chain {_chain_text(chain)}{suffix}")

    def followed(self, asset_id: str) -> list[str]:
        return [ref.target for ref in self.assets[asset_id].refs
                if ref.target in self.chains and (self.follow_soft or ref.strength == HARD)]


def find_cycles(order: list[str], edges: Callable[[str], list[str]]) -> list[list[str]]:
    """One shortest cycle per strongly connected component (iterative Tarjan), each starting at
    its member discovered first, components in discovery order."""
    rank = {node: n for n, node in enumerate(order)}
    components = [component for component in strongly_connected(order, edges)
                  if len(component) > 1 or component[0] in edges(component[0])]
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
            payload = (f"payload from {asset.folders[0]}, the first folder in sorted path order"
                       if asset.folders else "no resource folder")
            report[asset.id] = (f"{asset.items} repository items ({', '.join(asset.virtual_paths)}) "
                                f"in folders [{', '.join(asset.folders)}]; {payload}")
    return report


def compute_cooklist(assets: dict[str, Asset], cook: dict, bundles: dict | None = None,
                     external: Iterable[str] = (),
                     source_roots: dict[str, list[str]] | None = None) -> CookList:
    """The cook list for a build file's `cook` and `bundles` sections (plus the source's own
    roots, `SourceResult.roots`, and its known-external ids)."""
    roots = cook_roots(assets, cook, bundles, source_roots)
    closure = _Closure(assets, cook, external)
    for name, reason in roots.unresolved.items():
        closure.missing[name] = reason
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
    return CookList(cooked=cooked, chains=closure.chains, missing=closure.missing,
                    ambiguous=ambiguous_report(assets), never_cook_refs=closure.never_refs,
                    cycles=cycles, roots=all_roots, external=list(closure.external),
                    failure=failure)


def assets_digest(assets: dict[str, Asset]) -> str:
    """A content digest of the assets (the dependency unit keys on it)."""
    return digest_value([[a.id, a.kind, a.type, a.virtual_paths, a.folders, a.files,
                          [[r.target, r.strength, r.label] for r in a.refs], a.items]
                         for a in assets.values()])


# -- why -------------------------------------------------------------------------------------

class WhyAnswer(NamedTuple):
    id: str
    cooked: bool
    chain: tuple[str, ...]  # root first, the asset last (empty when not cooked)
    reason: str


def why(assets: dict[str, Asset], cooklist: CookList, name: str,
        cook: dict | None = None) -> list[WhyAnswer]:
    """Why an asset (GUID, virtual path or project-relative path) is cooked — its chain — or why
    not. `cook` (the build file's section) sharpens the answer for assets nothing reached."""
    ids = resolve(assets, name) or [name.strip()]
    answers = []
    for asset_id in ids:
        if asset_id in cooklist.chains:
            chain = cooklist.chains[asset_id]
            kinds = [kind for kind, members in cooklist.roots.items() if chain[0] in members]
            root = f"root from {', '.join(kinds)}" if kinds else "root"
            answers.append(WhyAnswer(asset_id, True, chain, f"cooked: {_chain_text(chain)} ({root})"))
        else:
            answers.append(WhyAnswer(asset_id, False, (),
                                     _not_cooked_reason(assets, cooklist, asset_id, cook)))
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


def why_text(answers: list[WhyAnswer]) -> str:
    return "\n".join(f"{a.id}: {a.reason}" for a in answers) + "\n"


# -- text and graph exports ------------------------------------------------------------------

def cooklist_text(cooklist: CookList) -> str:
    """The cook list for people: cooked ids with their chains, then every problem."""
    lines = [f"cooked ({len(cooklist.cooked)}):"]
    lines += [f"  {asset_id}  <- {_chain_text(cooklist.chains[asset_id])}"
              for asset_id in cooklist.cooked]
    for title, table in (("missing", cooklist.missing), ("ambiguous", cooklist.ambiguous),
                         ("never_cook references", cooklist.never_cook_refs)):
        if table:
            lines.append(f"{title} ({len(table)}):")
            lines += [f"  {key}: {value}" for key, value in table.items()]
    if cooklist.cycles:
        lines.append(f"cycles ({len(cooklist.cycles)}):")
        lines += [f"  {_chain_text(cycle + cycle[:1])}" for cycle in cooklist.cycles]
    if cooklist.external:
        lines.append(f"external ({len(cooklist.external)}): {', '.join(cooklist.external)}")
    if cooklist.failure:
        lines.append(f"FAILED: {cooklist.failure}")
    return "\n".join(lines) + "\n"


def graph_json(assets: dict[str, Asset], cooklist: CookList | None = None,
               cooked_only: bool = False) -> dict:
    """The reference graph: nodes (with cooked/missing status) and typed edges, in asset order."""
    cooked = set(cooklist.cooked) if cooklist else set()
    missing = cooklist.missing if cooklist else {}
    keep = (lambda i: i in cooked) if cooked_only else (lambda i: True)
    nodes, edges, dangling = [], [], {}
    for asset in assets.values():
        if not keep(asset.id):
            continue
        nodes.append({"id": asset.id, "kind": asset.kind, "type": asset.type,
                      "virtual_paths": list(asset.virtual_paths), "cooked": asset.id in cooked,
                      "missing": asset.id in missing})
        for ref in asset.refs:
            if cooked_only and ref.target in assets and not keep(ref.target):
                continue
            edges.append({"from": asset.id, "to": ref.target, "strength": ref.strength,
                          "label": ref.label})
            if ref.target not in assets:
                dangling.setdefault(ref.target, None)
    nodes += [{"id": target, "kind": "missing", "type": "", "virtual_paths": [], "cooked": False,
               "missing": True} for target in dangling]
    return {"nodes": nodes, "edges": edges}


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def graph_dot(assets: dict[str, Asset], cooklist: CookList | None = None,
              cooked_only: bool = False) -> str:
    """The reference graph in Graphviz DOT: soft edges dashed, missing nodes red, cooked bold."""
    graph = graph_json(assets, cooklist, cooked_only)
    shapes = {WORLD: "doubleoctagon", LEVEL: "octagon", RESOURCE: "box", "missing": "box"}
    lines = ["digraph assets {", "  rankdir=LR;", "  node [fontname=\"sans-serif\"];"]
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
        lines.append(f"  {_dot_quote(edge['from'])} -> {_dot_quote(edge['to'])} "
                     f"[label={_dot_quote(edge['label'])}{style}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
