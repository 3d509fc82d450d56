"""What a stage author writes against: the declarations, the unit of work, and the services a
stage gets from the engine (as protocols, so a stage can be run and tested without the engine).

A stage is a module with a `SPEC` (`StageSpec`) and three functions — `plan(ctx, inputs)`,
`run(payload, shared, reader)` and `finish(ctx, inputs, results)` — plus optional hooks
(`publish`, `verdict`, `summary`, `problems`); `docs/engine-api.md` is the guide. Everything here is small,
frozen where it can be, and picklable: units and their payloads travel to Ray workers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from .codec import record
from .hashing import fast_pickle

Digest = str
"""Hex BLAKE3 of some bytes (64 characters)."""


@dataclass(frozen=True, slots=True)
class StageSpec:
    """What a stage declares: the graph and the cache key are derived from this."""

    name: str
    version: int
    inputs: tuple[str, ...]  # values consumed (produced by other stages)
    outputs: tuple[str, ...]  # values produced
    config_keys: tuple[str, ...] = ()  # top-level build-file keys read: the stage's slice
    description: str = ""
    keyed: tuple[str, ...] = ()  # outputs that are keyed collections (stored entry by entry)


PROJECT = "project"
"""The input every stage may declare: the project's files. The engine provides it; a stage that
declares it gets the files added, removed and modified since it last ran (`changes`)."""


@record  # the build state keeps the units it may run again (cache/records.py)
@dataclass(frozen=True, slots=True)
class Unit:
    """One unit of work: `run(payload, shared, reader)` is its whole computation.

    `key` is JSON-able key material naming everything the unit depends on besides the files it
    reads through the reader (those are traced) — upstream content digests, options, its own id.
    `files` are the project files it is known to read (preloaded for workers without the project).
    `blobs` are digests of stored results of other stages it reads with `reader.blob(digest)`.
    `cost` is a size estimate used to batch work for remote executors.
    `pinned`: when units run on this machine, it runs in the driver's own process, not in a
    forked helper (executors/forked.py): it uses what the plan prepared in that process.
    """

    id: str
    payload: Any
    key: Any
    files: tuple[str, ...] = ()
    blobs: tuple[str, ...] = ()
    cost: int = 1
    pinned: bool = False


@record
@fast_pickle
@dataclass(frozen=True, slots=True)
class Problem:
    """Something wrong in the project that the build noticed: a broken file, a `.meta` without
    its asset, an item without a GUID. Part of the build's result: a stage keeps the problems it
    found in a value it stores, and returns them from its `problems` hook, so every run lists
    them (run.json, the report, the terminal) until they are fixed, cached runs included."""

    kind: str  # e.g. "broken_repository", "item_without_guid", "orphan_meta", "unreadable"
    file: str  # project-relative ("" when no one file is to blame)
    message: str
    line: int | None = None
    fatal: bool = False  # True: the build cannot go on (exit 2) unless collect.skip_broken


class Parts(NamedTuple):
    """What `run` returns for a unit that does the work of several results at once (a shard of
    assets): each value of `values` is stored as a result of its own, with the digest it would
    have as a unit's whole result, so a consumer reads it alone (`Unit.blobs`) and an edit that
    changes one value changes one digest. The unit's own result is then a `StoredParts`."""

    values: dict[str, Any]


@record
class StoredParts(NamedTuple):
    """The stored result of a unit that returned `Parts`: each part's name → its digest."""

    digests: dict[str, Digest]


@dataclass
class Plan:
    """A stage's units for this run; `shared` is read-only data every unit gets (sent to workers
    once); `state` is what `finish` needs from planning, and what the stage's next `update`
    starts from (stored between runs, so it must be storable: `orchestrator.codec`).

    From `update`, `units` are only the units to run again (new ones, or ones whose declared
    key changed), `removed` the ids of units that no longer exist, and `reasons` may say why a
    unit runs again (for `--explain`: "cooked[…] changed").
    """

    units: list[Unit]
    shared: Any = None
    state: Any = None
    removed: tuple[str, ...] = ()
    reasons: dict[str, str] | None = None
    scratch: Any = None  # what `finish` needs from planning that is not stored (compiled rules)


@dataclass
class StageChanges:
    """What `update` learns: the changes of each input since the stage last ran (keyed inputs
    per key; `project` per file), the units the engine runs again because a file they read
    changed, and the state the last run's plan left."""

    inputs: dict[str, Any]  # input name → keyed.Changes
    rerun: list[Unit]  # stored units the engine re-runs anyway (a file they read changed)
    state: Any
    files_modified: tuple[str, ...] = ()  # project files whose content changed
    stored_ids: Any = None  # () → the ids of every unit the last run left
    # (ids) → {id: Unit} of those the last run left, as it left them (the payload kept when the
    # unit read files): what an update re-plans a unit from
    stored_units: Any = None

    def __post_init__(self) -> None:
        if self.stored_ids is None:
            self.stored_ids = list
        if self.stored_units is None:
            self.stored_units = lambda ids: {}


