"""The predefined sets and functions of the rule language, over a project's index.

Rules name them `artfunc_res_store.res_in_disk`, `artfunc_res_filter.guidToResourcePath`, …
(spec/rules.md "Predefined sets and functions"; the sets themselves are defined in
spec/asset-project.md and built by the Messiah source as a `MessiahIndex`).

Everything a unit needs at run time comes through an `EvalContext`: the index view (built once
per process and index), the project root, and file reads that go through the unit's recording
`Reader`, so files a function reads enter the unit's cache key.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, NamedTuple

from lxml import etree

from orchestrator import Keyed, Reader

from .keyed_index import ILEVELS, PREFIXES, ROOT, IndexEdit, rooted_paths
from .lazy import extended, offers
from .paths import DocumentError, node_text, parse_xml

GUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def is_guid(value: Any) -> bool:
    return isinstance(value, str) and GUID_RE.fullmatch(value) is not None


class PredefinedSet(NamedTuple):
    attribute: str  # the MessiahIndex attribute whose keys or members answer `d in S`
    of_paths: bool  # a set of file paths (an rpath may select by it)


# The 1.x dicts (ALL_RES, ALL_RES_GUID) have exactly the keys of their 2.0 counterparts, so
# membership is answered without building the 1.x views.
PREDEFINED_SETS: dict[str, PredefinedSet] = {
    "res_store.res_in_repo": PredefinedSet("res_in_repo", False),
    "res_store.res_in_disk": PredefinedSet("res_in_disk", False),
    "res_store.res_virt_info": PredefinedSet("res_virt_info", False),
    "res_store.ilevels": PredefinedSet("ilevels", True),
    "res_filter.ALL_RES": PredefinedSet("res_in_repo", False),
    "res_filter.ALL_RES_GUID": PredefinedSet("res_in_disk", False),
    "res_filter.ALL_USED_FILTER": PredefinedSet("ilevels", True),
    "res_filter.ALL_USED_ILEVEL": PredefinedSet("ilevels", True),
}


class RuleModules(NamedTuple):
    """The objects `import res_store` and `import res_filter` give a rule's code."""

    res_store: Any
    res_filter: Any


INDEX_MODULES = ("res_store", "res_filter")
#: A predefined set of paths (its index attribute) → the entry of the keyed index holding it.
PATH_ENTRIES = {"ilevels": ILEVELS}


class StoredIndex:
    """An index the build state holds, decoded the first time a rule reads it. Loading rules
    and planning units need only its digest and whether it offers the predefined sets: an
    edit whose rules read no index never decodes one (a second at 100,000 resources)."""

    def __init__(
        self,
        load: Callable[[], Any],
        digest: str,
        available: bool,
        keyed: bool | None = None,
        entries: Keyed | None = None,
        edit: IndexEdit | None = None,
        rooting: Callable[[str, str], Any] | None = None,
    ) -> None:
        self._load = load
        self._digest = digest
        self.available = available
        # Stored by entry (sources.base.index_entries): an index offering the sets always is.
        self.keyed = available if keyed is None else keyed
        # The keyed value it is decoded from (an orchestrator.Keyed), when it is stored by entry:
        # a custom-code worker holding an earlier index is sent only the entries that differ.
        self.entries = entries
        # How its entries differ from the index named edit.base (the one the stage last ran
        # with): a process holding that one reads only the digests of the entries it names.
        self.edit = edit
        # (stored root, root) → what roots one entry's members (sources.base.member_rooting):
        # given, a unit's lookups by GUID read their entries, not the index decoded whole
        self.rooting = rooting
        self._index: Any = None

    def digest(self) -> str:
        return self._digest

    @property
    def loaded(self) -> bool:
        return self._index is not None

    def get(self) -> Any:
        if self._index is None:
            self._index = self._load()
        return self._index

    def looks_up(self) -> bool:
        """Whether a set keyed by GUID or virtual path is read entry by entry (EntryMembers)
        rather than from the index decoded whole."""
        return (
            self._index is None
            and self.rooting is not None
            and self.entries is not None
            and ROOT in self.entries
        )

    def path_set(self, attribute: str, root: str) -> frozenset[str] | None:
        """A predefined set of file paths (`ilevels`, the used levels) as the index rooted at
        `root` holds it, made from the one entry that holds it rather than from the index
        decoded whole (which planning the rules of a few files added or removed would
        otherwise pay for: 2.5 s at 100,000 resources); None when the index is not stored by
        entry or is decoded already (it answers then)."""
        entry = PATH_ENTRIES.get(attribute)
        if self.entries is None or self._index is not None or entry is None:
            return None
        if ROOT not in self.entries or entry not in self.entries:
            return None
        return rooted_paths(self.entries[ROOT], self.entries[entry], root)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # not the index's: copy and pickle probe these first
            raise AttributeError(name)
        return getattr(self.get(), name)

    def __reduce__(self) -> tuple:
        """A worker gets the index itself (it has no build state to read it from)."""
        return (_same, (self.get(),))


