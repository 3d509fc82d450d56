"""What holds a custom-code worker in: its session, environment, working folder and limits.

The validating process starts each worker in a session of its own, so that the worker and every
process rule code starts are one process group, killed as one at the timeout and when the run
ends (host.py). The worker gets an environment of its own (`worker_environment`: nothing of the
build's, a CI token included), starts in a working folder of its own (removed when the worker
ends), and sets its resource limits (`rules.limits`) before it runs any rule code: they bind the
processes rule code starts too, whichever session they move to.
"""

from __future__ import annotations

import errno
import os
import resource
import shutil
import signal
import stat
import sys
import tempfile
from dataclasses import dataclass

GIB = 1 << 30
MIB = 1 << 20
DEFAULT_MEMORY = 4 * GIB
#: The least `memory` a build file may set: what a worker needs to start and load a small index
#: (its threads' stacks and allocator arenas count in its address space).
SMALLEST_MEMORY = 256 * MIB
DEFAULT_FILE_SIZE = 256 * MIB
DEFAULT_CPU_SECONDS = 600.0
#: Seconds of CPU past `cpu_seconds` before the kernel kills a worker that ignores SIGXCPU.
CPU_GRACE_SECONDS = 5


@dataclass(frozen=True)
class WorkerLimits:
    """`rules.limits`: what one worker process (and each process it starts) may use; None is no
    limit. `memory` is address space in bytes (a worker holding the index of 100,000 resources
    measured 0.4 GiB); `file_size` the largest file it may write, in bytes; `cpu_seconds` its CPU
    time: a worker that has used half of it is replaced after its call, so every call may use at
    least half."""

    memory: int | None = DEFAULT_MEMORY
    file_size: int | None = DEFAULT_FILE_SIZE
    cpu_seconds: float | None = DEFAULT_CPU_SECONDS

    def as_arguments(self) -> list[str]:
        """For the worker's command line ("0": no limit)."""
        return [str(value or 0) for value in (self.memory, self.file_size, self.cpu_seconds)]

    @classmethod
    def from_arguments(cls, arguments: list[str]) -> WorkerLimits:
        memory, file_size, cpu_seconds = arguments
        return cls(int(memory) or None, int(file_size) or None, float(cpu_seconds) or None)

    def worn_out(self, cpu_used: float) -> bool:
        """Whether a worker that has used `cpu_used` seconds should be replaced after its call."""
        return self.cpu_seconds is not None and cpu_used > self.cpu_seconds / 2

    def named(self, limit: str) -> str:
        """`rules.limits.memory = 4 GiB`: a limit and its value, as a message names it."""
        value = getattr(self, limit)
        if limit == "cpu_seconds":
            return f"rules.limits.cpu_seconds = {value:g} s"
        for unit, size in (("GiB", GIB), ("MiB", MIB)):
            if value >= size and value % size == 0:
                return f"rules.limits.{limit} = {value // size} {unit}"
        return f"rules.limits.{limit} = {value} bytes"


DEFAULT_LIMITS = WorkerLimits()


# -- the validating process's side ---------------------------------------------------------------

#: Variables passed on when set: what the interpreter itself may need to start (a Python installed
#: away from its prefix, or built against libraries outside the system's folders).
PASSED_VARIABLES = ("PYTHONHOME", "LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH")


def worker_environment(folder: str) -> dict[str, str]:
    """A worker's whole environment: this process's import path (a worker imports the same code),
    UTF-8 everywhere, a fixed hash seed (rule code that iterates a set gives the same order every
    run), the working folder as HOME and TMPDIR, the system's default PATH, and PASSED_VARIABLES."""
    paths = [p for p in sys.path if p and os.path.isabs(p) and os.path.exists(p)]
    env = {
        "PYTHONPATH": os.pathsep.join(paths),
        "PYTHONUTF8": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "HOME": folder,
        "TMPDIR": folder,
        "PATH": os.defpath,
    }
    for name in PASSED_VARIABLES:
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def make_working_folder() -> str:
    """A new folder only this user may enter, for one worker."""
    return tempfile.mkdtemp(prefix="orchestrate-rule-code-")


def remove_working_folder(folder: str) -> None:
    """Remove a worker's folder and what rule code left there, read-only folders included."""

    def writable_then_retry(function, path, _exc) -> None:
        parent = os.path.dirname(path)
        try:
            os.chmod(parent, stat.S_IRWXU)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, stat.S_IRWXU)
            function(path)
        except OSError:
            pass  # still there: it is under the system's temporary folder, nothing reads it

    if sys.version_info >= (3, 12):
        shutil.rmtree(folder, onexc=writable_then_retry)
    else:
        shutil.rmtree(folder, onerror=writable_then_retry)


def signal_described(number: int, limits: WorkerLimits) -> str:
    """`killed by signal 24, SIGXCPU: over rules.limits.cpu_seconds = 600 s`."""
    try:
        name = signal.Signals(number).name
    except ValueError:
        return f"killed by signal {number}"
    text = f"killed by signal {number}, {name}"
    limit = {signal.SIGXCPU.value: "cpu_seconds", signal.SIGXFSZ.value: "file_size"}.get(number)
    if limit is not None and getattr(limits, limit) is not None:
        text += f": over {limits.named(limit)}"
    return text


# -- the worker's side ---------------------------------------------------------------------------


def apply_limits(limits: WorkerLimits) -> None:
    """Set the worker's limits, soft and hard, so that rule code cannot raise them again (never
    above a hard limit already in force); and no core files."""
    wanted = {
        resource.RLIMIT_AS: (limits.memory, limits.memory),
        resource.RLIMIT_FSIZE: (limits.file_size, limits.file_size),
        resource.RLIMIT_CORE: (0, 0),
    }
    if limits.cpu_seconds is not None:
        seconds = max(1, round(limits.cpu_seconds))
        wanted[resource.RLIMIT_CPU] = (seconds, seconds + CPU_GRACE_SECONDS)
    for kind, (soft, hard) in wanted.items():
        if soft is None or hard is None:
            continue
        _, hard_now = resource.getrlimit(kind)
        if hard_now != resource.RLIM_INFINITY:
            soft, hard = min(soft, hard_now), min(hard, hard_now)
        resource.setrlimit(kind, (soft, hard))


def limit_hit_by(exc: BaseException) -> str | None:
    """The limit an exception reports reaching, if any (a write past `file_size` fails with EFBIG:
    Python ignores SIGXFSZ)."""
    if isinstance(exc, MemoryError):
        return "memory"
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return "file_size"
    return None
