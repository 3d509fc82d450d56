"""The rule path language for Unity's YAML files: `.meta` files and text-serialized assets.

Registered as the path language `unity_yaml` (entry-point group `orchestrate.path_languages`), it
answers a rule's `xpath`/`subxpath` on files ending in `.meta`, `.unity`, `.prefab`, `.mat`,
`.asset`, `.controller`, … An expression is a dotted path of keys, walked from the root of every
YAML document in the file, in file order:

    Path   := Step ("." Step)*
    Step   := Name Filter*
    Name   := Key | "*" | "**"          Key: a mapping key; `*` inside it matches any characters
    Filter := "[" Key ("." Key)* ("==" | "!=") Value "]"    Value: a plain word or "quoted text"

- `Key` selects the value under that key (`m_*` any key starting `m_`); `*` every value of a
  mapping; `**` the node itself and everything below it (`**.guid`: every `guid` at any depth).
- Lists are transparent: a step applied to a list applies to each item, and a list a path ends on
  gives its items one by one (Unity writes `m_TexEnvs: [- _MainTex: {…}]`).
- `[path==value]` keeps the nodes where some scalar at the relative `path` equals `value`;
  `[path!=value]` the others. Several filters must all hold.
- Values are scalars as written (strings: `"2048"`, GUIDs keep their leading zeros) or, for a
  mapping, a dict of them; each value carries the 1-based line where it starts.

Unity documents are `--- !u!<classID> &<fileID>` (sometimes ` stripped`) each holding one mapping
`ClassName: {…}`, so the class is the first step: `Material.m_Shader.guid` in a `.mat`,
`TextureImporter.maxTextureSize` in a texture's `.meta` (a `.meta` is one plain document),
`Material.m_SavedProperties.m_TexEnvs.*.m_Texture.guid` for every texture slot, and
`TextureImporter[textureType==8].mipmaps.enableMipMap` for sprites only.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Any

import yaml

from orchestrator import ExpansionRefused, compose_all

from .classes import NATIVE_EXTENSIONS
from .documents import HEADER_FOR_YAML, UnityLoader, is_text_serialized

ANY = "*"
DEEP = "**"
_NAME = re.compile(r"[^\s.\[\]=!\"]+")
_PLAIN_VALUE = re.compile(r"[^\s\]\"]+")


class UnityPathError(ValueError):
    """An expression the Unity YAML path language does not accept."""


class UnityParseError(ValueError):
    """A file that is not readable as Unity YAML; `line` is 1-based (None when unknown)."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True, slots=True)
class Filter:
    """`[path==value]` (or `!=`) on a selected node."""

    path: tuple[str, ...]
    negate: bool
    value: str


@dataclass(frozen=True, slots=True)
class Step:
    """One name of the path and the filters on what it selects."""

    name: str
    filters: tuple[Filter, ...] = ()


@dataclass(frozen=True, slots=True)
class UnityQuery:
    """A compiled expression."""

    source: str
    steps: tuple[Step, ...]


# -- compiling -----------------------------------------------------------------------------------


def compile_unity_path(text: str) -> UnityQuery:
    """Compile an expression; raise UnityPathError saying where and why."""
    if not isinstance(text, str) or not text.strip():
        raise UnityPathError("expected a non-empty dotted path")
    steps, pos = [], 0
    text = text.strip()
    while True:
        name, pos = _name(text, pos)
        filters = []
        while pos < len(text) and text[pos] == "[":
            found, pos = _filter(text, pos + 1)
            filters.append(found)
        steps.append(Step(name, tuple(filters)))
        if pos == len(text):
            return UnityQuery(text, tuple(steps))
        if text[pos] != ".":
            raise UnityPathError(f"unexpected {text[pos]!r} at {pos} (steps are joined by '.')")
        pos += 1


def _name(text: str, pos: int) -> tuple[str, int]:
    match = _NAME.match(text, pos)
    if match is None:
        raise UnityPathError(f"expected a key, '*' or '**' at {pos}")
    name = match.group()
    if "/" in name or "," in name or ":" in name or "@" in name:
        raise UnityPathError(f"{name!r} at {pos} is not a key (XML path syntax?)")
    if DEEP in name and name != DEEP:
        raise UnityPathError(f"'**' must be a whole step (at {pos})")
    return name, match.end()


def _filter(text: str, pos: int) -> tuple[Filter, int]:
    path = []
    while True:
        name, pos = _name(text, pos)
        if name == DEEP:
            raise UnityPathError(f"'**' is not allowed inside a filter (at {pos})")
        path.append(name)
        if not text.startswith(".", pos):
            break
        pos += 1
    if text.startswith("==", pos) or text.startswith("!=", pos):
        negate = text[pos] == "!"
        pos += 2
    else:
        raise UnityPathError(f"expected '==' or '!=' at {pos}")
    if text.startswith('"', pos):
        end = text.find('"', pos + 1)
        if end < 0:
            raise UnityPathError(f"unterminated quoted value at {pos}")
        value, pos = text[pos + 1 : end], end + 1
    else:
        match = _PLAIN_VALUE.match(text, pos)
        if match is None:
            raise UnityPathError(f"expected a value at {pos}")
        value, pos = match.group(), match.end()
    if not text.startswith("]", pos):
        raise UnityPathError(f"expected ']' at {pos}")
    return Filter(tuple(path), negate, value), pos + 1


