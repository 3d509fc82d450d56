"""The run record (reports/run.json): written by every run but a dry run, aggregated so it stays
small, the previous one kept; report renderers called after it."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from buildkit import edit_build, make_project, run_inprocess

from orchestrator.cache.records import UnitRecord
from orchestrator.core.outcomes import StageReport
from orchestrator.shell import runrecord
from orchestrator.shell.runrecord import (
    PREVIOUS,
    RECORD,
    make_record,
    ran_units,
    reason_kind,
    render_reports,
    worker_slices,
    write_record,
)
from orchestrator.typing import Unit

T0 = 1_000_000.0


def outcome(stage: str, unit: str, worker: str, start: float, seconds: float, reason="no entry"):
    return UnitRecord(
        stage,
        Unit(unit, None, None),
        "",
        {},
        reason,
        ran=True,
        seconds=seconds,
        worker=worker,
        start=T0 + start,
    )


def reports() -> list[StageReport]:
    cook = StageReport("cook", units=5, cached=1, built=4, start=T0 + 1.0, seconds=2.0)
    cook.outcomes = [
        outcome("cook", "b", "w1", 1.0, 0.5, "input changed: b.xml"),
        outcome("cook", "a", "w1", 1.6, 0.25, "input changed: a.xml"),
        outcome("cook", "c", "w2", 1.1, 0.75),
        outcome("cook", "d", "w2", 2.0, 1.0),
    ]
    skipped = StageReport("pack", units=3, cached=3, start=T0 + 3.0, seconds=0.01, skipped=True)
    return [cook, skipped]


def fake_build(tmp_path: Path) -> SimpleNamespace:
    return SimpleNamespace(
        path=tmp_path / "build.yaml", project_root=tmp_path / "p", output_dir=tmp_path / "out"
    )


def fake_options() -> SimpleNamespace:
    return SimpleNamespace(
        executor="local", workers=None, stages=None, explain=False, no_cache=False, keep_going=False
    )


def test_worker_slices_aggregate_units_per_stage_and_worker():
    """Each (stage, worker) is one slice: first start, last end, units and busy time."""
    slices = worker_slices(reports(), T0)
    assert slices == [
        {"stage": "cook", "worker": "w1", "units": 2, "start": 1.0, "end": 1.85, "busy": 0.75},
        {"stage": "cook", "worker": "w2", "units": 2, "start": 1.1, "end": 3.0, "busy": 1.75},
    ]


def test_ran_units_are_counted_by_kind_and_listed_up_to_the_limit():
    """Reasons are counted by their kind ("input changed"), units listed by id up to a cap."""
    ran = ran_units(reports(), T0, limit=3)
    assert ran["total"] == 4 and ran["listed"] == 3
    assert ran["reasons"] == [
        {"stage": "cook", "kind": "input changed", "count": 2, "example": "input changed: a.xml"},
        {"stage": "cook", "kind": "no entry", "count": 2, "example": "no entry"},
    ]
    assert [u["unit"] for u in ran["units"]] == ["a", "b", "c"]
    assert ran["units"][0] == {
        "stage": "cook",
        "unit": "a",
        "reason": "input changed: a.xml",
        "worker": "w1",
        "start": 1.6,
        "seconds": 0.25,
    }
    assert reason_kind("declared input changed: key, rules") == "declared input changed"


def test_record_fields_come_in_a_fixed_order_and_count_runs(tmp_path):
    """The record's schema, its field order, the stage entries and the run number."""
    result = SimpleNamespace(
        reports=reports(), ray_startup=None, driver_peak_rss=64 << 20, workers_peak_rss=0
    )
    record = make_record(
        fake_build(tmp_path),
        fake_options(),
        started=T0,
        seconds=3.5,
        exit_code=1,
        reasons=["2 rule failure(s)"],
        result=result,
        previous={"schema": 1, "run": 6},
    )
    assert list(record) == [
        "schema",
        "run",
        "id",
        "started",
        "seconds",
        "exit_code",
        "reasons",
        "complete",
        "build_file",
        "project",
        "output",
        "options",
        "ray_startup",
        "peak_rss_mb",
        "stages",
        "workers",
        "ran",
        "problem_counts",
        "problems",
    ]
    assert record["run"] == 7 and record["complete"] is True and record["exit_code"] == 1
    assert record["started"] == "1970-01-12T13:46:40.000000+00:00" == record["id"]
    cook, pack = record["stages"]
    assert (cook["start"], cook["built"], cook["skipped"]) == (1.0, 4, False)
    assert pack["skipped"] is True  # looked up as a whole: no unit outcomes
    assert record["peak_rss_mb"] == {"driver": 64, "workers": 0}
    stopped = make_record(
        fake_build(tmp_path), fake_options(), started=T0, seconds=0.2, exit_code=2, reasons=["x"]
    )
    assert stopped["complete"] is False and stopped["stages"] == [] and stopped["run"] == 1
    assert stopped["ran"] == {"total": 0, "listed": 0, "reasons": [], "units": []}


def test_write_record_keeps_the_previous_one(tmp_path):
    """Writing a record moves the last one to run.previous.json."""
    write_record(tmp_path, {"schema": 1, "run": 1})
    write_record(tmp_path, {"schema": 1, "run": 2})
    assert json.loads((tmp_path / RECORD).read_text())["run"] == 2
    assert json.loads((tmp_path / PREVIOUS).read_text())["run"] == 1
    assert runrecord.read_record(tmp_path / RECORD) == {"schema": 1, "run": 2}
    (tmp_path / RECORD).write_text('{"schema": 99}')
    assert runrecord.read_record(tmp_path / RECORD) is None


