"""The farm's figures (issue 28): a fresh agent building from a warm shared cache, and how a cold
build scales out on Ray.

`fresh checkout`: a first agent builds the commit cold (untimed); other agents, each with no
build state of its own, build the same files from what it left: through the cache folder they
share, checked out at the same path (a farm's agents use one workspace path) and at another
path; and through a cache server (nginx with its WebDAV methods, Bazel's HTTP protocol, as
tests/remotekit.py starts it) with an empty cache folder of their own.

`scaling`: cold builds with executor `local` (the driver alone) and `auto` (below 4 cores, the
driver and a forked helper per other core: executors/forked.py); cold Ray builds with 1 and 2
workers, the driver's CPU share of all the build's CPU
(psutil, benchmarks/runner.py `--cpu`), the ceiling that share puts on more workers (Amdahl:
1 / (s + (1 - s) / n)), and a cold build on a two-node cluster started on this machine with
`ray start` (a head and a node, one CPU each, as docs/cluster.md's steps say:
tests/raystart.py).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from common import (
    ROOT,
    BenchError,
    Project,
    SizeResults,
    agent_checkout,
    bench_build_file,
    log,
    repeat_runs,
    run_orchestrate,
    runs_figure,
)
from figures import LOCAL1, LOCAL2, RAY1, RAY2, Options, cold_runs, section

#: The farm's key for the cache server's entries (docs/cluster.md, "The cache key").
KEY_ENV = "ORCHESTRATE_BENCH_CACHE_KEY"
KEY = "bench-farm-key-0123456789abcdef"
#: Workers a farm's cluster has, for the ceiling the driver's share implies.
CEILING_WORKERS = (16, 64)


def _tests_helpers():
    """tests/remotekit.py and tests/raystart.py: the suite starts its servers as the tests do."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import raystart
    import remotekit

    return remotekit, raystart


# -- a fresh agent -----------------------------------------------------------------------------------


@section("fresh checkout")
def fresh_checkouts(project: Project, results: SizeResults, options: Options) -> None:
    shared = options.shared_paths
    source = bench_build_file(project, "fresh-source", shared_paths=shared)
    log("  the first agent's cold build (untimed)")
    run_orchestrate(source, timeout=options.timeout)
    cache = project.dir / "runs" / "fresh-source" / "cache"

    def same_path(i: int):
        build = bench_build_file(project, f"fresh-same-{i}", shared_paths=shared, cache=cache)
        return run_orchestrate(build, timeout=options.timeout)

    def other_path(i: int):
        build = agent_checkout(project, f"fresh-other-{i}", cache, "out", shared)
        return run_orchestrate(build, timeout=options.timeout)

    for name, make, what in (
        ("fresh.disk", same_path, "same path, the shared cache folder"),
        ("fresh.disk_elsewhere", other_path, "another path, the shared cache folder"),
    ):
        runs = repeat_runs(options.repeat, make, f"fresh checkout, {what}")
        figure = runs_figure(runs, lambda r: r.wall)
        figure["what"] = what
        results.put(name, figure)
    _fresh_over_http(project, results, options)


def _fresh_over_http(project: Project, results: SizeResults, options: Options) -> None:
    remotekit, _ = _tests_helpers()
    if remotekit.NGINX is None:
        results.notes.append("nginx not available: the HTTP cache figure is missing")
        return
    os.environ[KEY_ENV] = KEY  # the runs' environment: every entry signed and checked
    with tempfile.TemporaryDirectory(prefix="bench-nginx-") as folder:
        proc, server = remotekit.start_nginx(Path(folder))
        try:
            url, _ = server.folder()

            def remote(name: str) -> dict:
                path = project.dir / "runs" / name / "cache"
                return {"path": str(path), "remote": url, "key_env": KEY_ENV}

            # The first agent's cache folder from an earlier run would make its build a no-op
            # that sends the new (empty) server nothing.
            shutil.rmtree(project.dir / "runs" / "fresh-http-a", ignore_errors=True)
            first = bench_build_file(
                project, "fresh-http-source", options.shared_paths, cache=remote("fresh-http-a")
            )
            log("  the first agent's cold build into the cache server (untimed)")
            run_orchestrate(first, timeout=options.timeout)

            def one(i: int):
                name = f"fresh-http-{i}"
                build = bench_build_file(project, name, True, options.shared_paths, remote(name))
                return run_orchestrate(build, timeout=options.timeout)

            runs = repeat_runs(options.repeat, one, "fresh checkout, same path, the cache server")
        finally:
            remotekit.stop(proc)
    figure = runs_figure(runs, lambda r: r.wall)
    figure["what"] = "same path, an empty cache folder and the cache server (nginx, loopback)"
    results.put("fresh.http", figure)


