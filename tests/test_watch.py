"""`orchestrate watch` as a user runs it: a process started on a generated project, driven by
editing its files while it runs, read line by line.

The incremental law through a live watch (every settled state publishes what a clean build of
the same files publishes), bad input reported and picked up when fixed (a rule file outside the
project, the build file itself), the output folder held (a concurrent `run` refuses at once or
waits with --wait), Ctrl-C (exit 130, and the next run skips every stage), and an idle watch
costing next to no CPU.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from buildkit import cli_env, content_reports, make_project, published, run_cli
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from lawkit import build as clean_build
from test_incremental_laws import MessiahChanges

pytestmark = pytest.mark.timeout(600)

OUTCOME = re.compile(r"^\d\d:\d\d:\d\d (built|failed a gate|error|internal error|not built) ")
CODE = {0: "built", 1: "failed a gate"}  # an exit code as a watch's line says it


class LiveWatch:
    """`orchestrate watch BUILD_FILE` in a process of its own; its stdout read line by line."""

    def __init__(self, build_file: Path, *args: str) -> None:
        script = "from orchestrator.shell.cli import main\nmain()\n"
        self.stderr = open(build_file.parent / "watch.stderr", "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-c", script, "watch", str(build_file), "--executor", "local", *args],
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            env=cli_env(),
        )
        self.lines: queue.Queue = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def line(self, timeout: float = 120) -> str:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line from the watch in {timeout} s: {self.seen}") from None
        self.seen.append(line)
        return line

    def outcome(self, timeout: float = 120) -> str:
        """The next build's line (its gates' lines and others skipped)."""
        while True:
            line = self.line(timeout)
            if OUTCOME.match(line):
                return line

    def settle(self, quiet: float = 1.5) -> str:
        """The last build's line once the watch has been quiet for `quiet` seconds (a save
        may take more than one batch)."""
        last = self.outcome()
        while True:
            try:
                line = self.line(quiet)
            except AssertionError:
                return last
            if OUTCOME.match(line):
                last = line

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=60)
        finally:
            self.stderr.close()


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A generated project, built once by a watch that stays up for the module's tests that
    share it (each leaves the files as it found them)."""
    build_file = make_project(tmp_path_factory.mktemp("watched"), assets=120)
    watch = LiveWatch(build_file)
    first = watch.outcome()
    assert "started" in first, watch.seen
    yield build_file, watch
    assert watch.stop() == 130


def textures(build_file: Path) -> list[Path]:
    return sorted((build_file.parent / "project").rglob("texture.xml"))[:3]


def save(path: Path, data: bytes) -> None:
    """Save as editors do: a new file renamed over the old one."""
    temporary = path.with_name(path.name + ".~saving")
    temporary.write_bytes(data)
    os.replace(temporary, path)


EDITS = st.lists(
    st.tuples(
        st.sampled_from(["width", "cosmetic", "half-saved", "restore", "stray"]), st.integers(0, 2)
    ),
    min_size=1,
    max_size=3,
)


@settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(edits=EDITS)
def test_every_settled_state_is_a_clean_build(project, tmp_path_factory, edits):
    """Edits saved while the watch runs: once it settles, its output folder holds what a clean
    build of the same files publishes, byte for byte, with the same content reports and the
    same outcome."""
    build_file, watch = project
    targets = textures(build_file)
    originals = {path: path.read_bytes() for path in targets}
    stray = build_file.parent / "project" / "Levels" / "notes 说明.txt"
    try:
        for kind, which in edits:
            path = targets[which]
            data = path.read_bytes()
            if kind == "width":
                width = int(re.search(rb"<Width>(\d+)</Width>", data).group(1))
                save(path, data.replace(b"<Width>%d<" % width, b"<Width>%d<" % (width + 1), 1))
            elif kind == "cosmetic":
                save(path, data.replace(b"\n  <", b"\n\n    <", 1))
            elif kind == "half-saved":
                path.write_bytes(data[: len(data) // 2])
            elif kind == "restore":
                save(path, originals[path])
            elif stray.exists():
                stray.unlink()
            else:
                stray.write_text(f"note {which}\n", encoding="utf-8")
            line = watch.settle()
            clean = clean_build(build_file, output="clean/out", cache="clean/cache")
            assert line.split(" ")[1:3] == CODE.get(clean.exit_code, "error").split(" ")[:2]
            out = build_file.parent / "build" / "out"
            assert published(out) == clean.outputs, line
            assert content_reports(out) == clean.reports, line
    finally:
        restored = [path for path, data in originals.items() if path.read_bytes() != data]
        for path in restored:
            save(path, originals[path])
        if stray.exists():
            stray.unlink()
            restored.append(stray)
        if restored:
            watch.settle()


def test_a_broken_rule_file_is_reported_then_picked_up(project):
    """A rule file outside the project saved broken: the build's error is printed and the watch
    stays up; saved fixed, it builds again."""
    build_file, watch = project
    rules = build_file.parent / "rules.yaml"
    good = rules.read_bytes()
    save(rules, b"- name: [unclosed\n")
    try:
        line = watch.settle()
        assert " error " in line and "rules.yaml" in line, line
        assert run_record(build_file)["exit_code"] == 2  # the report says so too
    finally:
        save(rules, good)
    line = watch.settle()
    assert line.split(" ")[1] in ("built", "failed"), line
    assert run_record(build_file)["exit_code"] in (0, 1)


def run_record(build_file: Path) -> dict:
    return json.loads((build_file.parent / "build" / "out" / "reports" / "run.json").read_text())


def test_the_project_folder_moved_away_and_back_is_watched_again(project):
    """The project folder goes (its watch dies with it) and comes back: the watch waits for
    it, watches it anew and looks at every file; a save after that is seen."""
    build_file, watch = project
    root = build_file.parent / "project"
    root.rename(build_file.parent / "away")
    try:
        assert "waiting for it to come back" in watch.line(), watch.seen
    finally:
        (build_file.parent / "away").rename(root)
    line = watch.settle()
    assert "every file looked at: the watch was lost" in line, line
    texture = textures(build_file)[0]
    save(texture, texture.read_bytes())
    assert "changed: " in watch.settle(), watch.seen


def test_a_broken_build_file_waits_for_its_fix(project):
    """The build file saved broken: reported, no build until it loads again, then a build that
    looks at every file."""
    build_file, watch = project
    good = build_file.read_bytes()
    save(build_file, good + b"\nnot_a_section: [\n")
    try:
        line = watch.settle()
        assert " error in " in line and "build.yaml:" in line, line
        texture = textures(build_file)[0]
        save(texture, texture.read_bytes())
        assert "not built" in watch.settle(), watch.seen
    finally:
        save(build_file, good)
    line = watch.settle()
    assert "the build file changed" in line and line.split(" ")[1] in ("built", "failed"), line


def test_a_concurrent_run_refuses_at_once_naming_the_watch(project):
    """`orchestrate run` on the output folder the watch holds: exit 4 at once, one line naming
    the watching process and how to stop it; with --wait SECONDS it waits that long first."""
    build_file, watch = project
    started = time.monotonic()
    refused = run_cli("run", str(build_file), "--executor", "local")
    assert refused.returncode == 4
    error = refused.stderr.strip().splitlines()[-1]
    assert f"orchestrate watch (process {watch.proc.pid})" in error
    assert "Ctrl-C" in error and "--wait" in error
    assert time.monotonic() - started < 30
    started = time.monotonic()
    waited = run_cli("run", str(build_file), "--executor", "local", "--wait", "1")
    assert waited.returncode == 4
    assert "waiting for the output folder" in waited.stderr
    assert time.monotonic() - started >= 1


def test_ctrl_c_exits_130_and_the_next_run_skips_every_stage(tmp_path):
    """Ctrl-C stops the watch with exit 130; a run waiting with --wait then goes ahead, and
    finds nothing to do: every stage skipped."""
    build_file = make_project(tmp_path, assets=120)
    watch = LiveWatch(build_file)
    watch.outcome()
    texture = textures(build_file)[0]
    save(texture, texture.read_bytes().replace(b"<Width>", b"<Width>1", 1))
    watch.settle()
    waiting = subprocess.Popen(
        [sys.executable, "-c", "from orchestrator.shell.cli import main\nmain()\n", "run",
         str(build_file), "--executor", "local", "--wait"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(),
    )  # fmt: skip
    time.sleep(3)
    assert waiting.poll() is None  # waits while the watch holds the output folder
    assert watch.stop() == 130
    _, err = waiting.communicate(timeout=300)
    assert waiting.returncode in (0, 1), err
    record = run_record(build_file)
    assert all(stage["skipped"] for stage in record["stages"]), record["stages"]


@pytest.mark.parametrize("delay", [0.1, 0.25, 0.5])
def test_ctrl_c_during_a_build_leaves_a_consistent_state(tmp_path, delay):
    """Ctrl-C at some point of a build after a save (or just before it): exit 130, and the
    next `run` publishes what a clean build of the same files publishes."""
    build_file = make_project(tmp_path, assets=120)
    watch = LiveWatch(build_file)
    watch.outcome()
    texture = textures(build_file)[0]
    save(texture, texture.read_bytes().replace(b"<Width>", b"<Width>1", 1))
    time.sleep(delay)
    assert watch.stop() == 130
    assert run_cli("run", str(build_file), "--executor", "local").returncode in (0, 1)
    clean = clean_build(build_file, output="clean/out", cache="clean/cache")
    assert published(build_file.parent / "build" / "out") == clean.outputs


def test_an_idle_watch_costs_next_to_no_cpu(project):
    """Nothing changing: the watch's process uses under 5 % of a core (measured: ~0.1 %)."""
    _, watch = project
    process = psutil.Process(watch.proc.pid)
    time.sleep(1)
    before, started = process.cpu_times(), time.monotonic()
    time.sleep(4)
    after, seconds = process.cpu_times(), time.monotonic() - started
    used = (after.user + after.system) - (before.user + before.system)
    assert used / seconds < 0.05, used


def test_a_bug_is_shown_with_its_trace_and_the_next_build_starts_afresh(
    tmp_path, monkeypatch, capsys
):
    """A stage that fails with a bug: its trace and an `internal error` line, the session let
    go; the next save builds in a session opened afresh."""
    import stages.cook
    from orchestrator.core.options import RunOptions
    from orchestrator.files.watcher import Batch
    from orchestrator.shell.present import setup_logging
    from orchestrator.shell.watch import Watch

    build_file = make_project(tmp_path, assets=120)
    watch = Watch(str(build_file), RunOptions(executor="local", progress=False), setup_logging())
    try:
        watch.start()
        texture = textures(build_file)[0]
        rel = texture.relative_to(build_file.parent / "project").as_posix()
        save(texture, texture.read_bytes().replace(b"<Width>", b"<Width>1", 1))

        def broken(*args):
            raise RuntimeError("a bug in a stage")

        monkeypatch.setattr(stages.cook, "finish", broken)
        watch.handle(Batch(changed=frozenset({rel})))
        out, err = capsys.readouterr()
        assert "internal error" in out and "a bug in a stage" in out
        assert "Traceback" in err and watch.session is None
        monkeypatch.undo()
        watch.handle(Batch(changed=frozenset({rel})))
        out, _ = capsys.readouterr()
        assert re.search(r" (built|failed a gate) in ", out), out
    finally:
        watch.close()


def looks(root: Path) -> dict[str, tuple[int, int]]:
    """Every file's and folder's (size, mtime) under `root`: whether an edit changed anything."""
    return {
        str(path): (stat.st_size, stat.st_mtime_ns)
        for path in root.rglob("*")
        for stat in [path.stat()]
    }


#: The index edits of issue 29, as tests/test_incremental_laws.py makes them through `run`.
INDEX_EDITS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "edit_repository",  # an Item renamed, a Deps added or dropped, its Type changed
                "add_asset",
                "delete_asset",
                "move_asset",
                "break_repository",  # cut short, then mended by the next one
            ]
        ),
        st.integers(0, 999),
        st.integers(0, 999),
    ),
    min_size=2,
    max_size=4,
)


