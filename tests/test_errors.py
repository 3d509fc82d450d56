"""The engine's exceptions: all in errors.py, each keeping where it happened through pickling."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import pytest

from orchestrator import errors

ENGINE = Path(errors.__file__).resolve().parent
#: core/rebuild.py, rewritten in the same change as this test, moves its exception itself.
MOVED_BY_THE_REBUILD_REWRITE = {"core/rebuild.py": {"DryRunNamed"}}


def exception_classes(path: Path, known: set[str]) -> set[str]:
    """The classes a module defines that derive from an exception: a base whose name says so
    (`Exception`, `…Error`), a class of errors.py, or an exception class defined above it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ClassDef):
            continue
        bases = {ast.unparse(base).rpartition(".")[2] for base in node.bases}
        if any(
            base.endswith(("Exception", "Error")) or base in known or base in found
            for base in bases
        ):
            found.add(node.name)
    return found


def test_every_engine_exception_is_in_errors_py():
    """A reader finds what the engine may raise in one module (a class defined elsewhere and
    imported there does not count: it is defined once)."""
    family = exception_classes(ENGINE / "errors.py", set())
    assert {"OrchestrateError", "CodecError", "GraphError", "ExpansionRefused"} <= family
    elsewhere = {}
    for path in sorted(ENGINE.rglob("*.py")):
        module = path.relative_to(ENGINE).as_posix()
        if module == "errors.py":
            continue
        defined = exception_classes(path, family) - MOVED_BY_THE_REBUILD_REWRITE.get(module, set())
        if defined:
            elsewhere[module] = sorted(defined)
    assert elsewhere == {}


@pytest.mark.parametrize(
    "error", [errors.GraphError("two stages share a name"), errors.ConfigError("bad", key="cook")]
)
def test_an_error_keeps_its_kind_and_place_through_pickling(error):
    """Ray ships exceptions between processes: the class, the message and the place survive."""
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error) and again.describe() == error.describe()
    assert again.exit_code == error.exit_code