class FakeEntry:
    def __init__(self, render) -> None:
        self.render = render

    def load(self):
        return self.render


class FakeLog:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict]] = []

    def warning(self, event, **fields):
        self.lines.append((event, fields))

    error = warning

    def debug(self, event, **fields):
        pass


def test_a_failing_renderer_is_logged_and_the_others_still_run(tmp_path, monkeypatch):
    """A renderer that raises is logged (with a log) and the next one still runs; without a log
    (`orchestrate report`) the error is raised."""

    def broken(output_dir, record):
        raise ValueError("boom")

    def fine(output_dir, record):
        path = output_dir / "page.html"
        path.write_text(str(record["run"]))
        return [path]

    entries = {"a-broken": FakeEntry(broken), "b-fine": FakeEntry(fine)}
    monkeypatch.setattr("orchestrator.core.registry.registered_reports", lambda: entries)
    log = FakeLog()
    assert render_reports(tmp_path, {"run": 3}, log).pages == (tmp_path / "page.html",)
    assert log.lines == [("report.failed", {"report": "a-broken", "error": "ValueError: boom"})]
    with pytest.raises(ValueError):
        render_reports(tmp_path, {"run": 3})


@pytest.fixture
def project(tmp_path) -> Path:
    return make_project(tmp_path / "proj", assets=120, seed=3)


def read(output: Path, relpath: str = RECORD) -> dict:
    return json.loads((output / relpath).read_text(encoding="utf-8"))


def test_every_run_writes_its_record_and_the_report(project, capsys):
    """A run records its exit code, reasons and stages; the next keeps it as the previous one;
    a dry run writes nothing; the summary names the report."""
    output = project.parent / "build" / "out"
    code = run_inprocess("run", str(project), "--executor", "local")
    first = read(output)
    assert first["exit_code"] == code and first["complete"] is True and first["run"] == 1
    assert [s["name"] for s in first["stages"]][0] == "collect"
    assert first["ran"]["total"] == sum(s["built"] for s in first["stages"]) > 0
    assert (output / "reports" / "index.html").is_file()
    assert f"report: {output / 'reports' / 'index.html'}" in capsys.readouterr().out
    run_inprocess("run", str(project), "--executor", "local", "--dry-run")
    assert read(output)["run"] == 1 and not (output / PREVIOUS).exists()
    run_inprocess("run", str(project), "--executor", "local")
    second = read(output)
    assert second["run"] == 2 and read(output, PREVIOUS)["id"] == first["id"]
    assert second["ran"]["total"] == 0  # nothing changed: no unit ran


def test_a_run_that_stops_on_an_error_is_recorded(project, capsys):
    """A build stopped by bad input (exit 2) still leaves its record and a page saying so."""
    output = project.parent / "build" / "out"
    edit_build(
        project,
        bundles={
            "layout": [
                {"name": "everything", "include": ["**"]},
                {"name": "again", "include": ["**"]},
            ]
        },
    )
    assert run_inprocess("run", str(project), "--executor", "local") == 2
    record = read(output)
    assert record["exit_code"] == 2 and record["complete"] is False
    assert "named by two layout rules" in record["reasons"][0]
    page = (output / "reports" / "index.html").read_text(encoding="utf-8")
    assert "exit 2: stopped: bad input" in page
    assert "The run stopped before its stages reported" in page


def test_problems_in_the_project_are_part_of_every_runs_result(project, capsys):
    """Problems the source noticed (here four repository items without a GUID) are stored with
    collect's values: the first run and a rerun that skips collect list the same ones in
    run.json and on the page, and the terminal counts them by kind with the first few instead
    of logging one line each."""
    output = project.parent / "build" / "out"
    repository = project.parent / "project" / "Repository" / "resource.repository"
    text = repository.read_text(encoding="utf-8")
    names = ["无名_a", "nameless_b", "nameless_c", "nameless_d"]
    items = "".join(f"    <Item>\n      <Name>{name}</Name>\n    </Item>\n" for name in names)
    repository.write_text(text.replace("  <Items>\n", "  <Items>\n" + items, 1), "utf-8")
    expected = [
        {
            "kind": "item_without_guid",
            "file": "Repository/resource.repository",
            "line": 4 + 3 * i,
            "message": f"Item without a GUID (Name {name!r}) ignored",
        }
        for i, name in enumerate(names)
    ]
    printed = []
    for _ in range(2):
        run_inprocess("run", str(project), "--executor", "local")
        shown = capsys.readouterr()
        printed.append(shown.out)
        assert "collect.problem" not in shown.out + shown.err  # counted, not logged one by one
        record = read(output)
        assert record["problem_counts"]["item_without_guid"] == 4
        assert [p for p in record["problems"] if p["kind"] == "item_without_guid"] == expected
        page = (output / "reports" / "index.html").read_text(encoding="utf-8")
        assert '<section id="problems">' in page and "<code>item_without_guid</code>: 4" in page
        assert "无名_a" in page
    assert next(s for s in record["stages"] if s["name"] == "collect")["skipped"] is True
    lines = [line for line in printed[1].splitlines() if "item_without_guid" in line]
    assert lines == [
        "problems in the project: 2 bundle_cycle, 4 item_without_guid (listed in the report "
        "and reports/run.json)",
        *(f"  item_without_guid: {e['file']}:{e['line']}: {e['message']}" for e in expected[:3]),
        "  item_without_guid: … and 1 more",
    ]
    assert [line for line in printed[0].splitlines() if "item_without_guid" in line] == lines
