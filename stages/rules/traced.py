"""The project index as one rule unit sees it: every lookup enters the unit's trace.

The index reaches `validate` as the keyed value `index` (collect's output: one entry per GUID of
`res_in_repo` and `res_in_disk`, one per virtual path of `res_virt_info`, the used levels, the
root; stages/sources/messiah/index.py). A unit that looks up `d in res_store.res_in_disk`,
`res_filter.ALL_RES[d]` or a resource's files records that entry read (found or missing) with
`reader.entry`, so it runs again only when an entry it looked up changes, appears or goes, and
not when another Item of the project is renamed. What cannot say which entries it reads records
the whole index (`reader.whole`): iterating a set, custom code (func_str runs in worker processes
that hold the index whole: docs/build-file.md, "Rule code"), a check that reads the index
object itself (the Unity and Cocos checks), and every read of an index its source does not key.

`TracedView` wraps the process-wide `IndexView` (functions.py) for one unit and its reader;
`TracedEntries` is one predefined set as expressions and conditions see it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from .keyed_index import ILEVELS, PREFIXES

if TYPE_CHECKING:
    from .functions import RuleModules

#: The name of the value the index travels in between stages (collect's output).
INDEX_VALUE = "index"


class _ByEntryKey:
    """One set's members by the key of their entry in the index (`repo/<GUID>` → members)."""

    __slots__ = ("members", "cut")

    def __init__(self, members: Mapping, prefix: str) -> None:
        self.members = members
        self.cut = len(prefix)

    def __getitem__(self, key: str) -> Any:
        return self.members[key[self.cut :]]


