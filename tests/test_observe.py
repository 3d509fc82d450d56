"""core/observe.py holds what the engine uses while it runs, and nothing a user reads after."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import orchestrator
from orchestrator.core.observe import ResourceSampler

ENGINE = Path(orchestrator.__file__).resolve().parent
OBSERVE = ENGINE / "core" / "observe.py"


def names_used(tree: ast.AST) -> set[str]:
    """Every name a piece of code reads or imports."""
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, ast.ImportFrom):
            used.update(alias.name for alias in node.names)
    return used


def test_everything_in_observe_is_used_by_the_engine():
    """Each definition of core/observe.py is used by the engine (every package but the command
    line's shell/), directly or through another definition of observe.py that is."""
    definitions = {
        node.name: node
        for node in ast.parse(OBSERVE.read_text(encoding="utf-8")).body
        if isinstance(node, ast.FunctionDef | ast.ClassDef)
    }
    engine = set()
    for path in ENGINE.rglob("*.py"):
        if path != OBSERVE and "shell" not in path.relative_to(ENGINE).parts:
            engine |= names_used(ast.parse(path.read_text(encoding="utf-8")))
    reached = set(definitions) & engine
    while True:
        more = {n for d in reached for n in names_used(definitions[d]) if n in definitions}
        if more <= reached:
            break
        reached |= more
    assert sorted(set(definitions) - reached) == []


def test_a_window_a_sample_just_ended_is_not_sampled_again(monkeypatch):
    """Listing the process tree costs milliseconds: stages that end within a few of each other
    (an incremental build's, `watch`'s every save) share the last sample, and still report
    the RSS it measured rather than nothing."""
    sampler = ResourceSampler(interval=60)
    calls = []
    real = sampler.sample
    monkeypatch.setattr(sampler, "sample", lambda: (calls.append(1), real())[1])
    first, _ = sampler.window()
    second, _ = sampler.window()
    assert len(calls) == 1
    assert first > 0 and second == first
    time.sleep(0.06)
    sampler.window()
    assert len(calls) == 2
