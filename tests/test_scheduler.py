"""The build loop: caching, early cutoff, explanations, corruption, interruption."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from enginekit import build_toy, write_toy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TESTS = Path(__file__).resolve().parent


def built(result, stage):
    return next(r for r in result.reports if r.name == stage).built


def test_first_build_runs_every_unit_and_publishes(tmp_path):
    """A cold build runs each unit once and writes its published output."""
    build = write_toy(tmp_path, {"a.txt": "1\n2\n", "b.txt": "3\n"})
    result = build_toy(build)
    assert result.outputs["total"] == 3
    assert built(result, "lines") == 2
    assert (tmp_path / "out" / "total.txt").read_text() == "3\n"


def test_noop_rerun_runs_nothing(tmp_path):
    """A rerun with nothing changed executes zero units."""
    build = write_toy(tmp_path, {"a.txt": "1\n", "b.txt": "2\n"})
    build_toy(build)
    again = build_toy(build)
    assert sum(r.built for r in again.reports) == 0
    assert again.outputs["total"] == 2


@pytest.mark.parametrize("executor", ["local", pytest.param("ray", marks=pytest.mark.ray)])
def test_the_run_after_a_cold_build_skips_every_stage(tmp_path, executor, request):
    """A project generated just before its first build: its files are racily clean (the next
    scan trusts only digests), some of them no unit reads (payloads nothing cooks), and on Ray
    the workers are sent the files they read. Whatever built it, the next run with nothing
    changed skips every stage, and says so in the run record."""
    from buildkit import make_project

    from orchestrator.core.observe import setup_logging
    from orchestrator.core.scheduler import RunOptions, run_build
    from orchestrator.shell.runs import load

    if executor == "ray":
        request.getfixturevalue("ray_local")
    build_file = make_project(tmp_path, 100, 7)
    log = setup_logging("json")
    first = run_build(load(str(build_file), executor), RunOptions(executor, progress=False), log)
    assert all(not r.skipped for r in first.reports)
    again = run_build(load(str(build_file), "local"), RunOptions("local", progress=False), log)
    assert {r.name: r.why for r in again.reports if not r.skipped} == {}
    assert again.file_changes is not None and not again.file_changes.modified


def test_noop_rerun_does_not_import_ray(tmp_path):
    """With executor auto, a run with nothing to do never imports Ray."""
    build = write_toy(tmp_path, {"a.txt": "1\n"})
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(TESTS)!r})
        from enginekit import build_toy
        build_toy({str(build)!r}, executor="auto")
        r = build_toy({str(build)!r}, executor="auto")
        assert sum(x.built for x in r.reports) == 0
        print("ray" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_edit_reruns_only_what_depends_on_it(tmp_path):
    """Editing one file reruns its unit and the sum, not the other files."""
    build = write_toy(tmp_path, {"a.txt": "1\n", "b.txt": "2\n", "c.txt": "3\n"})
    build_toy(build)
    time.sleep(0.01)
    (tmp_path / "p" / "b.txt").write_text("2\n2\n", encoding="utf-8")
    result = build_toy(build)
    assert built(result, "lines") == 1
    assert result.outputs["total"] == 4


def test_early_cutoff_stops_the_rebuild(tmp_path):
    """An edit that leaves a unit's result unchanged does not rerun what consumes it."""
    build = write_toy(tmp_path, {"a.txt": "1\n", "b.txt": "2\n"})
    build_toy(build)
    (tmp_path / "p" / "a.txt").write_text("changed\n", encoding="utf-8")  # still one line
    result = build_toy(build)
    assert built(result, "lines") == 1
    assert built(result, "total") == 0


def test_discovered_reads_are_part_of_the_key(tmp_path):
    """A file read while running (an include) invalidates the unit that read it."""
    build = write_toy(tmp_path, {"a.txt": "x\ninclude inc/extra.dat\n", "inc/extra.dat": "1\n"})
    assert build_toy(build).outputs["total"] == 2
    (tmp_path / "p" / "inc" / "extra.dat").write_text("1\n2\n3\n", encoding="utf-8")
    result = build_toy(build, explain=True)
    assert result.outputs["total"] == 4
    reasons = [o.reason for o in result.explained if o.stage == "lines"]
    assert reasons == ["input changed: inc/extra.dat"]


def test_a_file_looked_for_and_missing_is_part_of_the_key(tmp_path):
    """Creating a file a unit looked for and did not find reruns that unit."""
    build = write_toy(tmp_path, {"a.txt": "x\ninclude later.dat\n"})
    assert build_toy(build).outputs["total"] == 1
    (tmp_path / "p" / "later.dat").write_text("1\n2\n", encoding="utf-8")
    assert build_toy(build).outputs["total"] == 3


def test_explain_names_a_build_file_change(tmp_path):
    """Changing the build-file slice a stage reads is the stated reason for its reruns."""
    build = write_toy(tmp_path, {"a.txt": "1\n"})
    build_toy(build)
    build.write_text(build.read_text() + "platform: ios\n", encoding="utf-8")
    result = build_toy(build, explain=True)
    assert [o.reason for o in result.explained if o.stage == "lines"] == [
        "build-file slice changed"
    ]