def _same(value: Any) -> Any:
    return value


def index_is_available(index: Any) -> bool:
    """Whether `index` offers the predefined sets (a MessiahIndex or anything shaped like one)."""
    if isinstance(index, StoredIndex):
        return index.available
    return all(
        offers(index, name)  # a set is not decoded to be found there (rules/lazy.py)
        for name in ("res_in_repo", "res_in_disk", "res_virt_info", "ilevels", "namespaces")
    )


class IndexView:
    """Read-only views of one index, built lazily and shared by every rule in a process. A
    unit reads it through a `traced.TracedView`, which records what it looks up.

    `stored` is the index as the build keeps it: a Messiah index holds project-relative paths
    there (so that it is the same value wherever the checkout lies); `index` is the same with
    the absolute paths of the spec's sets under `root`, made the first time rule code reads a
    path (sets keyed by GUID answer `d in S` from the stored index)."""

    def __init__(self, index: Any, root: str, key: str = "") -> None:
        self.key = key  # identifies the index in per-process caches (custom code namespaces)
        self.stored = index
        self.root = root
        self.available = index_is_available(index)
        # Stored by entry (collect's `index`: sources/base.py index_entries): lookups by GUID
        # and virtual path are entry reads; else any read of it is a read of all of it.
        self.keyed = self.available and (
            index.keyed
            if isinstance(index, StoredIndex)
            else callable(getattr(index, "entries", None))
        )
        self._index: Any = None
        self._path_sets: dict[str, frozenset[str]] = {}  # sets of paths read from their entry
        self._namespaces: RuleModules | None = None
        self._by_resource_path: dict[str, Any] | None = None
        self._members: dict[str, EntryMembers] = {}

    @property
    def index(self) -> Any:
        """The index as rule code sees it: its paths absolute."""
        if self._index is None:
            at = getattr(self.stored, "at", None) if self.available else None
            self._index = self.stored if at is None else at(self.root)
        return self._index

    def members(self, attribute: str) -> Mapping:
        """A set keyed by GUID or virtual path (`res_in_repo`, `res_in_disk`, `res_virt_info`)
        with its paths absolute: read entry by entry while the index is stored by entry and not
        decoded (EntryMembers), else the decoded index's."""
        found = self._entry_members(attribute)
        return found if found is not None else getattr(self.index, attribute)

    def _entry_members(self, attribute: str) -> EntryMembers | None:
        found = self._members.get(attribute)
        if found is None:
            stored = self.stored
            if self._index is None and isinstance(stored, StoredIndex) and stored.looks_up():
                found = self._members[attribute] = EntryMembers(self, stored, attribute)
        return found

    @staticmethod
    def attribute_of(set_name: str) -> str:
        """The index attribute a predefined set is (`res_filter.ALL_RES` → `res_in_repo`)."""
        return PREDEFINED_SETS[set_name][0]

    def container(self, set_name: str):
        """The dict or set answering `d in S` for a predefined set (empty without an index)."""
        predefined = PREDEFINED_SETS[set_name]
        if not self.available:
            return frozenset()
        if predefined.of_paths:
            found = self._path_sets.get(predefined.attribute)
            if found is None and self._index is None and isinstance(self.stored, StoredIndex):
                found = self.stored.path_set(predefined.attribute, self.root)
                if found is not None:
                    self._path_sets[predefined.attribute] = found
            if found is not None:
                return found
            return getattr(self.index, predefined.attribute)
        # `d in S` needs no paths: the stored index answers it unrooted, when decoded
        members = self._entry_members(predefined.attribute)
        return members if members is not None else getattr(self.stored, predefined.attribute)

    def namespaces(self) -> RuleModules:
        """res_store, the 2.0 sets; res_filter, the 1.x sets with the four predefined functions,
        as ArtEase's custom code calls them (`res_filter.guidToRealPath(data=..., filepath=...)`)."""
        if self._namespaces is None:
            if self.available:
                found = self.index.namespaces()
                res_store, sets = found.res_store, found.sets
            else:
                res_store = SimpleNamespace(
                    res_in_repo={}, res_in_disk={}, res_virt_info={}, ilevels=set()
                )
                sets = SimpleNamespace(
                    ALL_RES={}, ALL_RES_GUID={}, ALL_USED_FILTER=set(), ALL_USED_ILEVEL=set()
                )
            res_filter = extended(sets, **functions_for_custom_code(self))
            self._namespaces = RuleModules(res_store, res_filter)
        return self._namespaces

    def resource_files(self, guid: Any) -> tuple:
        if not self.available or not isinstance(guid, str):
            return ()
        return self.members("res_in_disk").get(guid, ())

    def resource_file_at(self, path: str):
        """The ResourceFile whose attribute file is `path` (absolute), or None."""
        if self._by_resource_path is None:
            self._by_resource_path = {}
            if self.available:
                for files in self.index.res_in_disk.values():
                    for entry in files:
                        self._by_resource_path.setdefault(entry.Resource, entry)
        return self._by_resource_path.get(path)


