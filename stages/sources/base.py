"""The asset-source interface: what the stages see of a project, whatever engine wrote it.

A source turns a project tree into `Asset`s with typed references. Collecting fans out: the source
splits the file table into parse units (`plan`), each unit is parsed by a pure, picklable function
(`parse`, run on any executor, reading files only through the recording `Reader`), and the
partial results are assembled in the driver (`assemble`) into a `SourceResult`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from orchestrator import (
    FileEntry,
    Keyed,
    Reader,
    control_character,
    decode_entry,
    fast_pickle,
    record,
)
from orchestrator import Problem as Problem  # what a source reports it noticed
from stages.rules.keyed_index import IndexEdit

HARD = "hard"
SOFT = "soft"

WORLD = "world"
LEVEL = "level"
RESOURCE = "resource"


@record
@fast_pickle
@dataclass(frozen=True, slots=True)
class Ref:
    """A reference from one asset to another, in file order."""

    target: str  # the referenced asset id
    strength: str  # HARD or SOFT
    label: str = ""  # why: "Deps", "CollisionShape", "attribute file", "level", "m_SourcePrefab", …


@record
@fast_pickle
@dataclass(frozen=True, slots=True)
class Asset:
    """A cookable thing: a resource (id = GUID) or a world/level (id = project-relative path)."""

    id: str
    kind: str  # WORLD | LEVEL | RESOURCE
    type: str  # the asset's Type ("Material", "Texture", …; "World"/"Level" for maps)
    virtual_paths: tuple[str, ...]  # Package/Name of each item (several when duplicated)
    folders: tuple[str, ...]  # project-relative folders holding it, sorted; payload from the first
    files: tuple[str, ...]  # project-relative files that make its payload (first folder), sorted
    refs: tuple[Ref, ...]  # outgoing references, in file order
    package: str = ""  # Package of the first item ("" for maps)
    name: str = ""  # Name of the first item, or the file name for maps
    items: int = 1  # number of repository items with this id (>1: ambiguous)


UNSAFE_NAME = "unsafe_name"


def unsafe_name(what: str, value: str, file: str, line: int | None = None) -> Problem | None:
    """A fatal problem when a name the project gives (an asset id, a package, an item's name, a
    bundle name) holds a control character: names become paths, ledger lines and log lines, and
    a newline in one could make any of them say something else. None when it holds none."""
    found = control_character(value)
    if found is None:
        return None
    return Problem(
        UNSAFE_NAME,
        file,
        f"{what} {value!r} holds a control character ({found}); names may hold none",
        line=line,
        fatal=True,
    )


@record
@fast_pickle
@dataclass(frozen=True, slots=True)
class ParseUnit:
    """One unit of parse work: a stable id and the project-relative files it starts from."""

    id: str
    kind: str
    files: tuple[str, ...]


@record
class Recipe(NamedTuple):
    """How the cook makes an asset that no single project file holds (a Cocos auto-atlas page):
    `cooker(asset_id, files, data)` ("module:function") returns the payload from the asset's
    files, read through the reader; `version` and `data` (JSON-able) enter the unit's key."""

    cooker: str
    version: int
    data: Any


@record
class PackHook(NamedTuple):
    """A source's refinement of the bundles after the priority fill (Cocos: auto atlases, load
    paths): `refine(fill, cooked, data)` ("module:function"), `data` picklable."""

    target: str
    data: Any


@dataclass
class SourceResult:
    """Everything collected: assets by id, the source-specific index for rules, problems, roots."""

    assets: dict[str, Asset]
    index: Any  # e.g. MessiahIndex; consumed by the rule engine's predefined sets
    problems: list[Problem] = field(default_factory=list)
    roots: dict[str, list[str]] = field(default_factory=dict)  # source-defined roots, by kind
    external: tuple[str, ...] = ()  # ids known to live outside the project (not missing)
    digest: str = ""  # content digest of everything `assets` derive from (set by the collect stage)
    # What the project itself says beyond references (None/"": the format says nothing):
    bundles: dict[str, list[str]] | None = (
        None  # bundle → asset ids its files assign (`bundles.from_meta`)
    )
    type_assemblies: dict[str, str] | None = None  # fully-qualified Type → its assembly (link.xml)
    default_cooker: str = (
        ""  # cooker of Types `cook.cookers` does not list ("": the pipeline's default)
    )
    # bundle → priority (`shared_dependencies: priority`)
    bundle_priorities: dict[str, int] | None = None
    recipes: dict[str, Recipe] = field(default_factory=dict)  # asset id → how it is cooked, if made
    pack_hook: PackHook | None = None  # called by `shared_dependencies: priority` after the fill
    # asset id → why the engine never puts it in a bundle (Unity's DefaultAssets): packing leaves
    # it out of any bundle that names it, with a `not_bundled` warning, and packs it nowhere
    not_bundled: dict[str, str] = field(default_factory=dict)

    def info(self) -> SourceInfo:
        """What the stages read of the project besides its assets and the rule index."""
        return SourceInfo(
            list(self.problems),
            dict(self.roots),
            tuple(self.external),
            self.bundles,
            self.type_assemblies,
            self.default_cooker,
            self.bundle_priorities,
            dict(self.recipes),
            self.pack_hook,
            dict(self.not_bundled),
        )


