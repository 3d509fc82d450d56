"""Executors run units of work: in the driver (`local`) or as Ray tasks (`ray`).

Both speak one small protocol: `execute(fn, items, shared)` yields `Finished` records as units
complete, in any order. The scheduler owns caching; executors only run what they are given.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..cache.workers import Packed, StoredBlobs, StoredResult, StoreTarget, worker_store
from ..errors import MissingBlob, MissingInput, OrchestrateError, ProjectError
from ..files.projectfiles import FilePolicy, ProjectFiles
from ..files.reads import Reader, SentFiles


class LazyBlobs(Mapping):
    """The stored results a unit reads (digest → value), loaded only when the unit reads them.

    The driver plans a stage's items up front; loading every cooked payload then would hold the
    whole build's bytes in the driver at once. Nothing loaded is kept either: the stage's items
    live until it ends, and a cache here kept every payload a unit had read (or that was pickled
    for a Ray worker) alive with them, half a gigabyte during the write stage at 100,000 assets.
    Pickled (sent to a Ray worker), it becomes a plain dict of exactly what the unit needs, or,
    when the worker may read the cache folder (`target`), where each of those results is
    stored: the driver then neither reads nor sends them.
    """

    def __init__(
        self,
        digests: tuple[str, ...],
        load: Callable[[str], Any],
        locate: Callable[[str], Packed | str | None] | None = None,
    ) -> None:
        self._digests = digests
        self._known = frozenset(digests)
        self._load = load
        self._locate = locate
        self.target: StoreTarget | None = None  # see `by_reference`
        self._by_value = False

    def by_reference(self, target: StoreTarget) -> None:
        """Pickle as where each result is stored in `target`'s folder (its worker reads them
        there: cache/workers.py), unless the unit had to be sent with them once."""
        if not self._by_value:
            self.target = target

    def by_value(self) -> None:
        """Pickle as the values from now on (the driver reads them, mending a damaged one)."""
        self._by_value = True
        self.target = None

    def __getitem__(self, digest: str) -> Any:
        if digest not in self._known:
            raise KeyError(digest)
        return self._load(digest)

    def __iter__(self) -> Iterator[str]:
        return iter(self._digests)

    def __len__(self) -> int:
        return len(self._digests)

    def __reduce__(self) -> tuple:
        if self.target is None or self._locate is None:
            return (dict, ({digest: self._load(digest) for digest in self._digests},))
        located: dict[str, Packed | str] = {}
        values: dict[str, Any] = {}
        for digest in self._digests:
            where = self._locate(digest)
            if where is None:
                values[digest] = self._load(digest)
            else:
                located[digest] = where
        return (StoredBlobs, (self.target, self._digests, located, values))


@dataclass
class WorkItem:
    """A unit as sent to an executor: payload, the stored blobs it needs, preloaded file bytes."""

    unit_id: str
    payload: Any
    blobs: Mapping[str, Any] = field(default_factory=dict)  # a LazyBlobs in the driver
    files: dict[str, bytes | None] = field(default_factory=dict)
    signatures: dict[str, tuple] = field(default_factory=dict)  # what `files` were read under
    want: tuple[str, ...] = ()  # files it is known to read: preloaded for remote workers
    cost: int = 1
    pinned: bool = False  # runs in the driver's own process (Unit.pinned)

    def forget_files(self) -> None:
        """Let go of the preloaded bytes (sent already; a resend reads the files again)."""
        self.files.clear()
        self.signatures.clear()


@dataclass
class Finished:
    """One unit's outcome: a result or an error, the files it read, and when and where it ran."""

    unit_id: str
    result: Any = None
    error: BaseException | None = None
    error_text: str = ""  # traceback of an unexpected error, for the bug report
    reads: dict[str, str | None] = field(default_factory=dict)
    signatures: dict[str, tuple] = field(default_factory=dict)  # of the files read from disk
    start: float = 0.0
    seconds: float = 0.0
    worker: str = "driver"
    missing_file: str | None = None  # the worker lacked this file: resend with it
    missing_blob: MissingBlob | None = None  # …or could not read this stored result
    stored: StoredResult | None = None  # the worker stored the result (cache/workers.py)


class Executor(Protocol):
    name: str
    #: Units run in the driver's own process: the driver stores what they make (no StoreTarget).
    in_driver: bool

    def execute(
        self,
        fn: Callable,
        items: list[WorkItem],
        shared: Any,
        store: StoreTarget | None = None,
    ) -> Iterator[Finished]:
        """Run the items; a worker that sees the cache folder of `store` at its path stores
        the results it makes there (a `Finished` with `stored`), else returns them."""
        ...

    def close(self) -> None: ...


