"""`orchestrate watch`: a resident build of one build file, built again on every save.

One build when it starts, then one per batch of changes the operating system reports
(files/watcher.py), each in the same session (core/session.py): the stages, the cache, the
executors and the project's file table stay in memory, and a build looks only at the paths that
moved. Each build ends as `orchestrate run`'s does (its record, the HTML report, the outputs no
longer published removed) and prints one line: what set it off, how it ended, how long it took,
what it published and the problems found.

It stays up through bad input: a broken project file, rule file or build file is an error
printed like `run` prints it, and the next save builds again. A bug is printed with its trace,
and the next build opens the session afresh (reading the state from disk). It holds the output
folder while it runs, so another command refuses at once, naming it and how to stop it (`run
--wait` waits instead). Ctrl-C stops it between two stages' transactions: what it built is
kept, the state is consistent, and it exits 130.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from collections.abc import Collection
from dataclasses import replace
from typing import Any

import click

from ..core.config import Build
from ..core.options import RunOptions
from ..core.scheduler import run_in_session
from ..core.session import Session
from ..errors import OrchestrateError
from ..files.watcher import Batch, FileEvents
from .builds import build_and_record, load, log_switches, output_lock

#: While the project folder is gone, how often to look for it again (seconds).
RETURN_POLL_SECONDS = 0.5


def watch_command(build_file: str, options: RunOptions) -> int:
    """Watch until Ctrl-C (exit 130); errors before the first build are raised."""
    from .present import setup_logging

    log = setup_logging(options.log_format, options.verbose)
    # Ctrl-C is how a watch stops, even when its starter ignored the signal (a shell's `&`).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    watch = Watch(os.path.abspath(build_file), replace(options, progress=False), log)
    try:
        watch.start()
        while True:
            watch.handle(watch.next_batch())
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C may not cut the cleanup
        watch.close()
        say("stopped: what was built is kept, and the next run starts from it")
        return 130
    finally:
        watch.close()


def say(line: str) -> None:
    """A line of the watch's own, at once (its output is often a pipe)."""
    click.echo(line)
    sys.stdout.flush()