def test_explain_names_a_stage_version_change(tmp_path, monkeypatch):
    """Bumping a stage's version is the stated reason for its reruns."""
    import dataclasses

    import toy_stages.lines as lines

    build = write_toy(tmp_path, {"a.txt": "1\n"})
    build_toy(build)
    monkeypatch.setattr(lines, "SPEC", dataclasses.replace(lines.SPEC, version=2))
    result = build_toy(build, explain=True)
    assert [o.reason for o in result.explained if o.stage == "lines"] == [
        "stage version changed (1 → 2)"
    ]


def _corrupt_all(folder: Path, how: str) -> int:
    count = 0
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            path.write_bytes(data[: len(data) // 2] if how == "truncate" else b"\x00garbage" + data)
            count += 1
    return count


def test_corrupt_blobs_are_dropped_and_recomputed(tmp_path, capsys):
    """Every blob corrupted: a no-op reads none of them; a run that reads one detects it, and
    the outputs equal the clean build's."""
    build = write_toy(tmp_path, {"a.txt": "1\n2\n", "b.txt": "3\n"})
    clean = dict(build_toy(build).outputs)
    assert _corrupt_all(tmp_path / "cache" / "cas", "garbage") > 0
    assert dict(build_toy(build).outputs) == clean
    (tmp_path / "p" / "b.txt").write_text("3\n4\n5\n", encoding="utf-8")  # reads a's result
    assert build_toy(build).outputs["total"] == 5
    assert "cache.recompute" in capsys.readouterr().err


def test_truncated_index_and_stat_cache_are_rebuilt(tmp_path):
    """A truncated action index, explain record and stat cache never give a wrong output."""
    build = write_toy(tmp_path, {"a.txt": "1\n2\n", "b.txt": "3\n"})
    clean = build_toy(build).outputs
    for area in ("ac", "last", "stat"):
        _corrupt_all(tmp_path / "cache" / area, "truncate")
    assert build_toy(build).outputs == clean


def test_interrupted_run_then_rerun_equals_clean(tmp_path):
    """A build killed mid-stage, then rerun, gives the same outputs as a clean build."""
    files = {f"f{i:03}.txt": "line\n" * (i % 7 + 1) for i in range(120)}
    build = write_toy(tmp_path / "killed", files)
    script = textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {str(TESTS)!r})
        import toy_stages.lines as lines
        original = lines.run
        def slow(payload, shared, reader):
            time.sleep(0.02)
            return original(payload, shared, reader)
        lines.run = slow
        from enginekit import build_toy
        build_toy({str(build)!r})
    """)
    proc = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.time() + 60
    actions = tmp_path / "killed" / "cache" / "ac" / "lines.log"
    while time.time() < deadline and not (
        actions.exists() and actions.read_bytes().count(b"\n") > 40
    ):
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    resumed = build_toy(build)
    assert built(resumed, "lines") < len(files)  # the killed run's work was kept
    clean = build_toy(write_toy(tmp_path / "clean", files))
    assert resumed.outputs == clean.outputs
    assert (tmp_path / "killed/out/total.txt").read_bytes() == (
        tmp_path / "clean/out/total.txt"
    ).read_bytes()


EDITS = st.lists(
    st.tuples(
        st.sampled_from(["a.txt", "b.txt", "c.txt", "inc/i.dat", "inc/j.dat"]),
        st.one_of(
            st.none(),
            st.lists(
                st.sampled_from(["x", "y", "include inc/i.dat", "include inc/j.dat"]), max_size=4
            ),
        ),
    ),
    min_size=1,
    max_size=6,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(edits=st.lists(EDITS, min_size=1, max_size=3))
def test_incremental_build_equals_clean_build(tmp_path_factory, edits):
    """After any sequence of edits, an incremental build equals a clean build of the same files."""
    base = tmp_path_factory.mktemp("inc")
    files = {"a.txt": "x\ninclude inc/i.dat\n", "b.txt": "y\n", "inc/i.dat": "1\n"}
    build = write_toy(base, files)
    build_toy(build)
    for round_ in edits:
        for rel, lines in round_:
            path = base / "p" / rel
            if lines is None:
                path.unlink(missing_ok=True)
                files.pop(rel, None)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                text = "".join(f"{line}\n" for line in lines)
                path.write_text(text, encoding="utf-8")
                # same-size rewrites within one mtime tick must still be seen
                os.utime(path, ns=(time.time_ns(), time.time_ns()))
                files[rel] = text
        incremental = build_toy(build).outputs
        clean = build_toy(write_toy(tmp_path_factory.mktemp("clean"), files)).outputs
        assert incremental == clean


def test_every_stage_report_carries_its_memory_sample(tmp_path):
    """Each stage's report says the peak memory seen while it ran (the run summary shows it)."""
    build = write_toy(tmp_path, {"a.txt": "1\n", "b.txt": "2\n"})
    result = build_toy(build)
    assert result.reports and all(report.peak_rss > 0 for report in result.reports)
