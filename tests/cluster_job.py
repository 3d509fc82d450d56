"""Builds on a multi-node Ray cluster started here (run as a subprocess by test_cluster.py).

`python cluster_job.py WORKDIR` starts a head and two worker nodes with `ray.cluster_utils`,
builds copies of one generated project in several ways and prints one JSON line of results:
the published outputs' digests per build, exit codes, and what happened (node removed, …).

`hide_project` is a Ray `worker_process_setup_hook`: in every worker process on a node other than
the driver's it makes any path containing `/hidden-` unreadable, as on a machine that does not see
the driver's disk. (Processes on the driver's node — e.g. an actor serving files to workers —
see the project, as they would on the driver's machine.) The head node, where the driver runs,
has no CPUs, so every task runs on a node that cannot see the project.
"""

from __future__ import annotations

import builtins
import io
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

HIDDEN_MARK = "/hidden-"


def hide_project() -> None:
    """Worker setup hook: opening anything under a `hidden-*` folder fails like a missing mount."""

    def guard(path):
        text = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else ""
        if HIDDEN_MARK in text and not _on_driver_node():
            raise PermissionError(13, "Permission denied (not visible on this node)", text)

    real_open, real_os_open, real_io_open = builtins.open, os.open, io.open

    def open_(file, *args, **kwargs):
        guard(file)
        return real_open(file, *args, **kwargs)

    def os_open(path, *args, **kwargs):
        guard(path)
        return real_os_open(path, *args, **kwargs)

    def io_open(file, *args, **kwargs):
        guard(file)
        return real_io_open(file, *args, **kwargs)

    builtins.open, os.open, io.open = open_, os_open, io_open


def _on_driver_node() -> bool:
    import ray

    return ray.get_runtime_context().get_node_id() == os.environ.get("ORCH_DRIVER_NODE")


def _digests(output: Path) -> dict[str, str]:
    from buildkit import published

    from orchestrator.hashing import digest_bytes

    return {rel: digest_bytes(data) for rel, data in published(output).items()}


def _copy(src_build: Path, dest: Path) -> Path:
    shutil.copytree(src_build.parent, dest, ignore=shutil.ignore_patterns("build"))
    return dest / src_build.name


def _build(build_file: Path, *extra: str) -> int:
    from buildkit import run_inprocess

    return run_inprocess("run", str(build_file), *extra)


def _running_batches() -> list:
    import psutil

    return [
        p
        for p in psutil.process_iter(["cmdline"])
        if (p.info.get("cmdline") or [""])[0].startswith("ray::_run_batch")
    ]


def main(workdir: str) -> None:
    import ray
    from buildkit import edit_build, make_project
    from ray.cluster_utils import Cluster

    work = Path(workdir)
    slow = {
        "command": 'sh -c \'sleep 0.15; find "$0" -type f | sort | xargs cat > "$1"\' '
        "{input} {output}",
        "version": "1",
    }
    source = make_project(
        work / "source", 120, 11, cook={"cookers": {"Texture": slow}}, executor={"kind": "local"}
    )
    results: dict = {"builds": {}, "codes": {}}

    reference = _copy(source, work / "reference")
    results["codes"]["reference"] = _build(reference)
    results["builds"]["reference"] = _digests(reference.parent / "build" / "out")

    started = time.perf_counter()
    cluster = Cluster(
        initialize_head=True,
        connect=False,
        head_node_args={"num_cpus": 0, "include_dashboard": False},
    )
    worker_nodes = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    results["cluster_start_seconds"] = round(time.perf_counter() - started, 2)
    try:
        # 1. The documented way: executor.address in the build file; the code ships with the job.
        by_address = _copy(source, work / "by-address")
        edit_build(by_address, executor={"kind": "ray", "address": cluster.address})
        results["codes"]["by_address"] = _build(by_address)
        results["builds"]["by_address"] = _digests(by_address.parent / "build" / "out")
        results["nodes_seen"] = len([n for n in ray.nodes() if n["Alive"]])
        ray.shutdown()

        # 2. Workers that cannot see the project: hidden from every worker process.
        tests_dir = str(Path(__file__).resolve().parent)
        path = os.pathsep.join([tests_dir, str(Path(tests_dir).parent)])
        ray.init(
            address=cluster.address,
            log_to_driver=False,
            configure_logging=False,
            runtime_env={
                "env_vars": {"PYTHONPATH": path, "ORCH_DRIVER_NODE": cluster.head_node.node_id},
                "worker_process_setup_hook": "cluster_job.hide_project",
            },
        )
        hidden = _copy(source, work / "hidden-shipped")
        results["codes"]["hidden_shipped"] = _build(hidden, "--executor", "ray")
        results["builds"]["hidden_shipped"] = _digests(hidden.parent / "build" / "out")

        # 2b. The control: the same hidden project with shared_paths must fail to read it.
        control = _copy(source, work / "hidden-shared-paths")
        edit_build(control, executor={"kind": "ray", "shared_paths": True})
        results["codes"]["hidden_shared_paths"] = _build(control)

        # 3. shared_paths on a project every node sees.
        shared = _copy(source, work / "visible-shared-paths")
        edit_build(shared, executor={"kind": "ray", "shared_paths": True})
        results["codes"]["shared_paths"] = _build(shared)
        results["builds"]["shared_paths"] = _digests(shared.parent / "build" / "out")

        # 4. A worker node removed while the build runs.
        removed = _copy(source, work / "node-removed")
        events: dict = {}

        def remove_a_node():
            deadline = time.time() + 120
            while time.time() < deadline and not _running_batches():
                time.sleep(0.01)
            time.sleep(0.3)
            events["removed_at"] = time.time()
            cluster.remove_node(worker_nodes[1])

        thread = threading.Thread(target=remove_a_node, daemon=True)
        thread.start()
        results["codes"]["node_removed"] = _build(removed, "--executor", "ray")
        events["finished_at"] = time.time()
        thread.join(timeout=60)
        results["node_removed_mid_build"] = (
            "removed_at" in events and events["removed_at"] < events["finished_at"]
        )
        results["builds"]["node_removed"] = _digests(removed.parent / "build" / "out")
        results["nodes_alive_after"] = len([n for n in ray.nodes() if n["Alive"]])
    finally:
        ray.shutdown()
        cluster.shutdown()
    print("RESULTS " + json.dumps(results, sort_keys=True))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(1, str(Path(__file__).resolve().parent.parent))
    main(sys.argv[1])
