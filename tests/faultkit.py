"""Kill points for tests/test_faults.py: every path on which a build writes, hooked in a child
`orchestrate` process.

`prelude(point, nth)` is Python for `buildkit.run_cli(prelude=...)`: the child counts the writes
on every path and prints them at exit (`point=None`, read back with `counted`), or is killed with SIGKILL at the `nth`
write on one path, after printing `KILLED <point> #<n>: <what>` on stderr, so a test knows the
kill happened at that write and not elsewhere. The writes are hooked where the engine makes
them (a pack append, a rename, a SQLite COMMIT), and a kill "mid-write" first leaves what a
process killed there would leave (half a temporary file, half an appended line).
"""

from __future__ import annotations

import atexit
import contextvars
import functools
import json
import os
import signal
import sqlite3
from pathlib import Path
from typing import NamedTuple

#: Small blobs go to packs, larger ones to files of their own; lowered in the child so that a
#: small generated project has blob files too.
LARGE_BLOB_BYTES = 16 * 1024

WRITE_PATHS = {
    "pack-buffer": "a small blob appended to the run's pack, still in the write buffer",
    "pack-flush": "a pack's bytes flushed, its index lines not appended yet",
    "pack-index-torn": "half of a batch of pack index lines appended",
    "blob-file": "a large blob's temporary file half written, before its rename",
    "actions-commit": "the action cache's transaction written, before its COMMIT",
    "actions-committed": "the action cache's transaction just committed",
    "state-file-table": "the build state's file table transaction, before its COMMIT",
    "state-stage": "a stage's transaction (units, values, publications, record), before COMMIT",
    "output": "an output file's temporary file half written, before its rename",
    "output-renamed": "an output file renamed into place, its signature not recorded yet",
    "ledger-torn": "half a line appended to the list of published files",
    "run-record": "the run record's temporary file half written (the last one moved aside)",
    "report-page": "a file of the HTML report half written, before its rename",
}

_counts = dict.fromkeys(WRITE_PATHS, 0)
_stage_commits: list[str] = []
_state_writer: contextvars.ContextVar[str] = contextvars.ContextVar("state_writer", default="")


class _Plan:
    point: str | None = None
    nth = 0


def prelude(point: str | None, nth: int = 0) -> str:
    """Python run in the child before `orchestrate`: count writes, or kill at one."""
    return f"import faultkit\nfaultkit.install({point!r}, {nth})\n"


def install(point: str | None, nth: int) -> None:
    """Hook every write path; with `point`, kill the process at its `nth` write."""
    if point is not None and point not in WRITE_PATHS:
        raise ValueError(f"unknown write path {point!r}")
    _Plan.point, _Plan.nth = point, nth
    import orchestrator.cache
    import orchestrator.core.context
    import orchestrator.core.scheduler
    import orchestrator.shell.runrecord
    import stages.reports.html
    from orchestrator.cache import blobs
    from orchestrator.cache.stores import FileTableStore
    from orchestrator.files.outputs import Ledger

    orchestrator.cache.LARGE_BLOB_BYTES = LARGE_BLOB_BYTES  # type: ignore[attr-defined]
    blobs.BlobPacks.put = _buffered(blobs.BlobPacks.put)  # type: ignore[method-assign]
    blobs.append_lines = _appending(blobs.append_lines)
    blobs.atomic_write = _half_written(blobs.atomic_write, "blob-file")  # keep_file
    orchestrator.core.context.atomic_write = _publishing(orchestrator.core.context.atomic_write)
    orchestrator.shell.runrecord.atomic_write = _half_written(
        orchestrator.shell.runrecord.atomic_write, "run-record"
    )
    stages.reports.html.atomic_write = _half_written(  # type: ignore[attr-defined]
        stages.reports.html.atomic_write, "report-page"
    )
    Ledger.record = _ledger(Ledger.record)  # type: ignore[method-assign]
    FileTableStore.save = _labelled(  # type: ignore[method-assign]
        FileTableStore.save, lambda *a, **k: "state-file-table"
    )
    orchestrator.core.scheduler.store_stage = _labelled(  # type: ignore[attr-defined]
        orchestrator.core.scheduler.store_stage, lambda stage, *a, **k: f"state-stage {stage.name}"
    )
    sqlite3.connect = functools.partial(sqlite3.connect, factory=_WatchedConnection)  # type: ignore[assignment]
    if point is None:
        atexit.register(_print_counts)