class Watch:
    """One watched build file: its build (as it last loaded), the output folder's lock, the
    session builds run in, and the file watches. `session` is None after an error that leaves
    it unusable: the next build opens one afresh. `broken`: why the build file does not load
    now (no build runs until it does)."""

    def __init__(self, build_file: str, options: RunOptions, log: Any) -> None:
        self.build_file = build_file
        self.options = options
        self.log = log
        self.build: Build | None = None
        self.broken: str | None = None
        self.lock: Any = None
        self.session: Session | None = None
        self.events: FileEvents | None = None
        self.outside: frozenset[str] = frozenset({build_file})

    # -- starting, and starting again -------------------------------------------------------
    def start(self) -> None:
        """Load the build file, take the output folder, watch, and build once."""
        build = self._load()
        self._take_output(build)
        self._watch()
        say(
            f"watching {build.project_root} (build file {self.build_file}); "
            f"Ctrl-C stops (or kill -INT {os.getpid()})"
        )
        self._build(None, "started: every file looked at")

    def _load(self) -> Build:
        build = load(self.build_file, self.options.executor)
        log_switches(build, self.log)
        self.options = replace(
            self.options,
            executor=build.config.executor.kind,  # type: ignore[attr-defined]
        )
        return build

    def _take_output(self, build: Build) -> None:
        """Hold the output folder of `build` (let go of the one held, if another)."""
        if self.build is not None and self.build.output_dir == build.output_dir:
            self.build = build
            return
        pid = os.getpid()
        lock = output_lock(
            build,
            "orchestrate watch",
            stop_hint=f"stop it with Ctrl-C where it runs (or kill -INT {pid})",
        )
        lock.__enter__()  # held until the watch stops (or the build file names another)
        if self.lock is not None:
            self.lock.__exit__(None, None, None)
        self.lock, self.build = lock, build

    def _watch(self) -> None:
        """Watch the project and the files outside it the build depends on, afresh."""
        assert self.build is not None
        if self.events is not None:
            self.events.close()
            self.events = None
        build = self.build
        skip = (str(build.output_dir), str(build.cache_dir))
        self.events = FileEvents(str(build.project_root), skip, self.outside)

    def _open_session(self) -> Session:
        if self.session is None:
            assert self.build is not None
            session = Session(self.build, self.options, self.log, resident=True)
            session.__enter__()
            self.session = session
        return self.session

    def _drop_session(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            session.__exit__(None, None, None)

    def close(self) -> None:
        try:
            if self.events is not None:
                self.events.close()
                self.events = None
            self._drop_session()
        finally:
            if self.lock is not None:
                self.lock.__exit__(None, None, None)
                self.lock = None

    # -- the loop ---------------------------------------------------------------------------
    def next_batch(self) -> Batch:
        assert self.events is not None
        return self.events.next()

    def handle(self, batch: Batch) -> None:
        """Build for a batch of changes: looking at only the paths it names when it can."""
        if batch.lost:
            self._rewatch(batch.lost)
        if self.build_file in batch.outside:
            self._reload()
        elif self.broken and batch:
            say(f"{clock()} not built ({cause(batch)}): {self.broken}")
        elif batch.rescan:
            self._build(None, f"every file looked at: {batch.rescan}")
        elif batch:
            self._build(batch.changed, cause(batch))

    def _rewatch(self, why: str) -> None:
        """The watch was lost: wait for the project folder (if it went), then watch again."""
        assert self.build is not None
        root = str(self.build.project_root)
        if not os.path.isdir(root):
            say(f"{clock()} {why}: waiting for it to come back")
            while not os.path.isdir(root):
                time.sleep(RETURN_POLL_SECONDS)
        self._drop_session()  # its file table is of the folder that was
        self._watch()

    def _reload(self) -> None:
        """The build file was saved: load it again; a broken one is reported, and the watch
        waits for the next save of it. A good one starts everything afresh."""
        why = "the build file changed"
        timer = time.perf_counter()
        try:
            build = self._load()
            self._take_output(build)
        except OrchestrateError as error:
            self._drop_session()
            self.broken = f"the build file does not load: {error.describe()}"
            seconds = time.perf_counter() - timer
            say(f"{clock()} error in {seconds:.2f} s ({why}): {error.describe()}")
            return
        self.broken = None
        self._drop_session()
        self._watch()
        self._build(None, f"{why}: every file looked at")

    def _build(self, changed: Collection[str] | None, why: str) -> None:
        """One build in the session (opened afresh if it has none) and its line."""
        assert self.build is not None
        build, options = self.build, self.options
        started, timer = time.time(), time.perf_counter()
        try:
            session = self._open_session()
            recorded = build_and_record(
                build,
                options,
                self.log,
                started,
                lambda judge: run_in_session(session, changed, judge),
            )
        except OrchestrateError as error:
            seconds = time.perf_counter() - timer
            first, *rest = error.describe().splitlines() or [""]
            say(f"{clock()} error in {seconds:.2f} s ({why}): {first}")
            for line in rest:
                say(f"  {line}")
            if error.exit_code == 3:  # a bug or damage not mended: open the session afresh
                self._drop_session()
            return
        except Exception as exc:  # a bug: show where, keep watching with a fresh session
            traceback.print_exc()
            seconds = time.perf_counter() - timer
            say(
                f"{clock()} internal error in {seconds:.2f} s ({why}): {type(exc).__name__}: "
                f"{exc} (a bug in orchestrate: please report it with the trace above); "
                "the next build starts afresh"
            )
            self._drop_session()
            return
        seconds = time.perf_counter() - timer
        say(outcome_line(recorded, seconds, why))
        if not recorded.result.outside_files <= self.outside:
            self.outside |= recorded.result.outside_files
            assert self.events is not None
            self.events.watch_more(self.outside)


def clock() -> str:
    return time.strftime("%H:%M:%S")


def cause(batch: Batch) -> str:
    """What set a build off: the paths that moved (the first few)."""
    paths = sorted(batch.changed) + sorted(batch.outside)
    return f"{len(paths)} changed: {few(paths)}"


def few(items: list[str], shown: int = 3) -> str:
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


def outcome_line(recorded: Any, seconds: float, why: str) -> str:
    """`HH:MM:SS built in 0.41 s (1 changed: a.xml): published 2 written (…), 840 unchanged,
    0 removed; no problems` — and `failed a gate` instead of `built` when a gate said no."""
    result = recorded.result
    verdict, _, problems = recorded.conclusion
    written = sorted(result.context.rewritten)
    unchanged = len(result.context.published) - len(written)
    outcome = "built" if verdict.exit_code == 0 else "failed a gate"
    shown = f" ({few(written)})" if written else ""
    published = (
        f"{len(written)} written{shown}, {unchanged} unchanged, {len(recorded.pruned)} removed"
    )
    kinds: dict[str, int] = {}
    for problem in problems:
        kinds[problem.kind] = kinds.get(problem.kind, 0) + 1
    found = ", ".join(f"{count} {kind}" for kind, count in kinds.items()) or "none"
    gates = "".join(f"\n  gate: {reason}" for reason in verdict.reasons)
    return f"{clock()} {outcome} in {seconds:.2f} s ({why}): published {published}; problems: {found}{gates}"
