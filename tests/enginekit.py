"""Helpers for engine tests: a toy project on disk and a way to build it."""

from __future__ import annotations

from pathlib import Path

from orchestrator.core.config import load_build
from orchestrator.core.observe import setup_logging
from orchestrator.core.registry import load_stage
from orchestrator.core.scheduler import RunOptions, run_build

TOY_STAGES = ("toy_stages.lines", "toy_stages.total")


def write_toy(base: Path, files: dict[str, str], extra: str = "") -> Path:
    """Write a toy project and its build file; returns the build file."""
    project = base / "p"
    project.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        path = project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    build = base / "build.yaml"
    build.write_text(f"project: p\noutput: out\ncache: cache\n{extra}", encoding="utf-8")
    return build


def build_toy(build_file: Path, executor: str = "local", **options):
    log = setup_logging("console")
    build = load_build(build_file)
    opts = RunOptions(executor=executor, progress=False, **options)
    return run_build(build, opts, log, [load_stage(name) for name in TOY_STAGES])
