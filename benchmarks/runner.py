"""Run the `orchestrate` command in this fresh interpreter and write what happened as JSON.

    python benchmarks/runner.py OUT.json [--stage-frames] -- run build.yaml [--executor ray ...]
    python benchmarks/runner.py OUT.json -- validate build.yaml --format json --output v.json

The command runs exactly as the console script would (`orchestrator.shell.cli.main`, then `leave`); `run_build` is
wrapped to keep its `RunResult`, so the per-stage seconds, Ray's startup, the sampled peak RSS,
the files the scan re-hashed and whether Ray was imported are written to OUT.json. The benchmark
harness times the whole process from outside (what a user waits for) and reads the rest from here.

`--stage-frames` (for profilers): each stage runs inside a frame named `stage:<name>`, so a
sampling profiler's stacks say which stage a sample belongs to (benchmarks/profile_runs.py).

`--cpu` (for the scaling figures): the CPU seconds of this process (the driver) and of every
process descending from it or from the processes named in BENCH_CPU_ROOTS (a cluster's nodes
started apart), sampled with psutil while `run_build` runs (`CpuSampler`).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import types

STARTED = time.perf_counter()
STAGE_FRAME_PREFIX = "stage:"


def code_digest(root) -> str:
    """A digest of the engine's and the stages' sources as this process imports them: figures
    taken while other people commit can then be told apart."""
    import hashlib

    digest = hashlib.blake2b(digest_size=8)
    for package in ("orchestrator", "stages"):
        for path in sorted((root / package).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _call(call):
    return call()


def named_frame(name: str) -> types.FunctionType:
    """A function that calls its argument from a frame whose code is named `name` (what
    py-spy and other sampling profilers print for the frame)."""
    code = _call.__code__.replace(co_name=name, co_qualname=name)
    return types.FunctionType(code, {}, name)


def name_stage_frames(scheduler_class) -> None:
    """Run every stage of `scheduler_class` inside a frame named `stage:<stage name>`."""
    original = scheduler_class._stage
    frames: dict[str, types.FunctionType] = {}

    def stage_in_named_frame(self, stage, *args, **kwargs):
        name = stage.name
        frame = frames.get(name)
        if frame is None:
            frame = frames[name] = named_frame(STAGE_FRAME_PREFIX + name)
        return frame(lambda: original(self, stage, *args, **kwargs))

    scheduler_class._stage = stage_in_named_frame


class CpuSampler(threading.Thread):
    """The CPU seconds (user + system) the driver and all processes of the build spend while it
    samples: this process and the descendants of it and of `roots` (less what those that ran
    before had spent then), each process's last sample kept (one that ends between two samples
    loses at most `interval` of its time)."""

    def __init__(self, roots: list[int], interval: float = 0.2) -> None:
        super().__init__(daemon=True)
        import psutil

        self.psutil = psutil
        self.roots = [os.getpid(), *roots]
        self.interval = interval
        self.seen: dict[tuple[int, float], float] = {}
        self.done = threading.Event()
        self.sample()
        self.before = dict(self.seen)

    def run(self) -> None:
        while not self.done.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        psutil = self.psutil
        for root in self.roots:
            try:
                top = psutil.Process(root)
                processes = [top, *top.children(recursive=True)]
            except psutil.Error:
                continue
            for proc in processes:
                try:
                    times = proc.cpu_times()
                    self.seen[(proc.pid, proc.create_time())] = times.user + times.system
                except psutil.Error:
                    continue

    def stop(self) -> dict:
        """Stop sampling; the figures."""
        self.done.set()
        self.join()
        self.sample()
        spent = {key: seconds - self.before.get(key, 0.0) for key, seconds in self.seen.items()}
        me = self.psutil.Process()
        driver = spent.get((me.pid, me.create_time()), 0.0)
        return {"driver_s": driver, "all_s": sum(spent.values()), "processes": len(spent)}


def main() -> None:
    out_path = sys.argv[1]
    flags = sys.argv[2 : sys.argv.index("--")]
    argv = sys.argv[sys.argv.index("--") + 1 :]
    root = __import__("pathlib").Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    code = code_digest(root)
    import orchestrator.core.scheduler as scheduler

    if "--stage-frames" in flags:
        name_stage_frames(scheduler.Scheduler)
    captured: dict = {}
    original = scheduler.run_build

    def run_build(*args, **kwargs):
        began = time.perf_counter()
        captured["imports_s"] = began - STARTED
        sampler = None
        if "--cpu" in flags:
            roots = os.environ.get("BENCH_CPU_ROOTS", "")
            sampler = CpuSampler([int(pid) for pid in roots.split(",") if pid])
            sampler.start()
        try:
            result = original(*args, **kwargs)
        finally:
            if sampler is not None:  # before Ray's workers leave with the driver
                captured["cpu"] = sampler.stop()
        captured["run_build_s"] = time.perf_counter() - began
        captured["result"] = result
        return result

    scheduler.run_build = run_build
    from orchestrator.shell.cli import main as cli_main

    exit_code = 0
    try:
        cli_main(argv)
    except SystemExit as exc:
        exit_code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 3)
    finished = time.perf_counter()
    result = captured.get("result")
    record = {
        "exit_code": exit_code,
        "code": code,
        "in_process_s": finished - STARTED,
        "imports_s": captured.get("imports_s"),
        "run_build_s": captured.get("run_build_s"),
        "ray_imported": "ray" in sys.modules,
        "ray_startup": None,
        "stages": [],
        "driver_peak_rss": None,
        "driver_peak_private": None,
        "workers_peak_rss": None,
        "hashed_files": None,
        "scan_seconds": None,
        "cpu": captured.get("cpu"),
    }
    if result is not None:
        record["ray_startup"] = result.ray_startup
        record["driver_peak_rss"] = result.driver_peak_rss
        record["driver_peak_private"] = result.driver_peak_private
        record["workers_peak_rss"] = result.workers_peak_rss
        record["hashed_files"] = result.hashed_files  # files the scan read again to compare
        record["scan_seconds"] = result.scan_seconds
        record["stages"] = [
            {
                "name": r.name,
                "units": r.units,
                "cached": r.cached,
                "built": r.built,
                "seconds": r.seconds,
                "peak_rss": r.peak_rss,
                "cpu_percent": r.cpu_percent,
            }
            for r in result.reports
        ]
    with open(out_path, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    # Leave the way the console script leaves (exit handlers run: Ray, if started, shuts down).
    from orchestrator.shell.cli import leave

    leave(exit_code)


if __name__ == "__main__":
    main()
