"""The code's layout holds what the architecture promises: the engine imports no stage, stages
import the engine only through its interface, every top-level module of stages/ is a registered
stage, engine modules stay small, no import circles."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import orchestrator
from orchestrator.core.graph import order
from orchestrator.core.registry import registered_stages
from stages.algorithms.graphs import strongly_connected

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("orchestrator", "stages")
CLIENTS = ("stages", "configs")  # what may use the engine only through `orchestrator` itself
GUIDE = REPO / "docs" / "engine-api.md"  # its examples are a stage author's code
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


def interface_violations(where: str, source: str, exported: set[str]) -> list[str]:
    """Each use in a module of the engine past its interface: an import of `orchestrator.<x>`,
    or a name (imported, or read as `orchestrator.<name>`) that `orchestrator` does not export."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [
                f"{where}:{node.lineno}: import {alias.name}"
                for alias in node.names
                if alias.name.startswith("orchestrator.")
            ]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.startswith("orchestrator."):
                found.append(f"{where}:{node.lineno}: from {node.module} import …")
            elif node.module == "orchestrator":
                found += [
                    f"{where}:{node.lineno}: {alias.name} is not exported by orchestrator"
                    for alias in node.names
                    if alias.name not in exported
                ]
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "orchestrator"
            and node.attr not in exported
        ):
            found.append(f"{where}:{node.lineno}: orchestrator.{node.attr} is not exported")
    return found


def test_stages_use_the_engine_only_through_its_interface():
    """stages/, configs/ and the guide's examples import `orchestrator` itself, never a module
    inside it, and only the names `orchestrator.__all__` exports: the stage author's interface
    is in one place."""
    exported = set(orchestrator.__all__)
    sources = {
        path.relative_to(REPO).as_posix(): path.read_text(encoding="utf-8")
        for client in CLIENTS
        for path in sorted((REPO / client).rglob("*.py"))
    }
    examples = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)
    assert examples
    sources.update({f"docs/engine-api.md, example {i}": text for i, text in enumerate(examples)})
    found = [
        violation
        for where, source in sources.items()
        for violation in interface_violations(where, source, exported)
    ]
    assert found == []


def test_the_interface_check_sees_every_way_past_it():
    """A deep import (plain, from, multi-line, inside a function), an unexported name and an
    unexported attribute are each caught; the interface's own names pass."""
    source = (
        "import orchestrator\n"
        "import orchestrator.codec\n"
        "from orchestrator import Plan, Unit, __version__\n"
        "from orchestrator import NotExported\n"
        "from orchestrator.typing import (\n    StageSpec,\n)\n"
        "def f():\n"
        "    from orchestrator.keyed import KeyedPatch\n"
        "    return orchestrator.__version__, orchestrator.codec.dumps\n"
    )
    found = interface_violations("probe.py", source, set(orchestrator.__all__))
    assert sorted(found) == [
        "probe.py:10: orchestrator.codec is not exported",
        "probe.py:2: import orchestrator.codec",
        "probe.py:4: NotExported is not exported by orchestrator",
        "probe.py:5: from orchestrator.typing import …",
        "probe.py:9: from orchestrator.keyed import …",
    ]


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


def test_every_exported_name_is_the_object_its_home_module_holds():
    """Each name of `orchestrator.__all__` loads from the module `_HOMES` names, and the
    imports type checkers read (under TYPE_CHECKING) say the same, name for name."""
    homes = {
        name: f"orchestrator.{module}"
        for module, names in orchestrator._HOMES.items()
        for name in names.split()
    }
    assert set(orchestrator.__all__) == {"__version__", *homes}
    for name, module in homes.items():
        assert getattr(orchestrator, name) is getattr(importlib.import_module(module), name)
    declared = {}
    tree = ast.parse((REPO / "orchestrator" / "__init__.py").read_text(encoding="utf-8"))
    (checking,) = [n for n in tree.body if isinstance(n, ast.If)]
    for node in checking.body:
        assert isinstance(node, ast.ImportFrom)
        if node.level == 1:  # (not `from typing import Any`)
            declared.update({alias.name: f"orchestrator.{node.module}" for alias in node.names})
    assert declared == homes


def test_the_interface_loads_what_is_used_and_no_more():
    """`import orchestrator` loads none of its modules; what a stage's units use (the
    declarations, keyed values, digests, the reader, the errors, the output folder) loads no
    command-line or settings library: workers import stages."""
    worker_side = [
        name
        for module, names in orchestrator._HOMES.items()
        if not module.startswith(("shell.", "core.config", "core.registry", "testing"))
        for name in names.split()
    ]
    probe = (
        "import sys\n"
        "import orchestrator\n"
        "bare = sorted(m for m in sys.modules if m.startswith('orchestrator.'))\n"
        f"from orchestrator import {', '.join(worker_side)}\n"
        "heavy = ('click', 'pydantic', 'rich', 'structlog', 'ray')\n"
        "print(bare, sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout
    assert out.strip() == "[] []"
