"""Plug-in points of the rule engine, found through Python entry points.

- `orchestrate.checks`: built-in checks (`messiah_condfunc.NAME`, `condfunc.NAME`,
  `g83_runner.NAME`), name → callable `(data, filepath, condition[, context])` returning the
  failing values. The shipped ones are also known without the package installed.
- `orchestrate.path_languages`: path languages for other file types, name → object implementing
  `PathLanguage`. XML is built in and is the language of every file no plug-in claims. The
  shipped `unity_yaml` (stages/sources/unity/paths.py) and `cocos_json`
  (stages/sources/cocos/paths.py) are also known without the package installed, as the shipped
  checks are.

Compiled rules refer to plug-ins by name and "module:attribute" target (picklable); workers
resolve them on first use and keep them for the process.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from functools import cache
from importlib.metadata import entry_points
from typing import Any, NamedTuple, Protocol, runtime_checkable

from . import paths, xmleval
from .lines import DocumentLines

CHECK_GROUP = "orchestrate.checks"
LANGUAGE_GROUP = "orchestrate.path_languages"

BUILTIN_CHECKS = {
    "srcTexConflict": "stages.rules.builtins:src_tex_conflict",
    "rigidbody_deps": "stages.rules.builtins:rigidbody_deps",
    "compressed_src_tex": "stages.rules.builtins:compressed_src_tex",
    "unity_guid_resolves": "stages.sources.unity.checks:guid_resolves",
    "cocos_uuid_resolves": "stages.sources.cocos.checks:uuid_resolves",
    "cocos_in_auto_atlas": "stages.sources.cocos.checks:in_auto_atlas",
    "cocos_bundle_not_nested": "stages.sources.cocos.checks:bundle_not_nested",
}
CHECK_PREFIXES = ("messiah_condfunc.", "condfunc.", "g83_runner.")
BUILTIN_LANGUAGES = {
    "unity_yaml": "stages.sources.unity.paths:LANGUAGE",
    "cocos_json": "stages.sources.cocos.paths:LANGUAGE",
}


class CheckRef(NamedTuple):
    """A registered check: its name, where it lives, and its distribution's version (for keys)."""

    name: str
    target: str  # "module:attribute"
    version: str


def load_target(target: str) -> Any:
    module_name, _, attribute = target.partition(":")
    value = importlib.import_module(module_name)
    for part in attribute.split("."):
        value = getattr(value, part)
    return value


@cache
def available_checks() -> dict[str, CheckRef]:
    """Every check name → CheckRef: the shipped ones, overridden by installed entry points."""
    found = {name: CheckRef(name, target, "") for name, target in BUILTIN_CHECKS.items()}
    for ep in entry_points(group=CHECK_GROUP):
        version = ep.dist.version if ep.dist is not None else ""
        found[ep.name] = CheckRef(ep.name, ep.value, version)
    return found


class CheckCallable(NamedTuple):
    function: Callable
    accepts_context: bool  # it takes a `context` keyword


@cache
def check_callable(target: str) -> CheckCallable:
    function = load_target(target)
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return CheckCallable(function, False)
    accepts = any(
        p.name == "context" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters
    )
    return CheckCallable(function, accepts)


# -- path languages ------------------------------------------------------------------------------


@runtime_checkable
class PathLanguage(Protocol):
    """A path language for one family of files (Unity's YAML: stages/sources/unity/paths.py).

    `parse` raises on content it cannot read (an exception with a `line`/`lineno` attribute gives
    the failure its line); `compile` raises ValueError on an expression it does not accept;
    `evaluate` returns (values, lines) — `lines[i]` is the 1-based line of `values[i]` or None.
    The compiled query need not pickle: rules keep the expression and compile it per process.
    Optional: `accepts(data) -> bool`, for a language sharing a suffix with another (`.meta` is
    Unity's YAML and Creator's JSON): it takes only the files whose content it accepts.
    """

    name: str
    suffixes: tuple[str, ...]  # lower-case file-name endings it claims, e.g. (".prefab", ".unity")

    def parse(self, data: bytes, relpath: str) -> Any: ...

    def compile(self, expr: str) -> Any: ...

    def evaluate(self, query: Any, document: Any) -> tuple[list, list]: ...


class XmlDocument(NamedTuple):
    """A parsed XML file, the selections rules already made in it (shared between rules), and
    its elements' lines (lines.py: kept with the tree, they are read past line 65,535 too)."""

    root: Any
    memo: dict
    lines: DocumentLines | None = None


class XmlLanguage:
    """The built-in language: ArtEase's XML path language (stages/rules/paths.py)."""

    name = "xml"
    suffixes: tuple[str, ...] = ()

    def parse(self, data: bytes, relpath: str) -> XmlDocument:
        root = paths.parse_xml(data, relpath)
        return XmlDocument(root, {}, DocumentLines(root, data))

    def compile(self, expr: str) -> Any:
        return paths.compile_xml_path(expr)

    def evaluate(self, query: Any, document: XmlDocument) -> tuple[list, list]:
        return xmleval.evaluate(query, document.root, document.memo)


XML = XmlLanguage()


@cache
def path_languages() -> dict[str, Any]:
    """Registered languages by name (XML first, then plug-ins sorted by name): the shipped ones,
    overridden by installed entry points of the same name (stale package metadata loses none)."""
    targets = dict(BUILTIN_LANGUAGES)
    targets.update((ep.name, ep.value) for ep in entry_points(group=LANGUAGE_GROUP))
    found: dict[str, Any] = {XML.name: XML}
    for name in sorted(targets):
        language = load_target(targets[name])
        if isinstance(language, type):
            language = language()
        found[getattr(language, "name", name)] = language
    return found


_CLAIMS: list = [None, ()]  # [the languages dict they were taken from, ((suffixes, language), ...)]


def language_for(relpath: str, data: bytes | None = None) -> Any:
    """The language of a file: the plug-in whose suffix its name ends with, else XML. When two
    claim a suffix (`.meta` is Unity's YAML and Creator's JSON), a language with an `accepts`
    method takes the file only if it accepts the content; without content, the others first."""
    languages = path_languages()
    if _CLAIMS[0] is not languages:  # once per registry, not per file
        _CLAIMS[:] = [
            languages,
            tuple(
                (tuple(suffixes), language)
                for language in languages.values()
                if (suffixes := getattr(language, "suffixes", ()))
            ),
        ]
    lowered = relpath.lower()
    fallback = None
    for suffixes, language in _CLAIMS[1]:
        if lowered.endswith(suffixes):
            accepts = getattr(language, "accepts", None)
            if accepts is None:
                fallback = fallback or language
            elif data is not None and accepts(data):
                return language
    return fallback or XML


_QUERIES: dict[tuple[str, str], Any] = {}


def compiled_query(language: Any, expr: str) -> Any:
    """A language's compiled form of an expression, cached per process."""
    key = (language.name, expr)
    query = _QUERIES.get(key)
    if query is None:
        query = _QUERIES[key] = language.compile(expr)
    return query
