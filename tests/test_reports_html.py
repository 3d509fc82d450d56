"""The HTML build report: written by every run, self-contained, the build's figures in its HTML,
its data whole; kept content reused on a no-op rerun; what changed since the previous build;
`orchestrate report` re-renders from the folder's files (and `--open` hands the page to
the browser)."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import pytest
from reportkit import TRIM_TEX, build, cli, copy_demo, edit_texture_width

from stages.reports.html import CONTENT_CACHE, PAGE, PREVIOUS_STATE, STATE, decode_data

SHARED = Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture
def demo(tmp_path) -> Path:
    if not (SHARED / "examples" / "demo").is_dir():
        pytest.skip(f"../shared is absent ({SHARED}); the demo is needed")
    return copy_demo(SHARED, tmp_path / "demo")


def page(output: Path) -> str:
    return (output / PAGE).read_text(encoding="utf-8")


def inline(html: str, element: str) -> dict:
    found = re.search(
        rf'<script id="{element}" type="application/octet-stream">([^<]*)</script>', html
    )
    assert found, f"no {element} in the page"
    return decode_data(found.group(1))


def text_of(page_html: str) -> str:
    return unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page_html)))


def test_the_page_is_self_contained_and_shows_the_build(demo):
    """No external reference of any kind; the figures the build printed are in the HTML."""
    output = build(demo, "build/out")
    html = page(output)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//|file:)""", html)
    assert "@import" not in html and "url(" not in html
    assert "<link " not in html and "<script src" not in html
    words = text_of(html)
    assert "exit 1: built and published, but failed a gate" in words
    assert "14 rule failure(s) and 0 broken rule(s) at or above 'error'" in words
    assert "15 assets cooked" in words and "4 bundles" in words
    assert "16 rule failures: 14 error , 2 warning , 0 info" in words
    assert "3 missing references, 1 ambiguous" in words
    for stage in ("collect", "validate", "manifest"):
        assert f"<td>{stage}</td>" in html
    assert html.count('class="tile"') == 4  # one tile per bundle in the treemap
    assert '<svg class="timeline"' in html


def test_the_inline_data_holds_every_asset_bundle_failure_and_chain(demo):
    """Asset names come from the bundles' tables of contents; chains rebuild exactly."""
    output = build(demo, "build/out")
    data = inline(page(output), "content-data")
    manifest = json.loads((output / "manifest.json").read_text(encoding="utf-8"))
    cooklist = json.loads((output / "reports" / "cooklist.json").read_text(encoding="utf-8"))
    assets = data["assets"]
    assert set(assets["id"]) == set(manifest["assets"])
    at = assets["id"].index(TRIM_TEX)
    assert assets["name"][at] == "Test/Test_Demo/Trim_tex"
    assert assets["types"][assets["type"][at]] == "Texture" and assets["size"][at] > 0
    assert data["bundles"]["name"] == list(manifest["bundles"])
    assert len(data["validation"]["rows"]) == 16
    assert data["validation"]["ruleNames"][0] == "GUIDs in repositories are unique"
    for asset, chain in cooklist["chains"].items():
        steps, at = [], assets["id"].index(asset)
        while at >= 0:
            steps.append(assets["id"][at])
            at = assets["parent"][at]
        assert steps[::-1] == chain
    run = inline(page(output), "run-data")
    assert run["changes"] == {"status": "first"} and run["ran"]["total"] > 0


def test_a_noop_rerun_reuses_the_content_and_finds_nothing_changed(demo):
    """The second run reads no bundle again (the kept content is reused) and says the outputs
    are the same as the previous build's; the previous state is kept aside."""
    output = build(demo, "build/out")
    cache = output / CONTENT_CACHE
    kept = cache.stat().st_mtime_ns
    build(demo, "build/out")
    assert cache.stat().st_mtime_ns == kept
    run = inline(page(output), "run-data")
    assert run["changes"]["status"] == "same"
    assert run["ran"]["total"] == 0 and run["previousRun"]["run"] == 1
    assert (output / PREVIOUS_STATE).is_file() and (output / STATE).is_file()
    assert "run 2 · started" in page(output)


