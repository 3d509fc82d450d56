"""What moved for a stage since its record: the reason its record no longer applies, the net
effect of several runs' file changes, files outside the project, and published files."""

from __future__ import annotations

import dataclasses

import pytest
from enginekit import build_toy, write_toy

from orchestrator.core import rebuild, session
from orchestrator.core.staleness import change_from
from orchestrator.files.changes import ADDED, MODIFIED, REMOVED, FileChanges
from orchestrator.typing import StageSpec

SPEC = StageSpec(name="s", version=1, inputs=(), outputs=("o",))
LIBS = {"code": "c" * 64, "lxml": "5.0", "python": "3.11"}


def fingerprint(spec: StageSpec, libs: dict, slice_value: dict):
    return rebuild.stage_keys(spec, libs, slice_value).fingerprint


def test_the_reason_a_record_no_longer_applies_names_the_part_that_moved():
    """Stage version, product code, tool versions and build-file slice each give their reason;
    the first that moved is named."""
    old = fingerprint(SPEC, LIBS, {"platform": "pc"})
    assert fingerprint(SPEC, LIBS, {"platform": "pc"}) == old
    cases = {
        "stage version changed (1 → 2)": fingerprint(
            dataclasses.replace(SPEC, version=2), LIBS, {"platform": "pc"}
        ),
        "the product's code changed": fingerprint(SPEC, {**LIBS, "code": "d" * 64}, {}),
        "tool or library version changed": fingerprint(
            SPEC, {**LIBS, "lxml": "6.0"}, {"platform": "pc"}
        ),
        "build-file slice changed": fingerprint(SPEC, LIBS, {"platform": "ios"}),
    }
    for reason, new in cases.items():
        assert change_from(new, old) == reason
    assert change_from(old, None) == "no entry"


@pytest.mark.parametrize(
    ("logged", "net"),
    [
        ([ADDED, MODIFIED], ADDED),  # added, then edited while the stage did not run
        ([ADDED, MODIFIED, MODIFIED], ADDED),
        ([REMOVED, ADDED], MODIFIED),  # the stage knew the file; it is back, maybe different
        ([MODIFIED, REMOVED], REMOVED),
        ([MODIFIED, MODIFIED], MODIFIED),
        ([ADDED, REMOVED], None),  # came and went: the stage never saw it
        ([REMOVED, ADDED, REMOVED], REMOVED),
        ([ADDED, REMOVED, ADDED], ADDED),
    ],
)
def test_several_runs_of_changes_net_out_per_file(logged, net):
    """A stage that last ran before several runs sees each file's net change since."""
    changes = [("a.txt", kind) for kind in logged] + [("b.txt", MODIFIED)]
    expected = ([("a.txt", net)] if net else []) + [("b.txt", MODIFIED)]
    assert sorted(FileChanges.net(changes).logged()) == sorted(expected)


def lines_reasons(result) -> list[str]:
    return [outcome.reason for outcome in result.explained if outcome.stage == "lines"]


def test_a_product_code_change_reruns_every_unit_and_says_so(tmp_path, monkeypatch):
    """A new build of the product itself invalidates every record and names the cause."""
    build = write_toy(tmp_path, {"a.txt": "1\n", "b.txt": "2\n"})
    build_toy(build)
    monkeypatch.setattr(session, "code_digest", lambda modules: "e" * 64)
    result = build_toy(build, explain=True, no_cache=False)
    assert lines_reasons(result) == ["the product's code changed"] * 2


def test_a_library_upgrade_reruns_every_unit_and_says_so(tmp_path, monkeypatch):
    """A library that shapes outputs changing version invalidates every record."""
    build = write_toy(tmp_path, {"a.txt": "1\n"})
    build_toy(build)
    versions = rebuild.library_versions()
    monkeypatch.setattr(rebuild, "library_versions", lambda: {**versions, "lxml": "99"})
    assert lines_reasons(build_toy(build, explain=True)) == ["tool or library version changed"]


def test_a_file_outside_the_project_that_a_unit_read_is_watched(tmp_path):
    """A unit that reads a file outside the project runs again when that file changes, naming
    it, and not otherwise."""
    outside = tmp_path / "shared.dat"
    outside.write_text("1\n2\n", encoding="utf-8")
    build = write_toy(tmp_path, {"a.txt": "x\ninclude ../shared.dat\n", "b.txt": "y\n"})
    assert build_toy(build).outputs["total"] == 4
    again = build_toy(build, explain=True)
    assert lines_reasons(again) == [] and sum(r.built for r in again.reports) == 0
    outside.write_text("1\n2\n3\n", encoding="utf-8")
    result = build_toy(build, explain=True)
    assert result.outputs["total"] == 5
    assert lines_reasons(result) == ["input changed: ../shared.dat"]


@pytest.mark.parametrize("how", ["deleted", "edited"])
def test_a_published_file_touched_since_is_published_again(tmp_path, how):
    """A stage whose inputs did not move is still not skipped when a file it published was
    deleted or changed: the file is written again, and its units are not re-run."""
    build = write_toy(tmp_path, {"a.txt": "1\n2\n"})
    build_toy(build)
    published = tmp_path / "out" / "total.txt"
    if how == "deleted":
        published.unlink()
    else:
        published.write_text("999\n", encoding="ascii")
    result = build_toy(build)
    assert published.read_text(encoding="ascii") == "2\n"
    assert sum(report.built for report in result.reports) == 0