# -- scaling out ----------------------------------------------------------------------------------


def driver_share(figure: dict) -> float | None:
    """The driver's CPU seconds over all the build's (medians of the runs' own shares)."""
    shares = [
        run["cpu"]["driver_s"] / run["cpu"]["all_s"]
        for run in figure.get("runs", [])
        if run.get("cpu") and run["cpu"].get("all_s")
    ]
    return sorted(shares)[len(shares) // 2] if shares else None


def amdahl(share: float, workers: int) -> float:
    """The speed-up over one process a build whose driver does `share` of the work reaches
    with `workers` workers doing the rest."""
    return 1.0 / (share + (1.0 - share) / workers)


@section("scaling")
def scaling(project: Project, results: SizeResults, options: Options) -> None:
    for label, args in (("local1", LOCAL1), ("local2", LOCAL2)):
        what = f"cold build, executor {args[-1]}"
        runs = cold_runs(project, options, f"scale-{label}", args, what)
        results.put(f"scale.{label}", runs_figure(runs, lambda r: r.engine_s))
    for label, args in (("ray1", RAY1), ("ray2", RAY2)):
        what = f"cold build, {label}, CPU sampled"
        runs = cold_runs(project, options, f"scale-{label}", args, what, flags=("--cpu",))
        figure = runs_figure(runs, lambda r: r.engine_s)
        figure["driver_share"] = driver_share(figure)
        results.put(f"scale.{label}", figure)
        log(f"  driver's CPU share: {figure['driver_share']}")
    share = results.figures["scale.ray2"].get("driver_share")
    if share is not None:
        results.put(
            "scale.ceiling",
            {
                "median": amdahl(share, CEILING_WORKERS[-1]),
                "share": share,
                "workers": {str(n): amdahl(share, n) for n in CEILING_WORKERS},
            },
        )
    _two_nodes(project, results, options)


def _two_nodes(project: Project, results: SizeResults, options: Options) -> None:
    """A cold build on a head and a node started with `ray start` on this machine (loopback),
    one CPU each: the build file's `executor.address` names the head."""
    _, raystart = _tests_helpers()
    # Ray's socket paths under the folder must stay short (107 bytes).
    with tempfile.TemporaryDirectory(prefix="bench-ray-", dir="/tmp") as folder:
        cluster = raystart.start_cluster(Path(folder), dict(os.environ), nodes=1)
        try:
            roots = ",".join(
                str(node.process.pid) for node in [cluster.head, *cluster.nodes] if node
            )

            def one(i: int):
                build = bench_build_file(project, "scale-two-nodes", shared_paths=True)
                _set_executor(build, {"kind": "ray", "address": cluster.address})
                env = {**cluster.env, "BENCH_CPU_ROOTS": roots}
                return run_orchestrate(build, timeout=options.timeout, flags=("--cpu",), env=env)

            runs = repeat_runs(options.repeat_cold, one, "cold build, two-node cluster")
        finally:
            cluster.stop()
    if not runs:
        raise BenchError("no run on the two-node cluster")
    figure = runs_figure(runs, lambda r: r.engine_s)
    figure["driver_share"] = driver_share(figure)
    figure["what"] = "a head and a node (`ray start`), one CPU each, on this machine"
    results.put("scale.two_nodes", figure)


def _set_executor(build: Path, executor: dict) -> None:
    import yaml

    raw = yaml.safe_load(build.read_text(encoding="utf-8"))
    raw["executor"] = {**(raw.get("executor") or {}), **executor}
    build.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True), encoding="utf-8")