#: Entries a set reads one by one before it decodes the index whole: a cold build looks every
#: GUID up, and a query each (about 20 µs) for all of them costs more than decoding the index
#: once (2 to 3 s at 100,000 resources).
LOOKUPS_MAX = 2_000


class EntryMembers(Mapping):
    """One set of an index stored by entry, its members read from their entries when looked up
    and rooted as the decoded index roots them (`MessiahIndex.at`): after an edit of one Item,
    the few GUIDs a rule unit looks up cost a few queries, not the index decoded whole (2 to 3 s
    at 100,000 resources). Reading it whole (iterating it, its size), or looking up more than
    LOOKUPS_MAX keys, decodes the index, and the set answers from it from then on."""

    def __init__(self, view: IndexView, stored: StoredIndex, attribute: str) -> None:
        self._view = view
        self._attribute = attribute
        self._prefix = PREFIXES[attribute]
        self._entries = stored.entries
        self._rooted = stored.rooting(stored.entries[ROOT], view.root)  # type: ignore[index,misc]
        self._found: dict[str, Any] = {}  # key → its members, or _ABSENT
        self._whole: Mapping | None = None

    def _decoded(self) -> Mapping:
        if self._whole is None:
            self._whole = getattr(self._view.index, self._attribute)
            self._found.clear()
        return self._whole

    def _lookup(self, key: Any) -> Any:
        """The key's members, or _ABSENT."""
        if self._whole is not None:
            return self._whole.get(key, _ABSENT)
        if not isinstance(key, str):
            return _ABSENT
        found = self._found.get(key)
        if found is None:
            if len(self._found) >= LOOKUPS_MAX:  # a key looked up already is answered still
                return self._decoded().get(key, _ABSENT)
            try:
                members = self._entries[self._prefix + key]  # type: ignore[index]
            except KeyError:
                found = _ABSENT
            else:
                found = self._rooted.rooted(self._attribute, members)
            self._found[key] = found
        return found

    def __getitem__(self, key: Any) -> Any:
        found = self._lookup(key)
        if found is _ABSENT:
            raise KeyError(key)
        return found

    def __contains__(self, key: object) -> bool:
        return self._lookup(key) is not _ABSENT

    def __iter__(self) -> Iterator[str]:
        return iter(self._decoded())

    def __len__(self) -> int:
        return len(self._decoded())


_ABSENT = object()

_VIEWS: dict[str, IndexView] = {}


def forget_views() -> None:
    """Drop the process's views, as a new process starts without them."""
    _VIEWS.clear()


def view_key(index_digest: str, root: str) -> str:
    """What names the view of an index (by its digest or token) under a root in a process."""
    return f"{index_digest}:{root}"


def index_view(index: Any, index_digest: str, root: str) -> IndexView:
    """The process-wide view of an index (the last few kept; workers see one index per build)."""
    key = view_key(index_digest, root)
    view = _VIEWS.get(key)
    if view is None:
        if len(_VIEWS) >= 2:
            _VIEWS.pop(next(iter(_VIEWS)))
        view = _VIEWS[key] = IndexView(index, root, key)
    return view


@dataclass
class EvalContext:
    """What functions and checks may use while checking one unit."""

    root: str  # absolute project root, `/`
    view: Any  # the IndexView; in a unit, its traced.TracedView
    reader: Any  # orchestrator.files.reads.Reader (records every read)
    timeout: float = 0.0

    def relpath(self, path: str) -> str | None:
        """Project-relative form of an absolute or root-relative path; None outside the root."""
        path = path.replace("\\", "/")
        if not path.startswith("/") and not re.match(r"[A-Za-z]:/", path):
            path = f"{self.root}/{path}"
        path = posixpath.normpath(path)
        prefix = self.root.rstrip("/") + "/"
        if not path.startswith(prefix):
            return None
        return path[len(prefix) :] or None

    def abspath(self, relpath: str) -> str:
        return f"{self.root}/{relpath}"

    def read(self, path: str) -> bytes | None:
        """Bytes of a project file named absolutely or relative to the root (traced), else None."""
        relpath = self.relpath(path)
        if relpath is None:
            return None
        try:
            return self.reader.read_bytes(relpath)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None