def worker_label() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def run_item(
    fn: Callable,
    item: WorkItem,
    shared: Any,
    root: str,
    disk: bool,
    label: str,
    fetch: Callable[[list[str]], SentFiles] | None = None,
    policy: FilePolicy | None = None,
    files: ProjectFiles | None = None,
) -> Finished:
    """Run one unit with a recording reader (reading under the build's `policy`, through
    `files` when given); never raises (errors travel in the record)."""
    reader = Reader(
        root,
        preloaded=item.files,
        disk=disk,
        blobs=item.blobs,
        fetch=fetch,
        signed=item.signatures,
        policy=policy,
        files=files,
    )
    start = time.time()
    clock = time.perf_counter()
    try:
        result = fn(item.payload, shared, reader)
    except (MissingInput, MissingBlob) as missing:  # sent again with what it lacked
        return Finished(
            item.unit_id,
            reads=reader.reads,
            start=start,
            worker=label,
            seconds=time.perf_counter() - clock,
            missing_file=missing.relpath if isinstance(missing, MissingInput) else None,
            missing_blob=missing if isinstance(missing, MissingBlob) else None,
        )
    except OrchestrateError as exc:
        return Finished(
            item.unit_id,
            error=exc,
            reads=reader.reads,
            start=start,
            worker=label,
            seconds=time.perf_counter() - clock,
        )
    except Exception as exc:  # a bug in a stage: keep the traceback for the report
        return Finished(
            item.unit_id,
            error=exc,
            error_text=traceback.format_exc(),
            reads=reader.reads,
            start=start,
            worker=label,
            seconds=time.perf_counter() - clock,
        )
    return Finished(
        item.unit_id,
        result=result,
        reads=reader.reads,
        signatures=reader.signatures,
        start=start,
        worker=label,
        seconds=time.perf_counter() - clock,
    )


def store_results(done: list[Finished], store: StoreTarget | None) -> list[Finished]:
    """The batch's outcomes with their results stored in the cache folder, when this worker
    sees it (cache/workers.py): each then carries its digests instead of its value. A result the
    codec cannot store, or a folder that cannot take them (full, gone, a link where a folder
    was), is left to the driver, which says which unit or file it was."""
    writer = worker_store(store)
    if writer is None:
        return done
    stored: list[Finished] = []
    try:
        for finished in done:
            if finished.error is None and not finished.missing_file and not finished.missing_blob:
                try:
                    kept = writer.store(finished.result)
                except TypeError:
                    stored.append(finished)
                    continue
                finished = dataclasses.replace(finished, result=None, stored=kept)
            stored.append(finished)
        writer.flush()  # before the driver records an entry naming these blobs
    except (OSError, ProjectError):  # the driver, storing them, reports it
        return done
    return stored


@dataclass(frozen=True)
class Workplace:
    """Where units run and what they need there: the project's root and what of it they read
    (`policy`), the cache folder (an executor keeps its own logs there), and the folders of the
    code a cluster's workers import (the engine's and the registered stages' packages)."""

    root: str
    cache_dir: str
    policy: FilePolicy | None = None
    code_roots: tuple[str, ...] = ()
    # The driver's reader of the project: units run in the driver read through it, and it knows
    # the folders the scan found real (no `lstat` of each again). Not sent to other processes.
    files: ProjectFiles | None = field(default=None, compare=False, repr=False)


def make_executor(
    kind: str,
    place: Workplace,
    *,
    workers: int | None = None,
    address: str | None = None,
    shared_paths: bool = False,
    log=None,
    helpers: int = 0,
) -> Executor:
    """An executor by name; Ray is imported only when a Ray executor is made. `helpers`: a
    local executor forks that many copies of the driver to run units too."""
    if kind == "local":
        from .local import LocalExecutor

        if helpers:
            from .forked import ForkedExecutor

            return ForkedExecutor(place.root, place.policy, place.files, helpers=helpers)
        return LocalExecutor(place.root, place.policy, place.files)
    if kind == "ray":
        from .ray import RayExecutor

        return RayExecutor(
            place, workers=workers, address=address, shared_paths=shared_paths, log=log
        )
    raise ValueError(f"unknown executor {kind!r}")
