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
from contextlib import AbstractContextManager
from pathlib import Path

import psutil
from common import BenchError, log, orchestrate_command

OUTCOME = re.compile(r"^\d\d:\d\d:\d\d (built|failed a gate|error|internal error|not built) ")
POLL_SECONDS = 0.002
#: A watch using less than this share of a core is taken to be between builds.
IDLE_SHARE = 0.05


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
        """The last build's line once the watch is idle: no line for `quiet` seconds and under
        5 % of a core used over them by it and its workers (a build longer than `quiet`, at
        100,000 resources, prints nothing while it runs)."""
        last = self.outcome()
        while True:
            before = self.cpu_seconds()
            try:
                last = self.outcome(quiet)
            except BenchError:
                if self.cpu_seconds() - before < IDLE_SHARE * quiet:
                    return last

    def cpu_seconds(self) -> float:
        """CPU seconds of the watch and the processes it keeps (custom-code workers)."""
        process = psutil.Process(self.proc.pid)
        total = 0.0
        for each in [process, *process.children(recursive=True)]:
            try:
                times = each.cpu_times()
            except psutil.NoSuchProcess:  # ended since it was listed
                continue
            total += times.user + times.system
        return total

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=120)
        finally:
            self.stderr.close()


def save_to_manifest(watch: WatchProcess, edit: AbstractContextManager, manifest: Path) -> float:
    """Make an edit (entering `edit`: one file saved, or an asset's folder and its Item);
    seconds until the manifest changed. The edit is undone afterwards (its build untimed)."""
    before, signature = manifest.read_bytes(), _signature(manifest)
    started = time.perf_counter()
    with edit:
        deadline = started + watch.timeout
        while True:
            # A stat per poll: the manifest is published by a rename, so a new one is a new
            # signature (its bytes are compared then). Reading its 24 MB every poll, as this did,
            # kept a core busy beside the watch it measures.
            now = _signature(manifest)
            if now != signature:
                signature, seen = now, time.perf_counter() - started
                try:
                    if manifest.read_bytes() != before:
                        seconds = seen
                        break
                except FileNotFoundError:
                    pass
            if time.perf_counter() > deadline:
                raise BenchError("the manifest did not change after the edit")
            time.sleep(POLL_SECONDS)
        log(f"  save → manifest published: {seconds:.3f} s; {watch.settle()}")
    watch.settle()
    return seconds


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def idle_cpu(watch: WatchProcess, seconds: float) -> float:
    """The watch's CPU time over `seconds` with nothing changing, as a share of one core."""
    time.sleep(1.0)
    before, started = watch.cpu_seconds(), time.monotonic()
    time.sleep(seconds)
    used, spent = watch.cpu_seconds() - before, time.monotonic() - started
    return used / spent


def measure(build_file: Path, edits: dict[str, list[AbstractContextManager]], manifest: Path,
            idle_seconds: float, timeout: float) -> tuple[dict[str, list[float]], float, str]:  # fmt: skip
    """(save → manifest seconds of each kind of edit, one per edit given; the idle share of a
    core; the first build's line)."""
    watch = WatchProcess(build_file, timeout)
    try:
        first = watch.settle()
        log(f"  watch started: {first}")
        latencies = {}
        for kind, made in edits.items():
            log(f"  {kind}")
            latencies[kind] = [save_to_manifest(watch, edit, manifest) for edit in made]
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