# -- built-in filter functions -------------------------------------------------------------------
# Each takes (values, lines, ctx) and returns (values, lines); a function that transforms values
# has no lines to give (None), one that only keeps values keeps their lines.


def guid_to_resource_path(values: list, lines: list, ctx: EvalContext) -> tuple[list, list]:
    """Each GUID → the absolute paths of its attribute files, in order; unknown GUIDs dropped."""
    out = [entry.Resource for value in values for entry in ctx.view.resource_files(value)]
    return out, [None] * len(out)


def resources_in_ilevel(values: list, lines: list, ctx: EvalContext) -> tuple[list, list]:
    """Each .ilevel path → every GUID-shaped element text in it (document order, repeats kept)."""
    out: list[str] = []
    for value in values:
        if not isinstance(value, str):
            continue
        data = ctx.read(value)
        if data is None:
            continue
        try:
            root = parse_xml(data)
        except DocumentError:
            continue
        for element in root.iter(etree.Element):
            text = node_text(element)
            if GUID_RE.fullmatch(text):
                out.append(text)
    return out, [None] * len(out)


def valid_guid(values: list, lines: list, ctx: EvalContext) -> tuple[list, list]:
    """Keep the GUID-shaped strings."""
    keep = [i for i, value in enumerate(values) if is_guid(value)]
    return [values[i] for i in keep], [lines[i] for i in keep]


class PredefinedFunction(NamedTuple):
    function: Callable  # (values, lines, ctx) → (values, lines)
    needs_index: bool


PREDEFINED_FUNCTIONS: dict[str, PredefinedFunction] = {
    "res_filter.guidToRealPath": PredefinedFunction(guid_to_resource_path, True),
    "res_filter.guidToResourcePath": PredefinedFunction(guid_to_resource_path, True),
    "res_filter.getResourcesInILevel": PredefinedFunction(resources_in_ilevel, False),
    "res_filter.validGUID": PredefinedFunction(valid_guid, False),
}
#: The functions whose values are absolute paths (where the checkout lies shows in them).
PATH_FUNCTIONS = frozenset({"res_filter.guidToRealPath", "res_filter.guidToResourcePath"})


# -- the same functions for custom code ----------------------------------------------------------
# Custom code (func_str, 满足表达式) calls them as ArtEase does: `f(data=[...], filepath=F)`,
# returning the new list. The namespaces holding them live as long as the process, while the
# files they read must enter the cache key of the unit being checked: the engine names that
# unit's reader for the duration of the check (`reading_for`).

_UNIT_READER: ContextVar[Any] = ContextVar("orchestrate_rule_unit_reader", default=None)


@contextmanager
def reading_for(reader: Any) -> Iterator[None]:
    """Route reads of the predefined functions that custom code calls through `reader`."""
    token = _UNIT_READER.set(reader)
    try:
        yield
    finally:
        _UNIT_READER.reset(token)


def record_reads(reads: dict[str, str | None]) -> None:
    """Files a custom-code worker read through these functions for the unit being checked:
    they enter that unit's trace as if its reader had read them."""
    reader = _UNIT_READER.get()
    if reader is not None and reads:
        reader.reads.update(reads)


def functions_for_custom_code(view: Any) -> dict[str, Callable]:
    """`res_filter.<name>` → the predefined function as custom code calls it."""
    found = {}
    for qualified, predefined in PREDEFINED_FUNCTIONS.items():
        name = qualified.partition(".")[2]
        found[name] = _for_custom_code(predefined.function, view, name)
    return found


def _for_custom_code(function: Callable, view: Any, name: str) -> Callable:
    def call(data: Any = (), filepath: Any = None, **_others: Any) -> list:
        # `filepath` and any other keyword are accepted and unused, as ArtEase's **pdict
        values = [data] if isinstance(data, (str, bytes)) else list(data or ())
        # Outside a unit (func_str's top level runs when the rules load) files come from disk.
        reader = _UNIT_READER.get() or Reader(view.root)
        out, _ = function(values, [None] * len(values), EvalContext(view.root, view, reader))
        return out

    call.__name__ = call.__qualname__ = name
    call.__doc__ = function.__doc__
    return call