class Counted(NamedTuple):
    writes: dict[str, int]  # write path → how many writes a build made on it
    stage_commits: list[str]  # the stages, in the order their transactions committed


def counted(stdout: str) -> Counted:
    """What a counting child printed."""
    found = json.loads(stdout.rsplit("WRITES ", 1)[1].splitlines()[0])
    return Counted(found["writes"], found["stage_commits"])


def _print_counts() -> None:
    print("WRITES " + json.dumps({"writes": _counts, "stage_commits": _stage_commits}), flush=True)


def killed_at(stderr: str) -> str:
    """The `KILLED …` line a killed child printed ('' if none)."""
    return next((line for line in stderr.splitlines() if line.startswith("KILLED ")), "")


def _tick(point: str) -> bool:
    """Count a write on `point`; True when it is the one to kill at."""
    _counts[point] += 1
    return _Plan.point == point and _counts[point] == _Plan.nth


def _die(point: str, what: str) -> None:
    os.write(2, f"KILLED {point} #{_counts[point]}: {what}\n".encode())
    os.kill(os.getpid(), signal.SIGKILL)


def _half_file(target: str | os.PathLike, data: bytes) -> None:
    """What a process killed in the middle of writing `target`'s temporary file leaves."""
    from orchestrator.cache import TEMP_PREFIX

    tmp = Path(target).parent / f"{TEMP_PREFIX}killed-{os.getpid()}"
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_bytes(bytes(data)[: len(data) // 2])


def _half_append(path: str | os.PathLike, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, bytes(data)[: max(1, len(data) // 2)])
    finally:
        os.close(fd)


def _buffered(put):
    @functools.wraps(put)
    def wrapper(self, digest, data):
        put(self, digest, data)
        if _tick("pack-buffer"):
            _die("pack-buffer", f"blob {digest[:12]} ({len(data)} bytes) in {self.folder}")

    return wrapper


def _appending(append_lines):
    @functools.wraps(append_lines)
    def wrapper(folder, relpath, data):
        path = folder.path(relpath)
        flushed, torn = _tick("pack-flush"), _tick("pack-index-torn")
        lines = data.count(b"\n")
        if flushed:
            _die("pack-flush", f"{lines} index lines not appended to {path}")
        if torn:
            _half_append(path, data)
            _die("pack-index-torn", f"half of {lines} lines appended to {path}")
        return append_lines(folder, relpath, data)

    return wrapper


def _half_written(atomic_write, point: str):
    @functools.wraps(atomic_write)
    def wrapper(folder, relpath, data):
        path = folder.path(relpath)
        if _tick(point):
            _half_file(path, data)
            _die(point, str(path))
        return atomic_write(folder, relpath, data)

    return wrapper


def _publishing(atomic_write):
    @functools.wraps(atomic_write)
    def wrapper(folder, relpath, data):
        path = folder.path(relpath)
        if _tick("output"):
            _half_file(path, data)
            _die("output", str(path))
        atomic_write(folder, relpath, data)
        if _tick("output-renamed"):
            _die("output-renamed", str(path))

    return wrapper


def _ledger(record):
    @functools.wraps(record)
    def wrapper(self, relpath):
        if relpath not in self.entries() and _tick("ledger-torn"):
            _half_append(self.path, (relpath + "\n").encode("utf-8"))
            _die("ledger-torn", relpath)
        return record(self, relpath)

    return wrapper


def _labelled(function, label):
    """Note which part of the engine writes the build state while `function` runs."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        token = _state_writer.set(label(*args, **kwargs))
        try:
            return function(*args, **kwargs)
        finally:
            _state_writer.reset(token)

    return wrapper


class _WatchedConnection(sqlite3.Connection):
    """A connection that counts (and can be killed at) the COMMITs of the cache's databases."""

    def __init__(self, database, *args, **kwargs) -> None:
        super().__init__(database, *args, **kwargs)
        self.file = str(database)

    def execute(self, sql, *args):  # type: ignore[override]
        if sql.strip().upper() != "COMMIT":
            return super().execute(sql, *args)
        if self.file.endswith("actions.sqlite"):
            if _tick("actions-commit"):
                _die("actions-commit", self.file)
            cursor = super().execute(sql, *args)
            if _tick("actions-committed"):
                _die("actions-committed", self.file)
            return cursor
        writer = _state_writer.get()
        point, _, stage = writer.partition(" ")
        if stage:
            _stage_commits.append(stage)
        if point in WRITE_PATHS and _tick(point):
            _die(point, f"{writer} in {self.file}")
        return super().execute(sql, *args)
