"""Conformance: the demo project's validation matches shared/examples/demo/expected/validate.json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"
DEMO = SHARED / "examples" / "demo"

pytestmark = [
    pytest.mark.shared,
    pytest.mark.skipif(not DEMO.is_dir(), reason=f"shared demo not found at {DEMO}"),
]


def build_index_or_skip():
    try:
        from stages.sources.messiah.reader import build_index
    except ImportError as exc:
        pytest.skip(f"stages.sources.messiah.build_index is not available yet ({exc})")
    return build_index


def failure_set(document: dict) -> set:
    return {
        (
            f["rule"],
            f["source"],
            f["via"],
            tuple(sorted(json.dumps(e, sort_keys=True, ensure_ascii=False) for e in f["errors"])),
        )
        for f in document["failures"]
    }


@pytest.fixture(scope="module")
def expected() -> dict:
    return json.loads((DEMO / "expected" / "validate.json").read_text(encoding="utf-8"))


@pytest.fixture
def demo(tmp_path) -> Path:
    copy = tmp_path / "demo"
    shutil.copytree(DEMO, copy, ignore=shutil.ignore_patterns("build"))
    return copy


def test_demo_validate_project_matches_expected(demo, expected):
    """validate_project on the demo reports exactly the expected failures and rule errors."""
    from stages.rules.engine import validate_project
    from stages.rules.naive import validate_per_rule

    build_index = build_index_or_skip()
    root = demo / "project"
    index = build_index(str(root))
    document = validate_project(str(root), [demo / "rules.yaml"], index)
    assert failure_set(document) == failure_set(expected)
    assert {e["rule"] for e in document["rule_errors"]} == {
        e["rule"] for e in expected["rule_errors"]
    }
    assert document["rules"] == expected["rules"]
    assert failure_set(validate_per_rule(str(root), [demo / "rules.yaml"], index)) == failure_set(
        expected
    )


def test_demo_build_stage_publishes_reports_and_caches(demo, expected):
    """Through the scheduler: the validate stage's document matches, reports are published, a
    second run is fully cached, and editing one texture re-runs only its unit."""
    build_index_or_skip()
    from orchestrator.core.config import load_build
    from orchestrator.core.observe import setup_logging
    from orchestrator.core.scheduler import RunOptions, run_build

    log = setup_logging("console")

    def build():
        result = run_build(
            load_build(demo / "build.yaml"),
            RunOptions(executor="local", progress=False, stages=["validate"]),
            log,
        )
        report = next(r for r in result.reports if r.name == "validate")
        return result, report

    result, report = build()
    document = result.outputs["validation"]
    assert failure_set(document) == failure_set(expected)
    out = demo / "build" / "out" / "reports"
    published = json.loads((out / "validate.json").read_text(encoding="utf-8"))
    assert failure_set(published) == failure_set(expected) and "_checked" not in published
    assert (out / "junit.xml").read_bytes().startswith(b"<?xml")
    assert "texture-max-size" in (out / "validate.txt").read_text(encoding="utf-8")

    _, again = build()
    assert again.units == report.units and again.cached == again.units

    texture = next((demo / "project" / "Repository" / "UI").rglob("texture.xml"))
    texture.write_text(
        texture.read_text(encoding="utf-8").replace(
            "</Texture>", "<MipLevels>1</MipLevels></Texture>"
        ),
        encoding="utf-8",
    )
    result, third = build()
    assert third.built == 1
    assert "texture-has-mips" not in {f["rule"] for f in result.outputs["validation"]["failures"]}


@pytest.mark.ray
def test_demo_on_ray_matches_local(demo, expected, ray_local):
    """On Ray workers (rules and index shipped once, custom code compiled there) the document is
    the same as in-process."""
    build_index_or_skip()
    from orchestrator.core.config import load_build
    from orchestrator.core.observe import setup_logging
    from orchestrator.core.scheduler import RunOptions, run_build

    result = run_build(
        load_build(demo / "build.yaml"),
        RunOptions(executor="ray", progress=False, no_cache=True, stages=["validate"]),
        setup_logging("console"),
    )
    assert failure_set(result.outputs["validation"]) == failure_set(expected)