# -- parsing -------------------------------------------------------------------------------------


def parse_unity_yaml(data: bytes, relpath: str = "") -> list[yaml.Node]:
    """The root node of every document (PyYAML's composed nodes keep their line numbers).

    Aliases past the YAML expansion budget (orchestrator/yamlfile.py) are a parse error of the
    file, naming the alias's line: `**` and values would otherwise walk every copy.
    """
    body = data.lstrip(b"\xef\xbb\xbf")
    if not relpath.lower().endswith(".meta") and body and not is_text_serialized(body):
        raise UnityParseError(
            "binary-serialized asset, not YAML (set Asset Serialization to Force Text)", 1
        )
    # The same header rewrite as the loader's: Unity's `%TAG !u!` is scoped to the first document.
    text = HEADER_FOR_YAML.sub(rb"--- !<tag:unity3d.com,2011:\1> &\2", body)
    try:
        return [node for node in compose_all(text, UnityLoader) if node is not None]
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        problem = getattr(error, "problem", None) or error
        raise UnityParseError(
            str(problem) if isinstance(error, ExpansionRefused) else f"not valid YAML: {problem}",
            mark.line + 1 if mark is not None else None,
        ) from None


# -- evaluating ----------------------------------------------------------------------------------


def evaluate(query: UnityQuery, documents: list[yaml.Node]) -> tuple[list, list]:
    """(values, lines) of what the path selects across the documents, in document order."""
    nodes: list[yaml.Node] = []
    for document in documents:
        nodes.extend(_select(_items(document), query.steps))
    return [to_value(node) for node in nodes], [node.start_mark.line + 1 for node in nodes]


def _select(nodes: list[yaml.Node], steps: tuple[Step, ...]) -> list[yaml.Node]:
    for step in steps:
        chosen: list[yaml.Node] = []
        for node in nodes:
            chosen.extend(_apply(node, step.name))
        nodes = [n for n in chosen if all(_holds(n, f) for f in step.filters)]
    return nodes


def _apply(node: yaml.Node, name: str) -> list[yaml.Node]:
    """What one step name selects from one (non-list) node, lists expanded."""
    if name == DEEP:
        return _descendants(node)
    if not isinstance(node, yaml.MappingNode):
        return []
    found: list[yaml.Node] = []
    for key, value in node.value:
        key_text = key.value if isinstance(key, yaml.ScalarNode) else ""
        if name == ANY or key_text == name or (ANY in name and fnmatch.fnmatchcase(key_text, name)):
            found.extend(_items(value))
    return found


def _items(node: yaml.Node) -> list[yaml.Node]:
    """A node, or a list's items (nested lists flattened): lists are never selected themselves."""
    if not isinstance(node, yaml.SequenceNode):
        return [node]
    found: list[yaml.Node] = []
    for item in node.value:
        found.extend(_items(item))
    return found


def _descendants(node: yaml.Node) -> list[yaml.Node]:
    """The node and every node below it, depth first, lists expanded (iterative: deep files)."""
    found: list[yaml.Node] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, yaml.SequenceNode):
            stack.extend(reversed(current.value))
            continue
        found.append(current)
        if isinstance(current, yaml.MappingNode):
            stack.extend(value for _key, value in reversed(current.value))
    return found


def _holds(node: yaml.Node, condition: Filter) -> bool:
    steps = tuple(Step(name) for name in condition.path)
    equal = any(
        isinstance(n, yaml.ScalarNode) and n.value == condition.value
        for n in _select([node], steps)
    )
    return equal != condition.negate


def to_value(node: yaml.Node) -> Any:
    """A node as plain data: scalars as written (str), mappings as dicts, lists as lists."""
    if isinstance(node, yaml.ScalarNode):
        return node.value
    if isinstance(node, yaml.SequenceNode):
        return [to_value(item) for item in node.value]
    return {str(key.value): to_value(value) for key, value in node.value}


# -- the plug-in ---------------------------------------------------------------------------------


class UnityYamlLanguage:
    """The `PathLanguage` plug-in (stages/rules/registry.py) for Unity's YAML files."""

    name = "unity_yaml"
    suffixes: tuple[str, ...] = (".meta",) + tuple(sorted(NATIVE_EXTENSIONS))

    def parse(self, data: bytes, relpath: str) -> list[yaml.Node]:
        return parse_unity_yaml(data, relpath)

    def compile(self, expr: str) -> UnityQuery:
        return compile_unity_path(expr)

    def evaluate(self, query: UnityQuery, document: list[yaml.Node]) -> tuple[list, list]:
        return evaluate(query, document)


LANGUAGE = UnityYamlLanguage()
