"""The index of a Messiah project, typed exactly as the rule language's predefined sets expect.

2.0 names live on `res_store`, 1.x names on `res_filter` (see spec/asset-project.md). The index is
built once by the Messiah source and is read-only afterwards (it is put in Ray's object store once
and shared by every rule unit).

The spec's sets hold absolute paths, so as the build stores it the index holds project-relative
ones (`root` is ""): a value, and entries keying the rule units that read them, that do not
depend on where the checkout lies, so that a checkout at another path finds the units another
agent ran. `at(root)` is the same index with the absolute paths rule code sees (the rules' index
view, stages/rules/functions.py, makes it when rule code first reads a path).

Between stages it travels as a keyed value (`entries`): one entry per GUID of each set keyed by
GUID (`repo/<GUID>`, `disk/<GUID>`), one per virtual path (`virt/<Package/Name>`), the used levels
and the root; so a repository edit changes the entries of the Items it touched, and a rule unit
depends on the entries it looked up (stages/rules/traced.py).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from types import SimpleNamespace
from typing import Any, NamedTuple

from orchestrator import digest_value, paused_gc, record, to_posix
from stages.rules.keyed_index import ILEVELS, PREFIXES, ROOT, rooted_paths
from stages.rules.lazy import MADE, MAKING, LazyNamespace
from stages.rules.traced import all_res_form, all_res_guid_form


@record
class MessiahResource(NamedTuple):
    """One Item of a resource.repository."""

    GUID: str
    Package: str
    Name: str
    Type: str
    Deps: tuple[str, ...]
    Repository: str  # the repository's name (its folder name)
    VirtualPath: str  # Package/Name
    RepositoryFullPath: str  # path of the resource.repository file (absolute once rooted)


@record
class ResourceFile(NamedTuple):
    """One resource folder found on disk."""

    GUID: str
    Repository: str
    Type: str
    Resource: str  # path of the attribute file (absolute once rooted; so are the three below)
    Data: str | None
    HDR: str | None
    Source: str | None


class IndexNamespaces(NamedTuple):
    """The index as rules' code sees it: `res_store`, and the sets of `res_filter` (ArtEase's
    1.x names; the rules add its functions)."""

    res_store: SimpleNamespace
    sets: SimpleNamespace


@record
@dataclass
class MessiahIndex:
    """The predefined sets. Tuples are in the orders the spec fixes (sorted repository/folder paths)."""

    root: (
        str  # "" as stored (paths project-relative); the absolute root, `/`-separated, once rooted
    )
    res_in_repo: dict[str, tuple[MessiahResource, ...]] = field(default_factory=dict)
    res_in_disk: dict[str, tuple[ResourceFile, ...]] = field(default_factory=dict)
    res_virt_info: dict[str, tuple[MessiahResource, ...]] = field(default_factory=dict)
    ilevels: frozenset[str] = frozenset()
    # The digest the builder derived from what the index is made of ("" when it has none): rule
    # planning asks for the digest on every run, and hashing 100,000 entries costs seconds.
    known_digest: str = field(default="", compare=False, repr=False)

    # -- the keyed form --------------------------------------------------------------------------
    def entries(self) -> dict[str, Any]:
        """The index as a keyed value's entries (the module's docstring)."""
        found: dict[str, Any] = {ROOT: self.root, ILEVELS: tuple(sorted(self.ilevels))}
        for attribute, prefix in PREFIXES.items():
            for key, members in getattr(self, attribute).items():
                found[prefix + key] = members
        return found

    @classmethod
    def from_entries(cls, entries: Iterable[tuple[str, Any]]) -> MessiahIndex:
        """The index a keyed value's entries describe (each set in key order)."""
        sets: dict[str, dict[str, Any]] = {attribute: {} for attribute in PREFIXES}
        by_prefix = {prefix: sets[attribute] for attribute, prefix in PREFIXES.items()}
        root, ilevels = "", frozenset[str]()
        with paused_gc():
            for key, value in entries:
                head, _, rest = key.partition("/")
                target = by_prefix.get(head + "/")
                if target is not None:
                    target[rest] = value
                elif key == ROOT:
                    root = value
                elif key == ILEVELS:
                    ilevels = frozenset(value)
        return cls(
            root,
            res_in_repo=sets["res_in_repo"],
            res_in_disk=sets["res_in_disk"],
            res_virt_info=sets["res_virt_info"],
            ilevels=ilevels,
        )

    @classmethod
    def from_encoded(
        cls, encoded: Iterable[tuple[str, bytes]], decode: Callable[[bytes], Any]
    ) -> MessiahIndex:
        """What `from_entries` makes of the entries given as their stored bytes (a keyed
        value's `encoded_items`), each set decoded by `decode` when first read: most readers
        read one or two of the three (a custom-code worker running the cycle rule reads
        res_in_repo alone), and decoding all of them costs 2 to 3 s at 100,000 resources."""
        pending: dict[str, list[tuple[str, bytes]]] = {prefix: [] for prefix in PREFIXES.values()}
        root, ilevels = "", frozenset[str]()
        for key, data in encoded:
            head, _, rest = key.partition("/")
            target = pending.get(head + "/")
            if target is not None:
                target.append((rest, data))
            elif key == ROOT:
                root = decode(data)
            elif key == ILEVELS:
                ilevels = frozenset(decode(data))
        index = cls(root, ilevels=ilevels)
        index._made_on_read(
            {attribute: _decoder(pending[prefix], decode) for attribute, prefix in PREFIXES.items()}
        )
        return index

    # -- sets made when first read ---------------------------------------------------------
    def _made_on_read(self, made: dict[str, Callable[[], dict[str, tuple]]]) -> None:
        """The sets in `made` are made by their function when first read (`__getattr__`)."""
        for attribute in made:
            self.__dict__.pop(attribute, None)
        self.__dict__[MADE] = made

    def __getattr__(self, name: str) -> Any:
        # Called only for an attribute the instance lacks: a set still to be made.
        made = self.__dict__.get(MADE)
        if made is None or (name not in made and name not in self.__dict__):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        with MAKING:
            if name in made:  # not made by another thread meanwhile
                self.__dict__[name] = made[name]()
                del made[name]  # what made it (and the index it read) is not kept
        return self.__dict__[name]

    # -- 1.x views ----------------------------------------------------------------------------
    def all_res(self) -> dict[str, list[tuple]]:
        """`res_filter.ALL_RES`: GUID → list of (Package, Name, Type, Deps list, repository path)."""
        return {guid: all_res_form(items) for guid, items in self.res_in_repo.items()}

    def all_res_guid(self) -> dict[str, list[dict]]:
        """`res_filter.ALL_RES_GUID`: GUID → list of {Resource, Data, HDR, Source}."""
        return {guid: all_res_guid_form(files) for guid, files in self.res_in_disk.items()}

    def namespaces(self) -> IndexNamespaces:
        """The objects rules import (`import res_store`), and res_filter's sets."""
        with paused_gc():
            return self._namespaces()

    def _namespaces(self) -> IndexNamespaces:
        # Each set made when rule code first reads it (rules/lazy.py).
        res_store = LazyNamespace(
            {attribute: partial(getattr, self, attribute) for attribute in PREFIXES},
            ilevels=set(self.ilevels),
        )
        all_used = set(self.ilevels)
        res_filter = LazyNamespace(
            {"ALL_RES": self.all_res, "ALL_RES_GUID": self.all_res_guid},
            ALL_USED_FILTER=all_used,
            ALL_USED_ILEVEL=set(all_used),
        )
        return IndexNamespaces(res_store, res_filter)

    def digest(self) -> str:
        """A digest of the whole index (rule units that use a predefined set key on it): the one
        the builder derived, else one of the content."""
        if not self.known_digest:
            self.known_digest = self.content_digest()
        return self.known_digest

    # -- patching (a resident build) --------------------------------------------------------
    def patched(self, changed: Mapping[str, Any], removed: Iterable[str]) -> MessiahIndex:
        """What `from_entries` makes of this index's entries with `changed` set and `removed`
        gone (keys of the keyed value), made from copies of its sets rather than entry by
        entry: a resident build's index after an edit of a few Items. Each set stays in key
        order. When this index's rooted form (`at`) was made, the new one's is patched from it
        the same way, rooting only the entries that changed."""
        updates: dict[str, dict[str, Any]] = {attribute: {} for attribute in PREFIXES}
        gone: dict[str, set[str]] = {attribute: set() for attribute in PREFIXES}
        attribute_of = {prefix: attribute for attribute, prefix in PREFIXES.items()}
        root, ilevels = self.root, self.ilevels
        for key in removed:
            head, _, rest = key.partition("/")
            if head + "/" in attribute_of:
                gone[attribute_of[head + "/"]].add(rest)
            elif key == ROOT:
                root = ""
            elif key == ILEVELS:
                ilevels = frozenset()
        for key, value in changed.items():
            head, _, rest = key.partition("/")
            if head + "/" in attribute_of:
                updates[attribute_of[head + "/"]][rest] = value
            elif key == ROOT:
                root = value
            elif key == ILEVELS:
                ilevels = frozenset(value)

        def patched_set(attribute: str) -> dict[str, tuple]:
            return _patched_set(getattr(self, attribute), updates[attribute], gone[attribute])

        new = MessiahIndex(
            root,
            res_in_repo=patched_set("res_in_repo"),
            res_in_disk=patched_set("res_in_disk"),
            res_virt_info=patched_set("res_virt_info"),
            ilevels=ilevels,
        )
        kept = self.__dict__.get("_rooted")
        if kept is not None:
            touched = {
                attribute: set(updates[attribute]) | gone[attribute] for attribute in PREFIXES
            }
            new.__dict__["_rooted_base"] = (*kept, touched)
        return new

    def __getstate__(self) -> dict[str, Any]:
        """What pickles (a Ray worker's copy): the fields (sets not read yet made now), not
        the rooted forms kept beside."""
        for attribute in PREFIXES:
            getattr(self, attribute)
        return {name: value for name, value in self.__dict__.items() if not name.startswith("_")}

    def at(self, root: str) -> MessiahIndex:
        """The index with absolute paths under `root`, as the spec's sets hold them (an index
        made with absolute paths is itself); it keeps the stored index's digest. Made once per
        root and kept: a patched index's is patched from its base's (`patched`)."""
        if self.root:
            return self
        root = to_posix(root).rstrip("/")
        kept = self.__dict__.get("_rooted")
        if kept is not None and kept[0] == root:
            return kept[1]
        base = self.__dict__.pop("_rooted_base", None)
        patched_from = base[1:] if base is not None and base[0] == root else (None, None)
        with paused_gc():
            rooted = self._rerooted(_Rooting(root), *patched_from)
        self.__dict__["_rooted"] = (root, rooted)
        return rooted

    def _rerooted(
        self, rooting: _Rooting, base: MessiahIndex | None, touched: dict[str, set[str]] | None
    ) -> MessiahIndex:
        """This index rooted by `rooting`; with `base` (the rooted form of the index this one
        was patched from) and the keys each set `touched`, only those entries are rooted."""

        def rooted(attribute: str, make) -> Callable[[], dict[str, tuple]]:
            # The base's rooted set, when it was made (read); else this set is rooted whole,
            # and the thunk holds no base: a set no build reads would otherwise keep every
            # earlier index of a resident session alive, each rooted form holding the last.
            theirs = base.__dict__.get(attribute) if base is not None else None
            keys = touched[attribute] if touched is not None else set()

            def made() -> dict[str, tuple]:
                mine: dict[str, tuple] = getattr(self, attribute)
                if theirs is None:
                    with paused_gc():
                        return {key: tuple(map(make, members)) for key, members in mine.items()}
                if not keys:  # the set is the base's own (_patched_set): so is its rooted form
                    return theirs
                return {
                    key: tuple(map(make, members)) if key in keys else theirs[key]
                    for key, members in mine.items()
                }

            return made

        new = MessiahIndex(
            root=rooting.root or "/",
            ilevels=rooted_paths(self.root, self.ilevels, rooting.root),
            known_digest=self.known_digest,
        )
        # Each set rooted when first read, as this index's own are decoded (`from_encoded`).
        new._made_on_read(
            {
                "res_in_repo": rooted("res_in_repo", rooting.resource),
                "res_in_disk": rooted("res_in_disk", rooting.folder),
                "res_virt_info": rooted("res_virt_info", rooting.resource),
            }
        )
        if not self.known_digest:  # the stored index's digest, computed only if asked for
            new.__dict__["_digest_of"] = weakref.ref(self)
        return new

    def content_digest(self) -> str:
        """A digest of what the index holds; a rooted index's is its stored form's while that
        lives (rooting left the digest to be computed when asked: seconds at 100,000)."""
        stored = self.__dict__.get("_digest_of")
        found = stored() if stored is not None else None
        if found is not None:  # a rooted index: its stored form's digest
            return found.digest()
        return self._own_digest()

    def _own_digest(self) -> str:
        return digest_value(
            {
                "repo": sorted((g, [list(r) for r in rs]) for g, rs in self.res_in_repo.items()),
                "disk": sorted((g, [list(f) for f in fs]) for g, fs in self.res_in_disk.items()),
                "ilevels": sorted(self.ilevels),
            }
        )