@settings(
    max_examples=3,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: each step is a build
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(edits=INDEX_EDITS)
def test_index_edits_through_a_live_watch_equal_clean_builds(tmp_path_factory, edits):
    """Index edits (rename, add, delete, move between packages, Deps, a repository broken and
    mended) made while the watch runs: each settled state's outcome is a clean build's, and
    when that build publishes, the watch's output folder holds the same files and content
    reports, byte for byte."""
    base = tmp_path_factory.mktemp("watched-index")
    build_file = make_project(base, assets=120)
    changes = MessiahChanges(base)
    watch = LiveWatch(build_file)
    try:
        assert "started" in watch.outcome(), watch.seen
        done: list[str] = []
        for kind, a, b in edits:
            before = looks(changes.root)
            done.append(changes.apply(kind, a, b))
            if looks(changes.root) == before:  # nothing to apply it to (its repository broken)
                continue
            line = watch.settle()
            clean = clean_build(build_file, output="clean/out", cache="clean/cache")
            story = "; ".join(done)
            said = OUTCOME.match(line)
            assert said is not None, (story, line)
            assert said.group(1) == CODE.get(clean.exit_code, "error"), (story, line, clean.error)
            if clean.exit_code in CODE:
                out = build_file.parent / "build" / "out"
                assert published(out) == clean.outputs, (story, line)
                assert content_reports(out) == clean.reports, (story, line)
    finally:
        assert watch.stop() == 130
