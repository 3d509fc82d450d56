"""The Ray executor: units sent in batches as Ray tasks, results streamed back with `ray.wait`.

Batching policy (measured in benchmarks/bench_engine.py): a Ray task costs on the order of a
millisecond of scheduling and serialization, while a typical unit (parse one XML file, check one
file against the rules, cook one asset) costs 0.1–2 ms. A batch therefore carries at least
`MIN_BATCH_UNITS` units or `MIN_BATCH_BYTES` of input, and the work is cut into about
`BATCHES_PER_WORKER` batches per worker so that the last batches still balance across workers.
At most `IN_FLIGHT_PER_WORKER` batches per worker are in flight, which bounds driver memory.

Read-only shared data (the index, the compiled rules) is put in the object store once per stage.
Input bytes travel with the batch unless `shared_paths` says every node sees the project at the
same path; a unit that discovers it needs a file it was not sent fetches it from a `FileServer`
actor pinned to the driver's node (or, with a Ray Client driver, comes back asking for it and is
resent with it). A worker that sees the cache folder at the driver's path stores the results
its units make there and returns their digests, and reads the stored results its units need
from there by digest (cache/workers.py); the driver sends and receives values only for workers
that do not, and for a unit whose worker could not read one intact. A batch whose worker or
node died is sent again (up to `TASK_RETRIES` times), here rather than by Ray, so that the build
can say in one line what was lost and what it cost; Ray's own account goes to its log under
the cache folder (raysession.py).
"""

from __future__ import annotations

import math
import os
import pickle
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import ray

from ..errors import MissingBlob, StepFailed
from ..files.projectfiles import FilePolicy, ProjectFiles
from ..files.reads import SentFiles, read_for_worker
from . import (
    Finished,
    LazyBlobs,
    StoreTarget,
    WorkItem,
    Workplace,
    run_item,
    store_results,
    worker_label,
)
from .raysession import RayLog, cluster_nodes, join, start_local, unreachable

MIN_BATCH_UNITS = 16
MIN_BATCH_BYTES = 256 * 1024
MAX_BATCH_UNITS = 512
BATCHES_PER_WORKER = 4
IN_FLIGHT_PER_WORKER = 2
TASK_RETRIES = 3
#: What a batch raises when the worker or node running it (or holding its result) was lost.
LOST_WITH_A_WORKER = (
    ray.exceptions.WorkerCrashedError,
    ray.exceptions.NodeDiedError,
    ray.exceptions.LocalRayletDiedError,
    ray.exceptions.ObjectLostError,
    ray.exceptions.OutOfMemoryError,
)


# Worker-process memo of the stage's shared data: object id → value. Ray would deserialize an
# argument for every task; the index of a 100,000-resource project costs seconds to unpickle.
_shared_values: dict[str, Any] = {}


class Pickled(NamedTuple):
    """A stage's shared value as the standard pickler's bytes (`put_shared`)."""

    data: bytes


