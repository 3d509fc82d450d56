"""What installed packages add to the engine, through entry points (like pytest's plugins):

- `orchestrate.stages`: name → a stage module (`SPEC`, `plan`, `run`, `finish`);
- `orchestrate.sections`: build-file key → `typing.Section` (its schema and default);
- `orchestrate.commands`: command name → a click command for the `orchestrate` CLI;
- `orchestrate.reports`: report name → `render(output_dir, run_record)`, called after every run
  (runrecord.py).

The engine knows no stage: the pipeline a build runs is whatever is registered here, ordered by
the graph its declarations make (graph.py). A third party adds a stage, its build-file section
and its commands from its own package's `pyproject.toml`, without editing ours.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any

from ..errors import ConfigError
from ..typing import Section
from .graph import GraphError, Stage

STAGES_GROUP = "orchestrate.stages"
SECTIONS_GROUP = "orchestrate.sections"
COMMANDS_GROUP = "orchestrate.commands"
REPORTS_GROUP = "orchestrate.reports"

REQUIRED_ATTRIBUTES = ("SPEC", "plan", "run", "finish")


def _entries(group: str) -> dict[str, EntryPoint]:
    """The group's entry points by name; two packages claiming one name is an error."""
    found: dict[str, EntryPoint] = {}
    for entry in entry_points(group=group):
        known = found.get(entry.name)
        if known is not None and known.value != entry.value:
            raise GraphError(
                f"{group}: {entry.name!r} is registered twice ({known.value} and {entry.value})"
            )
        found[entry.name] = entry
    return found


def stage_from_module(module: ModuleType | Any, registered_as: str | None = None) -> Stage:
    """Check that an object declares a stage, and wrap it."""
    label = getattr(module, "__name__", repr(module))
    for attribute in REQUIRED_ATTRIBUTES:
        if not hasattr(module, attribute):
            raise GraphError(f"stage {label} lacks {attribute}")
    spec = module.SPEC
    if registered_as is not None and spec.name != registered_as:
        raise GraphError(
            f"stage {label} is registered as {registered_as!r} but declares {spec.name!r}"
        )
    return Stage(spec, module)


def load_stage(target: str) -> Stage:
    """A stage by module name (`package.module`), for tests and tools that bypass the registry."""
    return stage_from_module(importlib.import_module(target))


@lru_cache(maxsize=1)
def registered_stages() -> tuple[Stage, ...]:
    """Every registered stage, sorted by name (the graph orders them)."""
    stages = [
        stage_from_module(entry.load(), name)
        for name, entry in sorted(_entries(STAGES_GROUP).items())
    ]
    if not stages:
        raise ConfigError(
            "no stages are registered (entry-point group orchestrate.stages): "
            "is the package installed (pip install -e .)?"
        )
    return tuple(stages)


@lru_cache(maxsize=1)
def registered_sections() -> dict[str, Section]:
    """Every build-file key packages add, by name."""
    sections = {}
    for name, entry in sorted(_entries(SECTIONS_GROUP).items()):
        section = entry.load()
        if not isinstance(section, Section):
            raise GraphError(f"{SECTIONS_GROUP}: {name!r} ({entry.value}) is not a Section")
        sections[name] = section
    return sections


@lru_cache(maxsize=1)
def registered_commands() -> dict[str, EntryPoint]:
    """Commands packages add to the CLI, by name (loaded only when invoked or listed)."""
    return _entries(COMMANDS_GROUP)


@lru_cache(maxsize=1)
def registered_reports() -> dict[str, EntryPoint]:
    """Report renderers packages add, by name (loaded when a run ends)."""
    return _entries(REPORTS_GROUP)


def code_roots(stages: tuple[Stage, ...] | list[Stage]) -> list[str]:
    """Folders of the top-level packages that hold the engine and the given stages: the code a
    remote cluster must be sent."""
    import sys
    from pathlib import Path

    packages = {"orchestrator"}
    packages.update(
        type(stage.module).__module__.split(".")[0]
        if not isinstance(stage.module, ModuleType)
        else stage.module.__name__.split(".")[0]
        for stage in stages
    )
    roots = []
    for package in sorted(packages):
        module = sys.modules.get(package) or importlib.import_module(package)
        if module.__file__:
            roots.append(str(Path(module.__file__).parent))
    return roots