def _decoder(
    pending: list[tuple[str, bytes]], decode: Callable[[bytes], Any]
) -> Callable[[], dict[str, tuple]]:
    """What decodes one set of `from_encoded` (its entries' bytes, in key order) when read."""

    def made() -> dict[str, tuple]:
        with paused_gc():
            return {key: decode(data) for key, data in pending}

    return made


def _patched_set(
    old: dict[str, tuple], changed: dict[str, tuple], removed: set[str]
) -> dict[str, tuple]:
    """One set of an index with entries changed and removed, in key order: the same dict when
    nothing in it moved (an index is read-only once built), else a copy; sorted again only
    when a key is new (a changed one keeps its place)."""
    if not changed and not removed:
        return old
    new = dict(old)
    for key in removed:
        new.pop(key, None)
    added = any(key not in new for key in changed)
    new.update(changed)
    return dict(sorted(new.items())) if added else new


class RootedMembers:
    """The members of one GUID's or virtual path's entry of a keyed index, with the absolute
    paths `MessiahIndex.at(root)` gives them, made entry by entry: a unit that looks a few
    GUIDs up need not decode and root the whole index (seconds at 100,000 resources)."""

    def __init__(self, stored_root: str, root: str) -> None:
        # An index made with absolute paths is itself wherever it is read (MessiahIndex.at).
        self._rooting = None if stored_root else _Rooting(to_posix(root).rstrip("/"))

    def rooted(self, attribute: str, members: tuple) -> tuple:
        """`members` of the set `attribute` (res_in_repo, res_in_disk, res_virt_info) rooted."""
        rooting = self._rooting
        if rooting is None:
            return members
        make = rooting.folder if attribute == "res_in_disk" else rooting.resource
        return tuple(map(make, members))


class _Rooting:
    """Making an index's records absolute under a root: a repository's path made once and
    shared by its resources, and a resource shared by res_in_repo and res_virt_info."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.prefix = f"{root}/"
        self._paths: dict[str, str] = {}
        self._resources: dict[int, MessiahResource] = {}

    def absolute(self, path: str) -> str:
        found = self._paths.get(path)
        if found is None:
            found = self._paths[path] = self.prefix + path
        return found

    def resource(self, item: MessiahResource) -> MessiahResource:
        found = self._resources.get(id(item))
        if found is None:
            found = self._resources[id(item)] = tuple.__new__(
                MessiahResource, (*item[:7], self.absolute(item.RepositoryFullPath))
            )
        return found

    def folder(self, entry: ResourceFile) -> ResourceFile:
        prefix = self.prefix
        return tuple.__new__(
            ResourceFile,
            (
                *entry[:3],
                prefix + entry.Resource,
                *(None if path is None else prefix + path for path in entry[4:]),
            ),
        )