def test_an_edit_shows_what_changed_and_why(demo):
    """After an attribute edit the page lists the changed asset and bundle, and the units that
    ran because of the file."""
    output = build(demo, "build/out")
    edit_texture_width(demo, 100)
    build(demo, "build/out")
    run = inline(page(output), "run-data")
    changes = run["changes"]
    assert changes["status"] == "changed"
    assert [c["asset"] for c in changes["diff"]["assets"]["changed"]] == [TRIM_TEX]
    assert changes["diff"]["totals"]["bundles.changed"] == 1
    reasons = {(r["stage"], r["kind"]) for r in run["ran"]["reasons"]}
    assert ("cook", "input changed") in reasons
    assert any(TRIM_TEX in u["reason"] for u in run["ran"]["units"] if u["stage"] == "cook")


def test_report_command_re_renders_without_moving_the_previous_build(demo, capsys):
    """`orchestrate report OUT` writes the same page from the folder's files; the comparison
    with the previous build stays what the run said."""
    output = build(demo, "build/out")
    edit_texture_width(demo, 100)
    build(demo, "build/out")
    before = inline(page(output), "run-data")
    (output / PAGE).unlink()
    assert cli("report", str(output)) == 0
    assert f"report: {output / PAGE}" in capsys.readouterr().out
    assert inline(page(output), "run-data") == before


def test_report_open_hands_the_page_to_the_browser_as_a_file_url(demo, capsys, monkeypatch):
    """`report OUT --open` renders the page, then asks the default browser to open it by its
    absolute `file://` URL; when no browser starts it says where the page is, exiting 0."""
    output = build(demo, "build/out")
    opened: list[str] = []
    started = True

    def fake_open(url: str, *args, **kwargs) -> bool:
        opened.append(url)
        return started

    monkeypatch.setattr("webbrowser.open", fake_open)
    assert cli("report", str(output), "--open") == 0
    page_path = (output / PAGE).resolve()
    assert opened == [page_path.as_uri()] and opened[0].startswith("file:///")
    assert "no browser" not in capsys.readouterr().err
    started = False
    assert cli("report", str(output), "--open") == 0
    assert len(opened) == 2
    assert f"no browser could be started; open {page_path} by hand" in capsys.readouterr().err


def test_report_without_open_starts_no_browser(demo, monkeypatch):
    """Without --open the page is rendered and no browser is asked for."""
    output = build(demo, "build/out")
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda url, *args, **kwargs: opened.append(url))
    assert cli("report", str(output)) == 0
    assert opened == [] and (output / PAGE).is_file()


def test_report_command_on_a_folder_that_holds_no_build_exits_2(tmp_path, capsys):
    """No manifest and no run record: exit 2 naming the folder."""
    assert cli("report", str(tmp_path)) == 2
    assert str(tmp_path) in capsys.readouterr().err
    assert cli("report", str(tmp_path / "nowhere")) == 2


def test_a_damaged_bundle_still_gives_a_page(demo, capsys):
    """A bundle file cut short: the page says which, and still shows the rest; once the file
    is whole again, so is the page."""
    output = build(demo, "build/out")
    manifest = json.loads((output / "manifest.json").read_text(encoding="utf-8"))
    victim = output / manifest["bundles"]["ui"]["file"]
    whole = victim.read_bytes()
    victim.write_bytes(whole[:10])
    (output / CONTENT_CACHE).unlink()
    assert cli("report", str(output)) == 0
    html = page(output)
    assert "1 bundle file(s) named by the manifest are missing or damaged" in html
    data = inline(html, "content-data")
    ui = data["bundles"]["name"].index("ui")
    assert "truncated" in data["bundles"]["errors"][str(ui)]
    victim.write_bytes(whole)  # repaired: the next rendering reads it again
    assert cli("report", str(output)) == 0
    assert "missing or damaged" not in page(output)


def test_a_dry_run_writes_no_report(demo):
    """--dry-run leaves no record and no page behind."""
    assert cli("run", str(demo), "--executor", "local", "--dry-run") == 0
    assert not (demo.parent / "build" / "out" / PAGE).exists()
    assert not (demo.parent / "build" / "out" / "reports" / "run.json").exists()
