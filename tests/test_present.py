"""What a user reads of a run: the summary table (plain text off a terminal, rich on one, from
the same typed rows), the problems' lines and the profile."""

from __future__ import annotations

import io
import json

from rich.console import Console

from orchestrator.cache.records import UnitRecord
from orchestrator.core.outcomes import StageReport
from orchestrator.shell.present import (
    SUMMARY_HEADER,
    SummaryRow,
    print_summary,
    summary_grid,
    summary_rows,
    summary_text,
    write_profile,
)
from orchestrator.typing import Unit

MB = 2**20
REPORTS = [
    StageReport("collect", 1200, 1100, 100, seconds=3.14159, peak_rss=57 * MB + 12345),
    StageReport("cook 贴图", 7, 0, 7, seconds=12.5, peak_rss=3 * 2**30),
    StageReport("manifest", 1, 1, 0, seconds=0.004, peak_rss=0),
]
#: The table as `orchestrate run` printed it before its rows were typed (users and tests read it).
PLAIN = (
    "stage     units  cached  built  seconds  peak RSS MB\n"
    "--------  -----  ------  -----  -------  -----------\n"
    "collect    1200    1100    100     3.14           57\n"
    "cook 贴图       7       0      7    12.50         3072\n"
    "manifest      1       1      0     0.00            0"
)


def test_the_plain_table_is_what_it_always_was():
    assert summary_text(summary_rows(REPORTS)) == PLAIN
    assert summary_text([]) == (
        "stage  units  cached  built  seconds  peak RSS MB\n"
        "-----  -----  ------  -----  -------  -----------"
    )


def test_one_row_per_stage_with_its_figures_as_shown():
    rows = summary_rows(REPORTS)
    assert rows[1] == SummaryRow("cook 贴图", "7", "0", "7", "12.50", "3072")
    assert rows[0].seconds == "3.14" and rows[2].peak_rss_mb == "0"


def test_the_terminal_table_has_the_same_cells_as_the_plain_one():
    """rich draws the rows themselves: a cell with a space (a stage's name, the RSS title)
    stays one cell, as it is in the plain text."""
    grid = summary_grid(summary_rows(REPORTS))
    assert [str(column.header) for column in grid.columns] == list(SUMMARY_HEADER)
    out = io.StringIO()
    Console(file=out, width=120, color_system=None, legacy_windows=False).print(grid)
    drawn = [
        [cell.strip() for cell in line.strip().strip("│┃").split("│" if "│" in line else "┃")]
        for line in out.getvalue().splitlines()
        if "│" in line or "┃" in line
    ]
    assert drawn == [list(SUMMARY_HEADER), *(list(row) for row in summary_rows(REPORTS))]


def test_off_a_terminal_the_plain_table_is_printed(capsys):
    print_summary(summary_rows(REPORTS), rich_output=False)
    assert capsys.readouterr().out == PLAIN + "\n"


def test_the_profile_has_a_slice_per_unit_run_and_per_stage(tmp_path):
    """Each unit that ran gets a slice on its worker's track (a stage's outcomes are the units
    that ran: cached ones take no time), and the stage one on the stages' track."""
    ran = UnitRecord(
        "cook",
        Unit("贴图/a", None, None),
        "",
        {},
        "no entry",
        ran=True,
        seconds=0.5,
        worker="w1",
        start=11.0,
    )
    report = StageReport("cook", 2, 1, 1, start=10.0, seconds=2.0, peak_rss=5 * MB)
    report.outcomes = [ran]
    path = tmp_path / "trace.json"
    write_profile(path, [report], t0=10.0)
    events = json.loads(path.read_text(encoding="utf-8"))["traceEvents"]
    slices = [(e["name"], e["tid"], e["ts"], e["dur"]) for e in events if e["ph"] == "X"]
    assert slices == [("贴图/a", 1, 1_000_000, 500_000), ("cook", 2, 0, 2_000_000)]
    tracks = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M"}
    assert tracks == {1: "w1", 2: "stages"}
