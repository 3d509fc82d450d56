"""Asset sources: the registry that maps a build file's `source:` name to an `AssetSource`.

Built-in sources are imported lazily (a Messiah build never imports the Unity parser); third
parties register theirs under the entry-point group `orchestrate.sources` (name → object).
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from orchestrator import ConfigError, ProjectError

from .base import AssetSource, Problem

ENTRY_POINT_GROUP = "orchestrate.sources"
BUILTIN_SOURCES = {
    "messiah": "stages.sources.messiah:SOURCE",
    "unity": "stages.sources.unity:SOURCE",
    "cocos": "stages.sources.cocos:SOURCE",
}


def _load(target: str):
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def available_sources() -> list[str]:
    """Every source name a build file may use (built-in and installed)."""
    names = set(BUILTIN_SOURCES)
    names.update(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))
    return sorted(names)


def get_source(name: str) -> AssetSource:
    """The source registered under `name`; ConfigError (exit 2) for an unknown name."""
    if name in BUILTIN_SOURCES:
        return _load(BUILTIN_SOURCES[name])
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        if entry.name == name:
            return entry.load()
    raise ConfigError(
        f"unknown asset source {name!r} (known: {', '.join(available_sources())})", key="source"
    )


class BrokenProjectFile(ProjectError):
    """A project file the build cannot do without does not parse (a malformed
    resource.repository): exit 2, unless `collect.skip_broken` goes on without it."""


def raise_on_fatal(problems: list[Problem], skip_broken: bool) -> None:
    """Stop the build (exit 2) on the first fatal problem, unless `collect.skip_broken` is set."""
    if skip_broken:
        return
    for problem in problems:
        if problem.fatal:
            raise BrokenProjectFile(problem.message, file=problem.file, line=problem.line)


def log_problems(log, event: str, problems: list[Problem]) -> None:
    """One debug line per problem (kind, file, line, message): the end of every run counts them
    by kind with the first few (a stage's `problems` hook), so the log holds the whole list."""
    for problem in problems:
        log.debug(
            event, kind=problem.kind, file=problem.file, line=problem.line, message=problem.message
        )