class TracedEntries(Mapping):
    """A predefined set keyed by GUID or virtual path: each lookup is an entry read of the unit;
    iterating it reads the index whole. `convert` gives the 1.x form of a member (ALL_RES)."""

    __slots__ = ("_members", "_reader", "_prefix", "_lookup", "_convert", "_converted")

    def __init__(
        self,
        members: Mapping,
        reader: Any,
        prefix: str,
        convert: Callable[[Any], Any] | None = None,
    ) -> None:
        self._members = members
        self._reader = reader
        self._prefix = prefix
        self._lookup = _ByEntryKey(members, prefix)
        self._convert = convert
        self._converted: dict[str, Any] = {}

    def __getitem__(self, key: Any) -> Any:
        if not isinstance(key, str):  # no entry has such a key: nothing to depend on
            raise KeyError(key)
        found = self._reader.entry(INDEX_VALUE, self._prefix + key, self._lookup)
        if found is None:
            raise KeyError(key)
        return self._as_given(key, found)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        return self._reader.entry(INDEX_VALUE, self._prefix + key, self._lookup) is not None

    def get(self, key: Any, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __iter__(self) -> Iterator[str]:
        self._reader.whole(INDEX_VALUE)
        return iter(self._members)

    def __len__(self) -> int:
        self._reader.whole(INDEX_VALUE)
        return len(self._members)

    def keys(self):
        self._reader.whole(INDEX_VALUE)
        return self._members.keys()

    def items(self):
        self._reader.whole(INDEX_VALUE)
        return [(key, self._as_given(key, members)) for key, members in self._members.items()]

    def values(self):
        return [members for _, members in self.items()]

    def _as_given(self, key: str, members: Any) -> Any:
        if self._convert is None:
            return members
        converted = self._converted.get(key)
        if converted is None:
            converted = self._converted[key] = self._convert(members)
        return converted


class TracedView:
    """The index view (functions.IndexView) of one unit: what it reads of the index is traced
    by its reader. `shared` is the process-wide view (custom code's workers are sent its
    index, and key what they hold by its key)."""

    def __init__(self, shared: Any, reader: Any) -> None:
        self.shared = shared
        self.reader = reader
        self.root = shared.root
        self.key = shared.key
        self.available = shared.available
        self.keyed = shared.keyed
        self._namespaces: RuleModules | None = None

    def whole(self) -> None:
        """The unit read (or handed out) the index whole."""
        self.reader.whole(INDEX_VALUE)

    @property
    def index(self) -> Any:
        """The index object itself (a check that reads it may read anything in it)."""
        self.whole()
        return self.shared.index

    def container(self, set_name: str) -> Any:
        """What answers `d in S` for a predefined set, tracing each lookup."""
        attribute = self.shared.attribute_of(set_name)
        members = self.shared.container(set_name)
        if not self.available:
            return members
        if self.keyed and attribute in PREFIXES:
            return TracedEntries(members, self.reader, PREFIXES[attribute])
        if self.keyed and attribute == "ilevels":
            self.reader.entry(INDEX_VALUE, ILEVELS, {ILEVELS: members})
            return members
        self.whole()
        return members

    def resource_files(self, guid: Any) -> tuple:
        if not self.available or not isinstance(guid, str):
            return ()
        if not self.keyed:
            self.whole()
            return self.shared.resource_files(guid)
        prefix = PREFIXES["res_in_disk"]
        members = _ByEntryKey(self.shared.members("res_in_disk"), prefix)
        return self.reader.entry(INDEX_VALUE, prefix + guid, members) or ()

    def resource_file_at(self, path: str) -> Any:
        """The ResourceFile whose attribute file is `path`: it lies in a folder named by its
        GUID, so only that GUID's entry can hold it."""
        if not self.keyed:
            self.whole()
            return self.shared.resource_file_at(path)
        guid = path.rsplit("/", 2)[-2] if path.count("/") >= 1 else ""
        for entry in self.resource_files(guid):
            if entry.Resource == path:
                return entry
        return None

    def namespaces(self) -> RuleModules:
        """res_store and res_filter as expressions see them: the sets traced, the predefined
        functions reading through this unit's view."""
        if self._namespaces is None:
            self._namespaces = self._traced_namespaces()
        return self._namespaces

    def _traced_namespaces(self) -> RuleModules:
        from .functions import RuleModules, functions_for_custom_code  # functions uses this module

        if not self.available or not self.keyed:
            self.whole()  # an index its source does not key: all of it
            return self.shared.namespaces()
        # Each set read entry by entry while it can be (functions.EntryMembers): an expression
        # looking a GUID up does not decode the index whole.
        members, reader = self.shared.members, self.reader
        repo = TracedEntries(members("res_in_repo"), reader, PREFIXES["res_in_repo"])
        disk = TracedEntries(members("res_in_disk"), reader, PREFIXES["res_in_disk"])
        virt = TracedEntries(members("res_virt_info"), reader, PREFIXES["res_virt_info"])
        ilevels = self.container("res_store.ilevels")
        res_store = SimpleNamespace(
            res_in_repo=repo, res_in_disk=disk, res_virt_info=virt, ilevels=set(ilevels)
        )
        all_res = TracedEntries(
            members("res_in_repo"), reader, PREFIXES["res_in_repo"], all_res_form
        )
        all_res_guid = TracedEntries(
            members("res_in_disk"), reader, PREFIXES["res_in_disk"], all_res_guid_form
        )
        res_filter = SimpleNamespace(
            ALL_RES=all_res,
            ALL_RES_GUID=all_res_guid,
            ALL_USED_FILTER=set(ilevels),
            ALL_USED_ILEVEL=set(ilevels),
            **functions_for_custom_code(self),
        )
        return RuleModules(res_store, res_filter)


def all_res_form(resources: tuple) -> list[tuple]:
    """`res_filter.ALL_RES`'s form of a GUID's items: (Package, Name, Type, Deps list, path)."""
    return [(r.Package, r.Name, r.Type, list(r.Deps), r.RepositoryFullPath) for r in resources]


def all_res_guid_form(files: tuple) -> list[dict]:
    """`res_filter.ALL_RES_GUID`'s form of a GUID's resource folders."""
    return [
        {"Resource": f.Resource, "Data": f.Data, "HDR": f.HDR, "Source": f.Source} for f in files
    ]
