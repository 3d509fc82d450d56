"""The rule path language for Cocos files: `.meta` files and serialized assets (JSON).

Registered as `cocos_json` (entry-point group `orchestrate.path_languages`). Expressions use the
same dotted-path dialect as `unity_yaml` (docs/unity.md): `userData.maxWidth`,
`subMetas.*.userData.width`, `**.__uuid__`, `**[__type__==cc.Sprite]._spriteFrame.__uuid__`,
filters `[path==value]` / `[path!=value]`. A serialized asset is a JSON array, which is
transparent: a step applies to each of its objects. Values are scalars as written (`true`,
`2048`, strings) or dicts, each with its 1-based line.

`.meta` and `.prefab`/`.anim` are also Unity's: this language claims only files whose content is
JSON (an object or an array), so a Unity project's YAML keeps the `unity_yaml` language.
"""

from __future__ import annotations

import orjson
import yaml

from ..unity.paths import UnityQuery, compile_unity_path, evaluate

SUFFIXES = (
    ".meta",
    ".scene",
    ".prefab",
    ".anim",
    ".mtl",
    ".pmtl",
    ".rpp",
    ".pac",
    ".animgraph",
    ".animgraphvari",
    ".animask",
)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class CocosParseError(ValueError):
    """A file that is not valid JSON; `line` is 1-based (None when unknown)."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


def parse_cocos_json(data: bytes) -> list[yaml.Node]:
    """The document as a node tree with line numbers (JSON is YAML: libyaml composes it)."""
    body = data.lstrip(b"\xef\xbb\xbf")
    try:
        orjson.loads(body)  # strict JSON first: YAML would accept what Creator cannot read
    except orjson.JSONDecodeError as error:
        raise CocosParseError(f"not valid JSON: {error.msg}", error.lineno) from None
    try:  # strict JSON has no anchors or aliases: nothing for the YAML budget (yamlfile.py)
        node = yaml.compose(body, Loader=_LOADER)
    except yaml.YAMLError as error:  # JSON that YAML reads differently (a tab in indentation)
        mark = getattr(error, "problem_mark", None)
        raise CocosParseError(
            f"cannot read: {getattr(error, 'problem', None) or error}",
            mark.line + 1 if mark is not None else None,
        ) from None
    return [node] if node is not None else []


def is_json(data: bytes) -> bool:
    """Whether the content starts like a JSON object or array."""
    head = data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    return head in (b"{", b"[")


class CocosJsonLanguage:
    """The `PathLanguage` plug-in (stages/rules/registry.py) for Creator's JSON files."""

    name = "cocos_json"
    suffixes: tuple[str, ...] = SUFFIXES

    def accepts(self, data: bytes) -> bool:
        return is_json(data)

    def parse(self, data: bytes, relpath: str) -> list[yaml.Node]:
        return parse_cocos_json(data)

    def compile(self, expr: str) -> UnityQuery:
        return compile_unity_path(expr)

    def evaluate(self, query: UnityQuery, document: list[yaml.Node]) -> tuple[list, list]:
        return evaluate(query, document)


LANGUAGE = CocosJsonLanguage()
