"""`orchestrate watch` measured from outside, as a user meets it: the process started on the
warm build, one texture's Width saved, and the seconds until the manifest in the output folder
changed (polled every few milliseconds); then the watch left alone for a while and its CPU
time over that while (psutil), as a share of one core.
"""

from __future__ import annotations

import queue
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import psutil
from common import BenchError, change_width, log, orchestrate_command

OUTCOME = re.compile(r"^\d\d:\d\d:\d\d (built|failed a gate|error|internal error|not built) ")
POLL_SECONDS = 0.002


class WatchProcess:
    """`orchestrate watch BUILD_FILE`, its lines read in a thread."""

    def __init__(self, build_file: Path, timeout: float) -> None:
        self.timeout = timeout
        self.stderr = open(build_file.parent / "watch-bench.stderr", "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [*orchestrate_command(), "watch", str(build_file)],
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
        )
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def outcome(self, timeout: float | None = None) -> str:
        """The next build's line."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            left = deadline - time.monotonic()
            try:
                line = self.lines.get(timeout=max(left, 0.01))
            except queue.Empty:
                raise BenchError("the watch printed no build line in time") from None
            if OUTCOME.match(line):
                return line

    def settle(self, quiet: float = 1.0) -> str:
        last = self.outcome()
        while True:
            try:
                last = self.outcome(quiet)
            except BenchError:
                return last

    def cpu_seconds(self) -> float:
        times = psutil.Process(self.proc.pid).cpu_times()
        return times.user + times.system

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=120)
        finally:
            self.stderr.close()


def save_to_manifest(watch: WatchProcess, texture: Path, manifest: Path, k: int) -> float:
    """Save one texture's Width changed by `k`; seconds until the manifest changed. The
    original is saved back afterwards (its build untimed)."""
    original = texture.read_bytes()
    before = manifest.read_bytes()
    changed = change_width(k)(original)
    started = time.perf_counter()
    texture.write_bytes(changed)
    deadline = started + watch.timeout
    while True:
        try:
            if manifest.read_bytes() != before:
                seconds = time.perf_counter() - started
                break
        except FileNotFoundError:
            pass
        if time.perf_counter() > deadline:
            raise BenchError("the manifest did not change after the save")
        time.sleep(POLL_SECONDS)
    log(f"  save → manifest published: {seconds:.3f} s; {watch.settle()}")
    texture.write_bytes(original)
    watch.settle()
    return seconds


def idle_cpu(watch: WatchProcess, seconds: float) -> float:
    """The watch's CPU time over `seconds` with nothing changing, as a share of one core."""
    time.sleep(1.0)
    before, started = watch.cpu_seconds(), time.monotonic()
    time.sleep(seconds)
    used, spent = watch.cpu_seconds() - before, time.monotonic() - started
    return used / spent


def measure(build_file: Path, texture: Path, manifest: Path, repeat: int, idle_seconds: float,
            timeout: float) -> tuple[list[float], float, str]:  # fmt: skip
    """(save → manifest seconds per repeat, idle share of a core, the first build's line)."""
    watch = WatchProcess(build_file, timeout)
    try:
        first = watch.settle()
        log(f"  watch started: {first}")
        latencies = [save_to_manifest(watch, texture, manifest, k + 1) for k in range(repeat)]
        share = idle_cpu(watch, idle_seconds)
        log(f"  idle: {share * 100:.2f} % of a core over {idle_seconds:.0f} s")
    finally:
        code = watch.stop()
    if code != 130:
        raise BenchError(f"the watch stopped with exit {code}, not 130")
    return latencies, share, first


def manifest_of(output: Path) -> Path:
    found = output / "manifest.json"
    if not found.is_file():
        raise BenchError(f"no manifest in {output}")
    return found
