"""Text summaries of py-spy profiles: top functions by inclusive and self time, and time by stage.

py-spy writes collapsed stacks (`--format raw`): one line per distinct stack, frames from the
outermost, `;`-separated, then the number of samples. With `--threads --subprocesses` a stack
starts with its process (`process PID:"command line"`) and thread (`thread (TID): NAME`) frames;
with `--function` a frame is `function (file:first line)`. benchmarks/runner.py `--stage-frames`
runs each stage inside a frame named `stage:<name>`, which is how a sample is put in a stage.

Time is counted on the driver's main thread with idle samples included (`--idle`), so its
samples add up to the run's wall time: waiting for a worker, the disk or SQLite counts where it
happens. Other threads and child processes are listed apart.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from runner import STAGE_FRAME_PREFIX

MAIN_THREAD = "MainThread"
COUNT = re.compile(r" (\d+)$")
PROCESS = re.compile(r'process (\d+):"')
FRAME = re.compile(r"^(?P<function>.*) \((?P<where>[^()]*)\)$")

# Parts of a run outside the stages, by the first frame (outermost first) that names them.
PARTS = (
    ("Scheduler._scan", "scan: list the tree, compare signatures"),
    ("FileTableStore.save", "save the file table"),
    ("_find_and_load", "imports (outside stages)"),
    ("run_build", "engine outside stages (state, locks, executors)"),
    ("record_run", "run record and reports"),
    ("leave", "exit handlers"),
)
OTHER = "other: interpreter start, command line, summary"
# Frames of the harness and of click, on nearly every stack: left out of the top lists.
PLUMBING = ("runner.py", "click/")


@dataclass
class Stack:
    process: str  # the process's frame ("process PID:..."), the outermost one for the driver
    child: bool  # sampled in a child process of the driver
    thread: str  # MAIN_THREAD, another thread's name, or "thread (id)"
    frames: tuple[str, ...]  # Python frames, outermost first
    count: int


@dataclass
class Summary:
    rate: int
    main: list[Stack] = field(default_factory=list)  # the driver's main thread
    others: dict[str, list[Stack]] = field(default_factory=dict)  # other threads and processes

    @property
    def main_samples(self) -> int:
        return sum(s.count for s in self.main)


def _split(line: str) -> list[str]:
    """The `;`-separated frames of a stack; a process frame's quoted command line may hold `;`."""
    frames, at = [], 0
    while at < len(line):
        if PROCESS.match(line, at):
            end = min(
                (i for i in (line.find('";thread', at), line.find('";process ', at)) if i != -1),
                default=len(line) - 1,
            )
            frames.append(line[at : end + 1])
            at = end + 2
            continue
        end = line.find(";", at)
        end = len(line) if end == -1 else end
        frames.append(line[at:end])
        at = end + 1
    return frames


def parse_collapsed(text: str) -> list[Stack]:
    """The stacks of a `py-spy record --format raw --threads --subprocesses` file."""
    stacks, pending = [], ""
    for line in text.splitlines():
        pending = f"{pending}\n{line}" if pending else line
        match = COUNT.search(pending)
        if match is None:
            continue  # a command line with a newline in it: the stack goes on
        body, pending = pending[: match.start()], ""
        frames = _split(body)
        processes = [f for f in frames if PROCESS.match(f)]
        threads = [f for f in frames if f.startswith("thread (")]
        thread = threads[-1] if threads else ""
        name = thread.split("): ", 1)[1] if "): " in thread else thread
        pid = PROCESS.match(processes[-1]).group(1) if processes else None
        if thread.startswith(f"thread ({pid})"):
            name = MAIN_THREAD  # its id is the process id (named only once threading knows it)
        python = tuple(f for f in frames if f and not PROCESS.match(f) and f not in threads)
        stacks.append(
            Stack(
                processes[-1] if processes else "",
                len(processes) > 1,
                name,
                python,
                int(match.group(1)),
            )
        )
    return stacks


