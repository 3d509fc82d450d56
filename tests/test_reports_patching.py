"""A report patched from the last render equals the report made from the output folder's files."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from buildkit import make_project
from reportkit import build

from stages import manifest as manifest_stage
from stages.reports import html
from stages.reports.html import CONTENT_CACHE, PAGE, STATE, decode_data


def inline(output: Path, element: str) -> dict:
    text = (output / PAGE).read_text(encoding="utf-8")
    found = re.search(
        rf'<script id="{element}" type="application/octet-stream">([^<]*)</script>', text
    )
    assert found, f"no {element} in the page"
    return decode_data(found.group(1))


def rendered(output: Path) -> dict:
    """What a render made: page data, figures and treemap, changes, and the state it kept."""
    lines = (output / CONTENT_CACHE).read_bytes().split(b"\n")
    parts = orjson.loads(lines[1])
    changes = inline(output, "run-data")["changes"]
    changes.get("previous", {}).pop("run", None)  # a time stamp: the twins ran apart
    return {
        "data": inline(output, "content-data"),
        "figures": parts["figures"],
        "treemap": parts["treemap"],
        "changes": changes,
        "state": orjson.loads((output / STATE).read_bytes().split(b"\n", 1)[1]),
    }


def set_width(build_file: Path, width: int) -> None:
    path = sorted(
        (build_file.parent / "project" / "Repository" / "Characters").rglob("texture.xml")
    )[0]
    text = path.read_text(encoding="utf-8")
    path.write_text(
        re.sub(r"<Width>\d+</Width>", f"<Width>{width}</Width>", text), encoding="utf-8"
    )


@pytest.fixture
def twins(tmp_path) -> tuple[Path, Path]:
    """Two copies of one generated project."""
    return make_project(tmp_path / "a", 120, 3), make_project(tmp_path / "b", 120, 3)


def test_patched_reports_equal_reports_made_from_the_files(twins, monkeypatch):
    """After attribute edits (one that breaks a rule and one that mends it) the patched page
    data, figures, treemap, changes and kept state are those of a render from the files."""
    patched_file, full_file = twins
    taken = []
    patch = html._patched

    def spy(*args):
        result = patch(*args)
        taken.append(result is not None)
        return result

    outputs = {}
    for build_file, way in ((patched_file, spy), (full_file, lambda *args: None)):
        monkeypatch.setattr(html, "_patched", way)
        seen = []
        for width in (None, 1024, 4096, 512):
            if width is not None:
                set_width(build_file, width)
            output = build(build_file, "out")
            seen.append(rendered(output))
        outputs[way is spy] = seen
    assert taken == [False, True, True, True]  # the first build has nothing to patch
    for patched, full in zip(outputs[True], outputs[False]):
        assert patched == full
    assert outputs[True][2]["changes"]["status"] == "changed"
    assert outputs[True][2]["figures"]["validation"] != outputs[True][1]["figures"]["validation"]


def test_a_noop_after_a_patched_report_runs_nothing(twins, monkeypatch):
    """What the patched render keeps leaves the published files as the engine recorded them: a
    rerun with no change skips the manifest stage whole (it does not even publish)."""
    build_file = twins[0]
    build(build_file, "out")
    set_width(build_file, 1024)
    output = build(build_file, "out")
    published = []
    publish = manifest_stage.publish
    monkeypatch.setattr(manifest_stage, "publish", lambda *args: published.append(publish(*args)))
    build(build_file, "out")
    assert published == []
    record = orjson.loads((output / "reports" / "run.json").read_bytes())
    assert all(stage["built"] == 0 for stage in record["stages"])
    assert inline(output, "run-data")["changes"]["status"] == "same"