@record
@dataclass
class SourceInfo:
    """The collect stage's `source` value: a SourceResult without its assets and its index,
    which are values of their own (`assets`, keyed by id; `index`)."""

    problems: list[Problem] = field(default_factory=list)
    roots: dict[str, list[str]] = field(default_factory=dict)
    external: tuple[str, ...] = ()
    bundles: dict[str, list[str]] | None = None
    type_assemblies: dict[str, str] | None = None
    default_cooker: str = ""
    bundle_priorities: dict[str, int] | None = None
    recipes: dict[str, Recipe] = field(default_factory=dict)
    pack_hook: PackHook | None = None
    not_bundled: dict[str, str] = field(default_factory=dict)


#: The one entry of an index its source does not key (Unity's, Cocos's): rule units that read
#: it depend on all of it.
WHOLE_INDEX = "whole"


def index_entries(index: Any) -> dict[str, Any]:
    """A source's index as the entries of the keyed value `index` (collect's output): its own
    `entries()` when it has them (the Messiah index, by GUID and virtual path), else one entry
    holding it whole."""
    entries = getattr(index, "entries", None)
    return entries() if callable(entries) else {WHOLE_INDEX: index}


def index_of(entries: Any, lazily: bool = False) -> Any:
    """The index a keyed value's entries describe (collect's `index` as a stage reads it).
    `lazily`: each set of a Messiah index decoded when first read, from the entries' stored
    bytes (a reader of one set, a rule unit looking GUIDs up, decodes a third of it)."""
    if WHOLE_INDEX in entries:
        return entries[WHOLE_INDEX]
    from .messiah.index import MessiahIndex

    encoded = entries.encoded_items() if lazily and isinstance(entries, Keyed) else None
    if encoded is not None:
        return MessiahIndex.from_encoded(encoded, decode_entry)
    items = entries.items() if hasattr(entries, "items") else entries
    return MessiahIndex.from_entries(items)


def member_rooting(stored_root: str, root: str) -> Any:
    """What roots the members of one entry of a keyed index stored under `stored_root` ("": as
    stored, project-relative) as the index rooted at `root` holds them (`rooted(attribute,
    members)`): what reads the index entry by entry (rules/functions.py EntryMembers) makes
    the members the decoded index would give."""
    from .messiah.index import RootedMembers

    return RootedMembers(stored_root, root)


def index_of_encoded(encoded: Iterable[tuple[str, bytes]]) -> Any:
    """The index whose entries these are, each as the build state stores it (codec bytes:
    orchestrator's `Keyed.encoded_items`), decoded here, each set when first read. Only the
    Messiah index is stored by entry (importing it makes its records known to the codec: a
    custom-code worker has not imported it before)."""
    from .messiah.index import MessiahIndex

    return MessiahIndex.from_encoded(encoded, decode_entry)


def patched_index(index: Any, changed: Mapping[str, Any], removed: Iterable[str]) -> Any:
    """`index` (one stored by entry) with some entries changed and some removed: the index
    `index_of` makes of the entries so changed (each set in key order). The Messiah index
    patches itself from copies of its sets (`MessiahIndex.patched`)."""
    patch = getattr(index, "patched", None)
    if callable(patch):
        return patch(changed, removed)
    entries = index.entries()
    for key in removed:
        entries.pop(key, None)
    entries.update(changed)
    return index_of(sorted(entries.items()))


def differing_entries(
    old: Mapping[str, str], new: Mapping[str, str], most: float
) -> tuple[list[str], list[str]] | None:
    """(keys changed or added, keys removed) from the entry digests `old` to `new`; None when
    more than `most` of them differ (decoding the index whole is then no dearer)."""
    changed = [key for key, digest in new.items() if old.get(key) != digest]
    removed = [key for key in old if key not in new]
    return None if len(changed) + len(removed) > most else (changed, removed)


class AdvancedDigests(NamedTuple):
    """The entry digests of an index found from an earlier one's and the keys that changed."""

    digests: dict[str, str]
    changed: list[str]  # keys whose entry is new or differs
    removed: list[str]


def advanced_digests(old: Mapping[str, str], entries: Any, keys: Iterable[str]) -> AdvancedDigests:
    """The digests of `entries` (an orchestrator.Keyed), from `old`, the digests of an earlier
    value, and `keys`, a superset of the keys that differ between the two: only their digests
    are read (an edit of one Item reads a few rows, not the 100,000 of the whole index)."""
    keys = sorted(set(keys))
    fresh = entries.digests_of(keys)
    changed = [key for key in keys if key in fresh and old.get(key) != fresh[key]]
    removed = [key for key in keys if key not in fresh and key in old]
    digests = dict(old)
    for key in removed:
        del digests[key]
    digests.update(fresh)
    return AdvancedDigests(digests, changed, removed)


