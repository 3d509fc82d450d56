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

from collections.abc import Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, NamedTuple

from orchestrator import digest_value, paused_gc, record, to_posix
from stages.rules.traced import ILEVELS, PREFIXES, ROOT, all_res_form, all_res_guid_form


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
        res_store = SimpleNamespace(
            res_in_repo=self.res_in_repo,
            res_in_disk=self.res_in_disk,
            res_virt_info=self.res_virt_info,
            ilevels=set(self.ilevels),
        )
        all_used = set(self.ilevels)
        res_filter = SimpleNamespace(
            ALL_RES=self.all_res(),
            ALL_RES_GUID=self.all_res_guid(),
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

    def at(self, root: str) -> MessiahIndex:
        """The index with absolute paths under `root`, as the spec's sets hold them (an index
        made with absolute paths is itself); it keeps the stored index's digest."""
        if self.root:
            return self
        with paused_gc():
            return self._at(to_posix(root).rstrip("/"))

    def _at(self, root: str) -> MessiahIndex:
        prefix = f"{root}/"
        paths: dict[str, str] = {}  # a repository's path, made once: shared by its resources

        def absolute(path: str) -> str:
            found = paths.get(path)
            if found is None:
                found = paths[path] = prefix + path
            return found

        new = tuple.__new__
        rooted: dict[int, MessiahResource] = {}  # res_in_repo and res_virt_info share them

        def resource(item: MessiahResource) -> MessiahResource:
            found = rooted.get(id(item))
            if found is None:
                found = rooted[id(item)] = new(
                    MessiahResource, (*item[:7], absolute(item.RepositoryFullPath))
                )
            return found

        def folder(entry: ResourceFile) -> ResourceFile:
            head, tail = entry[:4], entry[4:]
            return new(
                ResourceFile,
                (
                    *head[:3],
                    prefix + entry.Resource,
                    *(None if path is None else prefix + path for path in tail),
                ),
            )

        return MessiahIndex(
            root=root or "/",
            res_in_repo={g: tuple(map(resource, rs)) for g, rs in self.res_in_repo.items()},
            res_in_disk={g: tuple(map(folder, fs)) for g, fs in self.res_in_disk.items()},
            res_virt_info={v: tuple(map(resource, rs)) for v, rs in self.res_virt_info.items()},
            ilevels=frozenset(prefix + path for path in self.ilevels),
            known_digest=self.digest(),
        )

    def content_digest(self) -> str:
        return digest_value(
            {
                "repo": sorted((g, [list(r) for r in rs]) for g, rs in self.res_in_repo.items()),
                "disk": sorted((g, [list(f) for f in fs]) for g, fs in self.res_in_disk.items()),
                "ilevels": sorted(self.ilevels),
            }
        )
