"""The code's layout holds what the architecture promises: the engine imports no stage, every
top-level module of stages/ is a registered stage, engine modules stay small, no import circles."""

from __future__ import annotations

import ast
from pathlib import Path

from orchestrator.core.graph import order
from orchestrator.core.registry import registered_stages
from stages.algorithms.graphs import strongly_connected

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("orchestrator", "stages")
ENGINE_MODULE_MAX_LINES = 400


def modules() -> dict[str, Path]:
    """Every module of the two packages, by dotted name."""
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules a module imports (relative imports resolved; lazy ones included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def test_the_engine_imports_no_stage():
    """Nothing in orchestrator/ imports from stages/ (the engine runs what is registered)."""
    known = modules()
    offenders = {
        name: sorted(t for t in imports_of(name, path, known) if t.startswith("stages"))
        for name, path in known.items()
        if name.startswith("orchestrator")
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def test_every_top_level_module_of_stages_is_a_registered_stage():
    """stages/*.py are the stages, all registered; libraries live in subpackages."""
    top_level = {path.stem for path in (REPO / "stages").glob("*.py") if path.stem != "__init__"}
    registered = {stage.module.__name__.rpartition(".")[2] for stage in registered_stages()}
    assert top_level == registered
    assert len(order(list(registered_stages()))) == len(top_level)


def test_engine_modules_stay_small():
    """Each engine module does one job in a few hundred lines."""
    sizes = {
        path.relative_to(REPO).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in (REPO / "orchestrator").rglob("*.py")
    }
    assert {path: n for path, n in sizes.items() if n > ENGINE_MODULE_MAX_LINES} == {}


def test_no_import_circles():
    """No module imports, directly or through others, a module that imports it back."""
    known = modules()
    edges = {name: sorted(imports_of(name, path, known)) for name, path in known.items()}
    # A package importing its own submodules (its face) is not a circle of code.
    for name in edges:
        edges[name] = [t for t in edges[name] if not t.startswith(name + ".")]
    circles = [
        sorted(c)
        for c in strongly_connected(sorted(edges), lambda n: edges.get(n, ()))
        if len(c) > 1
    ]
    assert circles == []