class _Decoded(NamedTuple):
    identity: str | None  # the index's token (IndexEdit.base), when the caller named it
    digests: dict[str, str]
    index: Any


class IndexPatcher:
    """The index a process last decoded, and the digests of its entries: the next one it is
    asked for is that one patched by the entries whose digests differ, when they are few (a
    resident build after an edit), rather than decoded whole. Told which entries changed since
    the one it holds (an `IndexEdit`), it reads only their digests."""

    #: More entries differing than this share of the index, and it is decoded whole.
    MOST_CHANGED = 0.1

    def __init__(self) -> None:
        self._last: _Decoded | None = None

    def index(self, entries: Any, identity: str | None = None, edit: IndexEdit | None = None):
        """The index of a keyed value `entries` (an orchestrator.Keyed), named `identity`;
        `edit` says how it differs from an earlier one."""
        last = self._last
        if last is not None and edit is not None and last.identity == edit.base:
            digests, changed, removed = advanced_digests(last.digests, entries, edit.keys)
            differing: tuple[list[str], list[str]] | None = (changed, removed)
            if len(changed) + len(removed) > self.MOST_CHANGED * len(digests):
                differing = None
        else:
            digests = entries.digests()
            differing = None
            if last is not None:
                differing = differing_entries(
                    last.digests, digests, self.MOST_CHANGED * len(digests)
                )
        if last is not None and differing is not None:
            changed, removed = differing
            index = patched_index(last.index, {key: entries[key] for key in changed}, removed)
        else:
            index = index_of(entries)
        self._last = _Decoded(identity, digests, index)
        return index


class AssetSource(Protocol):
    """A project format. Implementations are module-level objects so they pickle by reference.

    Optional: `configure(ctx) -> dict`, options the source reads of the build beyond `collect`
    (keys starting with `_` stay in the driver, for `plan` and `assemble`); and
    `shared_dependencies`, the bundle policy when the build file names none (`extract`).
    """

    name: str
    version: int

    def plan(self, files: list[FileEntry], options: dict) -> list[ParseUnit]:
        """Split the file table into parse units (per repository, per level, per batch)."""

    def parse(self, unit: ParseUnit, reader: Reader, options: dict) -> Any:
        """Parse one unit's files (pure; reads only through `reader`); returns a picklable part."""

    def assemble(
        self, root: str, files: list[FileEntry], parts: dict[str, Any], options: dict
    ) -> SourceResult:
        """Combine the parts (keyed by unit id) into assets, index and problems."""


@record
@dataclass(frozen=True, slots=True)
class Finding:
    """Why the closure did not cook an id it reached, and how it got there, by ids.

    `text()` is the reason as `CookList.missing` / `never_cook_refs` give it; `text(name)` the
    same with each id of the chain shown as `name(id)` (for people: stages/cooklist/explain.py).
    """

    cause: str  # "no repository item", "never_cook Dev/", …
    chain: tuple[str, ...] = ()  # the chain of the asset whose reference reached it, root first
    reference: str = ""  # a soft reference's "soft: <label>" (after the chain)
    root: str = ""  # reached as a root: "root from cook.maps", …

    def text(self, name: Callable[[str], str] | None = None) -> str:
        if self.chain:
            shown = self.chain if name is None else [name(asset_id) for asset_id in self.chain]
            suffix = f" ({self.reference})" if self.reference else ""
            return f"{self.cause}; chain {' > '.join(shown)}{suffix}"
        return f"{self.cause}; {self.root}" if self.root else self.cause


@record
@dataclass
class CookList:
    """The dependency stage's output: what to cook, why, and what went wrong on the way."""

    cooked: list[str]  # asset ids, in breadth-first discovery order (roots first)
    chains: dict[str, tuple[str, ...]]  # id → the shortest chain from a root (root first, id last)
    missing: dict[str, str]  # referenced id → reason, with its chain
    ambiguous: dict[str, str]  # GUID with several items → reason
    never_cook_refs: dict[str, str]  # never-cooked id that a root or reference reached → reason
    cycles: list[list[str]]  # each cycle once, as a list of ids
    roots: dict[str, list[str]]  # root kind ("maps", "startup", "always_cook", …) → ids
    external: list[str] = field(default_factory=list)  # referenced ids outside the project
    failure: str = ""  # non-empty: publish, then exit 1 (cook.fail_on_missing found missing refs)
    # id in `missing` or `never_cook_refs` → its reason by parts (the chain as ids, for people)
    findings: dict[str, Finding] = field(default_factory=dict)

    def to_json(self) -> dict:
        """The `orchestrate cooklist --format json` document."""
        return {
            "cooked": list(self.cooked),
            "missing": dict(self.missing),
            "ambiguous": dict(self.ambiguous),
            "never_cook_refs": dict(self.never_cook_refs),
            "cycles": [list(c) for c in self.cycles],
            "external": list(self.external),
            "roots": {k: list(v) for k, v in self.roots.items()},
            "chains": {k: list(v) for k, v in self.chains.items()},
            "failure": self.failure,
        }