class FileEntry(NamedTuple):
    """One file of the project tree: project-relative `/` path and its stat signature.

    A NamedTuple, not a dataclass: the walk makes one per file (217,000 for a 100,000-resource
    project) on every run, and a tuple is several times cheaper to build.
    """

    path: str
    size: int
    mtime_ns: int
    inode: int


class ReportFiles(NamedTuple):
    """What a report renderer (`orchestrate.reports`) wrote: the pages a person opens, and the
    files it keeps beside them (caches, what it compares with next time). Both go in the output
    folder's ledger, so `clean` removes them; a run names only the pages. A renderer may return
    a plain list of paths instead: each is then a page."""

    pages: tuple[Path, ...] = ()
    kept: tuple[Path, ...] = ()


@dataclass(frozen=True)
class Switch:
    """A command-line flag, and an environment variable, that set one key of a section for a run
    whatever the build file says: the policy of a machine over build files it does not control
    (`--no-custom-code` sets `rules.allow_custom_code` to false). Every command that runs stages
    offers the switches of the registered sections (orchestrator/switches.py)."""

    flag: str  # "--no-custom-code"
    key: str  # the key it sets inside its section
    value: Any  # the value it sets
    help: str = ""
    env: str | None = None  # set to 1/true/yes/on, this variable does what the flag does


@dataclass(frozen=True, eq=False)  # compared by identity: each is one registered object
class Section:
    """A top-level key of the build file that a package adds (entry-point group
    `orchestrate.sections`, the entry point's name being the key).

    `annotation` is the value's type as pydantic validates it (a model for a mapping); `default`
    is used when the key is absent; `check(build)` runs after loading, for what a schema cannot
    say (a file the section names must exist), and raises `ConfigError`; `switches` are the
    command-line flags that override its keys. `file_policy(value)`, on one section, gives the
    `projectfiles.FilePolicy` the engine reads the project's files under (links leading out,
    the size limit); without one, the defaults.
    """

    annotation: Any
    default: Any
    description: str = ""
    check: Any = None
    switches: tuple[Switch, ...] = ()
    file_policy: Any = None


class ProjectReader(Protocol):
    """How `run` reads project files; every read and miss enters the unit's cache key, and so
    does every entry of an input it looks up (`entry`) or a whole input it iterates (`whole`)."""

    root: str

    def read_bytes(self, relpath: str) -> bytes: ...
    def exists(self, relpath: str) -> bool: ...
    def abspath(self, relpath: str) -> str: ...
    def relpath(self, path: str) -> str | None: ...
    def blob(self, digest: Digest) -> Any: ...
    def prefetch(self, relpaths: list[str]) -> None: ...
    def entry(self, value: str, key: str, entries: Mapping[str, Any]) -> Any: ...
    def whole(self, value: str) -> None: ...


class UnitResults(Protocol):
    """What `finish` gets: unit id → result, loaded lazily; `digest(id)` without loading;
    `plan`, the plan this run made (its `state` carries what planning learned); and, after an
    incremental `update`, `changed` (units whose result changed, new ones included), `removed`
    (units that went away) and `before` (their last results' digests); None after a full
    `plan`."""

    plan: Plan
    changed: set[str] | None
    removed: set[str] | None
    before: dict[str, Digest]  # changed or removed unit → its result digest in the last run

    def __getitem__(self, unit_id: str) -> Any: ...
    def __iter__(self) -> Iterator[str]: ...
    def __len__(self) -> int: ...
    def digest(self, unit_id: str) -> Digest: ...


class StageContext(Protocol):
    """The driver-side services `plan`, `finish` and the hooks get (`orchestrator.core.context`)."""

    root: str
    output_dir: Path
    log: Any
    # The build runs in a resident process (`orchestrate watch`) that builds again on the next
    # save: what a stage keeps warm in its process (worker processes, say) may serve that build.
    resident: bool

    def section(self, name: str) -> Any: ...
    def walk(self) -> list[FileEntry]: ...
    def refused_files(self) -> dict[str, Any]: ...
    def file_digest(self, relpath: str) -> Digest | None: ...
    def track_file(self, path: Any) -> Digest | None: ...
    def publish_bytes(self, relpath: str, data: bytes) -> bool: ...
    def mark_published(self, relpath: str) -> bool: ...
    def output_holds(self, relpath: str, size: int, digest: Digest) -> bool: ...
    def load_result(self, digest: Digest) -> Any: ...


class BuildSettings(Protocol):
    """The loaded build file as hooks see it (`orchestrator.core.config.Build`)."""

    path: Path
    dir: Path
    project_root: Path
    output_dir: Path

    def section(self, name: str) -> Any: ...


class StageModule(Protocol):
    """A stage as the engine loads it (a module, or any object with these attributes)."""

    SPEC: StageSpec

    def plan(self, ctx: StageContext, inputs: dict[str, Any]) -> Plan: ...
    def run(self, payload: Any, shared: Any, reader: ProjectReader) -> Any: ...
    def finish(
        self, ctx: StageContext, inputs: dict[str, Any], results: UnitResults
    ) -> dict[str, Any]: ...


Outputs = Mapping[str, Any]
"""The values of a run by name, loaded on first use (what `verdict`, `summary` and `problems`
read)."""