def put_shared(shared: Any) -> Any:
    """The object reference of a stage's shared value, pickled here by the standard pickler
    when it can: Ray's (cloudpickle) calls back into Python for every object, and took twice
    as long over the validate stage's index. What it cannot pickle (a function made at run
    time), or would name in the driver's `__main__` (which workers do not have: cloudpickle
    sends that by value), is left to Ray."""
    try:
        data = pickle.dumps(shared, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # pickle raises many kinds (PicklingError, TypeError, AttributeError)
        return ray.put(shared)
    if b"__main__" in data:
        return ray.put(shared)
    return ray.put(Pickled(data))


def _shared_value(holder: list) -> Any:
    """The shared value behind `holder[0]` (an ObjectRef wrapped in a list, so that Ray passes
    the reference instead of resolving it), fetched once per worker process and stage."""
    ref = holder[0]
    key = ref.hex()
    if key not in _shared_values:
        _shared_values.clear()  # stages run one after another: keep only the current one
        value = ray.get(ref)
        if isinstance(value, Pickled):
            value = pickle.loads(value.data)
        _shared_values[key] = value
    return _shared_values[key]


def _run_batch(
    fn: Callable,
    shared_holder: list,
    root: str,
    disk: bool,
    items: list[WorkItem],
    server: Any = None,
    policy: FilePolicy | None = None,
    store: StoreTarget | None = None,
) -> list[Finished]:
    label = worker_label()
    shared = _shared_value(shared_holder)
    fetch = None
    if server is not None:

        def fetch(relpaths: list[str]) -> SentFiles:
            return ray.get(server.read.remote(relpaths))

    done = [run_item(fn, item, shared, root, disk, label, fetch, policy) for item in items]
    return store_results(done, store)


class FileServer:
    """Serves project files from the driver's machine to workers that cannot see them.

    A unit that discovers a file while running (a rule's subxpath target, the texture a check
    opens) asks for it here instead of failing and being resent: one round trip per file.
    """

    def __init__(self, root: str, policy: FilePolicy | None = None) -> None:
        self.files = ProjectFiles(root, policy)

    def read(self, relpaths: list[str]) -> SentFiles:
        return read_for_worker(self.files, relpaths)


def _start_file_server(root: str, log=None, policy: FilePolicy | None = None) -> Any:
    """A FileServer pinned to the driver's node, or None when the driver is not on a node
    (Ray Client): then a unit that lacks a file comes back and is resent with it."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    try:
        node = ray.get_runtime_context().get_node_id()
    except Exception:  # Ray Client drivers have no node
        return None
    if not node:
        return None
    strategy = NodeAffinitySchedulingStrategy(node_id=node, soft=False)
    return (
        ray.remote(FileServer)
        .options(num_cpus=0, max_concurrency=8, scheduling_strategy=strategy)
        .remote(root, policy)
    )


def plan_batches(items: list[WorkItem], workers: int) -> list[list[WorkItem]]:
    """Cut items into batches big enough to dwarf per-task overhead, small enough to balance."""
    if not items:
        return []
    per_batch = math.ceil(len(items) / (workers * BATCHES_PER_WORKER))
    per_batch = max(1, min(MAX_BATCH_UNITS, max(per_batch, MIN_BATCH_UNITS)))
    batches, current, current_cost = [], [], 0
    for item in items:
        current.append(item)
        current_cost += item.cost
        if len(current) >= per_batch or (current_cost >= MIN_BATCH_BYTES * 8 and len(current) >= 1):
            batches.append(current)
            current, current_cost = [], 0
    if current:
        batches.append(current)
    return batches


@dataclass
class Batch:
    items: list[WorkItem]
    attempts: int = 0  # times it was sent and lost with its worker

    def lost(self) -> int:
        """It was lost with its worker once more: how many times now."""
        self.attempts += 1
        return self.attempts


@dataclass
class Losses:
    """What this executor lost to dead workers and nodes, and has not told yet."""

    retried: Counter = field(default_factory=Counter)  # lost nodes (a tuple) → batches resent
    told: set[str] = field(default_factory=set)  # dead nodes already told of


class RayExecutor:
    name = "ray"
    in_driver = False

    def __init__(
        self,
        place: Workplace,
        *,
        workers: int | None = None,
        address: str | None = None,
        shared_paths: bool = False,
        log=None,
    ) -> None:
        root, policy = place.root, place.policy
        self.root = root
        self.files = ProjectFiles(root, policy)
        self.log = log
        self.shared_paths = shared_paths
        self.ray_log = RayLog(Path(place.cache_dir))
        address = address or os.environ.get("RAY_ADDRESS") or None
        started = time.perf_counter()
        if not ray.is_initialized():
            if address:
                join(address, list(place.code_roots), self.ray_log)
            else:
                parents = dict.fromkeys(str(Path(folder).parent) for folder in place.code_roots)
                path = os.pathsep.join([*parents, *[p for p in sys.path if p]])
                start_local(workers or os.cpu_count() or 1, path, self.ray_log)
        self.ray_log.route()
        self.startup_seconds = time.perf_counter() - started
        self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._remote = ray.remote(_run_batch).options(max_retries=0, retry_exceptions=False)
        self._server = None if shared_paths else _start_file_server(root, log, policy)
        self._losses = Losses(told={node.id for node in cluster_nodes() if not node.alive})
        self._blobs_unseen = False  # a worker did not see the cache folder: results by value
        if log is not None:
            log.info(
                "ray.ready",
                workers=self.workers,
                address=address or "local",
                seconds=round(self.startup_seconds, 2),
                ray_log=str(self.ray_log.path),
            )

    def execute(
        self,
        fn: Callable,
        items: list[WorkItem],
        shared: Any,
        store: StoreTarget | None = None,
    ) -> Iterator[Finished]:
        shared_ref = put_shared(shared)
        pending = [Batch(items) for items in plan_batches(items, self.workers)]
        pending.reverse()
        limit = self.workers * IN_FLIGHT_PER_WORKER
        in_flight: dict[Any, Batch] = {}
        disk = self.shared_paths
        completed = False
        try:
            while pending or in_flight:
                while pending and len(in_flight) < limit:
                    batch = pending.pop()
                    self._by_reference(batch, store)
                    if not disk:
                        for item in batch.items:
                            self._preload(item)
                    ref = self._remote.remote(
                        fn,
                        [shared_ref],
                        self.root,
                        disk,
                        batch.items,
                        self._server,
                        self.files.policy,
                        store,
                    )
                    if not disk:  # sent (serialized) already: a resend reads the files again
                        for item in batch.items:
                            item.forget_files()
                    in_flight[ref] = batch
                done, _ = ray.wait(list(in_flight), num_returns=1)
                for ref in done:
                    batch = in_flight.pop(ref)
                    try:
                        results = ray.get(ref)
                    except LOST_WITH_A_WORKER as lost:
                        pending.append(self._lost(batch, lost))
                        continue
                    by_id = {item.unit_id: item for item in batch.items}
                    retry = []
                    for finished in results:
                        if finished.missing_file is not None:
                            item = by_id[finished.unit_id]
                            self._send(item, [finished.missing_file])
                            retry.append(item)
                        elif finished.missing_blob is not None:
                            item = by_id[finished.unit_id]
                            self._by_value(item, finished.missing_blob)
                            retry.append(item)
                        else:
                            yield finished
                    if retry:
                        pending.append(Batch(retry))
            completed = True
        finally:
            self._tell_losses(look_for_dead=completed)

    def _lost(self, batch: Batch, lost: Exception) -> Batch:
        """The batch to send again after its worker (or node) died, counted against the nodes
        found dead since the last report; StepFailed (exit 4) once it was lost TASK_RETRIES
        times."""
        self.ray_log.write(f"a batch of {len(batch.items)} units was lost: {lost}")
        # The node the error names, else those the GCS found dead since the last report, else
        # those whose raylet stopped answering (the GCS declares a node dead seconds after it
        # is lost, and a worker killed with its node may fail its task first), else workers.
        nodes = cluster_nodes()
        named = [node.id for node in nodes if node.id in str(lost)]
        dead = [node.id for node in nodes if not node.alive and node.id not in self._losses.told]
        self._losses.retried[tuple(sorted(named or dead or unreachable(nodes)))] += 1
        if batch.lost() > TASK_RETRIES:
            self._tell_losses()
            raise StepFailed(
                f"Ray lost a batch of {len(batch.items)} units {batch.attempts} times "
                f"(first unit {batch.items[0].unit_id}); Ray's log: {self.ray_log.path}"
            )
        return batch

    def _tell_losses(self, look_for_dead: bool = False) -> None:
        """One line per node lost (or for workers lost on live nodes) since the last time, with
        the batches sent again, naming the file that holds Ray's own account. `look_for_dead`:
        also the nodes the GCS found dead that cost no batch (asked only after work that
        completed: a cluster that is gone would not answer)."""
        losses = self._losses
        if look_for_dead:
            for node in cluster_nodes():
                seen = any(node.id in nodes for nodes in losses.retried)
                if not node.alive and node.id not in losses.told and not seen:
                    losses.retried[(node.id,)] += 0
        for nodes, batches in sorted(losses.retried.items()):
            what = f"node{'s' if len(nodes) > 1 else ''} {', '.join(nodes)}" if nodes else "workers"
            message = f"{what} lost; {batches} batch{'' if batches == 1 else 'es'} retried"
            self.ray_log.write(message)
            if self.log is not None:
                self.log.warning(message, ray_log=str(self.ray_log.path))
            losses.told.update(nodes)
        losses.retried.clear()

    def _by_reference(self, batch: Batch, store: StoreTarget | None) -> None:
        """Let the batch's units read the stored results they need where they are stored, when
        its workers may (`store`) and have not been found not to see the cache folder."""
        if store is None or self._blobs_unseen:
            return
        for item in batch.items:
            if isinstance(item.blobs, LazyBlobs):
                item.blobs.by_reference(store)

    def _by_value(self, item: WorkItem, missing: MissingBlob) -> None:
        """Send the unit again with the stored results it reads (its worker could not read
        `missing`: the driver reads it, and recomputes it if it is damaged)."""
        if missing.unseen:  # workers do not see the cache folder: none is sent by reference
            self._blobs_unseen = True
        if isinstance(item.blobs, LazyBlobs):
            item.blobs.by_value()

    def _preload(self, item: WorkItem) -> WorkItem:
        self._send(item, [relpath for relpath in item.want if relpath not in item.files])
        return item

    def _send(self, item: WorkItem, relpaths: list[str]) -> None:
        """Add these files (with the signatures they were read under) to what goes with it."""
        sent = read_for_worker(self.files, relpaths)
        item.files.update(sent.data)
        item.signatures.update(sent.signatures)

    def close(self) -> None:
        """Nothing to release: a local Ray ends with the driver process (Ray's exit hook) and
        a cluster stays up for the next build."""


def shutdown() -> None:
    if ray.is_initialized():
        ray.shutdown()