def summarise(stacks: list[Stack], rate: int) -> Summary:
    """The driver's main thread apart from the rest (each other thread or process by name)."""
    summary = Summary(rate)
    for stack in stacks:
        if not stack.child and stack.thread == MAIN_THREAD:
            summary.main.append(stack)
        else:
            where = f"{'child ' + stack.process if stack.child else 'driver'} thread {stack.thread}"
            summary.others.setdefault(where, []).append(stack)
    return summary


def function_of(frame: str) -> str:
    return FRAME.sub(r"\g<function>", frame)


def is_plumbing(frame: str) -> bool:
    match = FRAME.match(frame)
    return match is not None and match.group("where").startswith(PLUMBING)


def part_of(frames: tuple[str, ...]) -> str:
    """The stage (or the part of the run outside stages) a stack belongs to."""
    for frame in frames:
        function = function_of(frame)
        if function.startswith(STAGE_FRAME_PREFIX):
            return "stage " + function[len(STAGE_FRAME_PREFIX) :]
    functions = [function_of(frame) for frame in frames]
    for marker, part in PARTS:
        if marker in functions:
            return part
    return OTHER


def by_part(stacks: list[Stack]) -> Counter:
    parts: Counter = Counter()
    for stack in stacks:
        parts[part_of(stack.frames)] += stack.count
    return parts


def inclusive(stacks: list[Stack]) -> Counter:
    """Samples in which each frame is on the stack (once per sample, recursion or not)."""
    counts: Counter = Counter()
    for stack in stacks:
        for frame in set(stack.frames):
            counts[frame] += stack.count
    return counts


def self_time(stacks: list[Stack]) -> Counter:
    counts: Counter = Counter()
    for stack in stacks:
        counts[stack.frames[-1] if stack.frames else "(no Python frame)"] += stack.count
    return counts


def _seconds(samples: int, rate: int) -> str:
    return f"{samples / rate:8.2f}"


def _table(counts: Counter, total: int, rate: int, top: int, skip=frozenset()) -> list[str]:
    lines = []
    for frame, samples in counts.most_common():
        if frame in skip or is_plumbing(frame):
            continue
        lines.append(f"{_seconds(samples, rate)} s {100 * samples / total:5.1f} %  {frame}")
        if len(lines) == top:
            break
    return lines


def render(summary: Summary, header: list[str], top: int = 40, per_part: int = 10) -> str:
    """The text summary: header lines, time by stage, top functions (inclusive, then self), the
    heaviest functions of each big stage, then the other threads and processes."""
    rate, main = summary.rate, summary.main
    total = max(1, summary.main_samples)
    out = list(header)
    out += [
        "",
        f"driver main thread: {summary.main_samples} samples at {rate} Hz "
        f"= {summary.main_samples / rate:.2f} s (idle included)",
        "",
        "== time by stage (driver main thread) ==",
    ]
    parts = by_part(main)
    out += _table(parts, total, rate, len(parts))
    everywhere = {frame for frame, n in inclusive(main).items() if n >= 0.98 * total}
    out += [
        "",
        f"== top {top} functions by inclusive time (driver main thread; frames on every stack "
        "and those of benchmarks/runner.py and click left out) ==",
    ]
    out += _table(inclusive(main), total, rate, top, everywhere)
    out += ["", f"== top {top // 2} functions by self time (driver main thread) =="]
    out += _table(self_time(main), total, rate, top // 2)
    for part, samples in parts.most_common():
        if samples < 0.03 * total or part == OTHER:
            continue
        mine = [s for s in main if part_of(s.frames) == part]
        counts = inclusive(mine)
        wrappers = {frame for frame, n in counts.items() if n >= 0.98 * samples}
        out += [
            "",
            f"== {part}: {samples / rate:.2f} s; its top {per_part} functions (inclusive, "
            "frames on all its stacks left out) ==",
        ]
        out += _table(counts, total, rate, per_part, wrappers)
    if summary.others:
        out += ["", "== other threads and processes (idle samples included) =="]
        others = sorted(summary.others.items(), key=lambda kv: -sum(s.count for s in kv[1]))
        for where, stacks in others:
            samples = sum(s.count for s in stacks)
            out.append(f"{where}: {samples} samples = {samples / rate:.2f} s")
            out += ["    " + line for line in _table(inclusive(stacks), samples, rate, 5)]
    return "\n".join(out) + "\n"
