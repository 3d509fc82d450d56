"""Reading rule files and compiling each rule, before any project file is read.

`load_rules(...)` returns a `RuleSet`: the runnable `CompiledRule`s (frozen, picklable: regexes,
compiled XML queries, and the *source* of custom code, which custom-code workers run: see
custom/host.py), and
what could not run — `rule_errors`, `skipped`, `warnings` — exactly as the report lists them.
A rule file that is not YAML, or not a list/mapping of rules, raises `RuleFileError`.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from orchestrator import RuleFileError, digest_value, read_yaml, unknown_key_message

from . import registry
from .conditions import Condition, ConditionError, compile_condition
from .custom.host import CustomCode, CustomCodeError, custom_code_host
from .functions import INDEX_MODULES, PATH_FUNCTIONS, PREDEFINED_FUNCTIONS, PREDEFINED_SETS
from .paths import PathSyntaxError, XmlQuery
from .regex import Regex, compile_regex
from .sandbox import CustomCodeTimeout, names_used

# Bump when a change to the engine can change what a rule reports (it enters every rule digest).
ENGINE_VERSION = 1

FIELDS = (
    "name",
    "description",
    "id",
    "severity",
    "enabled",
    "rpath",
    "not_rpath",
    "xpath",
    "filter",
    "not_filter",
    "subxpath",
    "subfilter",
    "condition",
    "func_str",
)
REQUIRED = ("rpath", "xpath", "condition")
DISPLAY_FIELDS = ("name", "description", "id", "severity", "enabled")
SEVERITIES = {
    "error": "error",
    "warning": "warning",
    "info": "info",
    "严重": "error",
    "一般": "warning",
    "提示": "info",
}
SEVERITY_RANK = {"info": 1, "warning": 2, "error": 3}


@dataclass(frozen=True)
class FilterRef:
    """A `filter`/`subfilter`: a regex, a predefined function, or a func_str function."""

    kind: str  # "regex" | "predefined" | "custom"
    text: str
    pattern: Regex | None = None
    name: str | None = None  # the function's name (without artfunc_)


@dataclass(frozen=True)
class PathRef:
    """An `xpath`/`subxpath`: its XML compiled form, and the plug-in languages that accept it."""

    text: str
    xml: XmlQuery | None
    xml_error: str | None
    languages: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompiledRule:
    position: int  # 1-based, over every rule read
    label: str  # id, else name
    severity: str  # error | warning | info
    digest: str  # what the rule checks (display fields excluded): keys results
    rpath: Regex | None
    rpath_set: str | None  # a predefined set of file paths, e.g. "res_store.ilevels"
    not_rpath: Regex | None
    xpath: PathRef
    filter: FilterRef | None
    not_filter: Regex | None
    subxpath: PathRef | None
    subfilter: FilterRef | None
    condition: Condition
    func_str: str | None
    uses_index: bool
    # Rule code may see where the checkout lies (an absolute path reaching a condition, custom
    # code): the units checking it key on the project's root. Others do not, so a checkout at
    # another path finds the units another agent ran.
    sees_root: bool = False
    code_key: str = ""  # keys this rule's func_str namespace in each process
    # Its func_str reads res_store/res_filter: custom code holds the index whole, in a worker
    # process, so a unit running it depends on the whole index (rules/traced.py).
    custom_index: bool = False
    name: str = ""
    file: str = ""


class RuleNote(NamedTuple):
    """A rule that could not be compiled (a rule error), or a warning about one that was."""

    rule: str  # its label
    message: str  # names the rule file and the rule's line


class SkippedRule(NamedTuple):
    rule: str
    reason: str


@dataclass
class RuleSet:
    rules: list[CompiledRule]
    total: int  # every rule read, rule errors and skipped ones included
    rule_errors: list[RuleNote] = field(default_factory=list)
    skipped: list[SkippedRule] = field(default_factory=list)
    warnings: list[RuleNote] = field(default_factory=list)
    index_digest: str = "none"
    timeout: float | None = 30.0  # rules.timeout: what a regex search in Python's engine gets
    # What each func_str defines (code digest and index → function names): running the code
    # to find out costs a worker process and the index sent to it, so a run that loads rules
    # it loaded before is given the names (custom code is deterministic, as every rule is).
    defined: dict[str, list[str]] = field(default_factory=dict)

    @property
    def uses_custom_code(self) -> bool:
        return any(rule.func_str for rule in self.rules)


class _RuleProblem(Exception):
    """A reason a rule cannot be compiled; it becomes the rule's entry in `rule_errors`."""


# -- reading files -------------------------------------------------------------------------------

_RULE_FILES: dict[tuple[str, bytes], list] = {}


def read_rule_file(path: str | Path) -> list[tuple[str | None, Any, int]]:
    """The rules of one file as (id from a mapping key, raw rule, line).

    Parsed files are remembered by content (YAML parsing costs more than checking a batch of
    small files); the raw rules are only read afterwards, never changed.
    """
    path = Path(path)
    try:
        before = path.read_bytes()
    except OSError:
        before = None
    key = (str(path), before) if before is not None else None
    if key is not None and key in _RULE_FILES:
        return list(_RULE_FILES[key])
    rules = _parse_rule_file(path)
    try:
        unchanged = before is not None and path.read_bytes() == before
    except OSError:
        unchanged = False
    if unchanged:  # only what was parsed from exactly those bytes is remembered
        if len(_RULE_FILES) >= 16:
            _RULE_FILES.pop(next(iter(_RULE_FILES)))
        _RULE_FILES[key] = rules  # type: ignore[index]
    return list(rules)


def _parse_rule_file(path: Path) -> list[tuple[str | None, Any, int]]:
    node, data = read_yaml(path, RuleFileError, "rule file")
    if data is None:
        return []
    if isinstance(data, list):
        lines = [item.start_mark.line + 1 for item in node.value]
        return [(None, raw, line) for raw, line in zip(data, lines)]
    if isinstance(data, dict):
        lines = [value.start_mark.line + 1 for _, value in node.value]
        return [(str(key), raw, line) for (key, raw), line in zip(data.items(), lines)]
    raise RuleFileError(
        "expected a list of rules or a mapping id: rule",
        file=str(path),
        line=node.start_mark.line + 1 if node is not None else 1,
    )


def index_digest_of(index: Any) -> str:
    """An index's digest ("none" without an index); indexes keep their own once computed, since
    digesting a 100,000-resource one takes seconds."""
    return index.digest() if hasattr(index, "digest") else "none"


# -- compiling -----------------------------------------------------------------------------------


def load_rules(
    rule_files,
    *,
    index: Any = None,
    index_digest: str | None = None,
    root: str = "",
    allow_custom_code: bool = True,
    timeout: float | None = 30.0,
    defined: dict[str, list[str]] | None = None,
) -> RuleSet:
    """Read every rule file and compile its rules (each func_str runs once, in a custom-code
    worker, to find its functions, unless `defined` — a previous RuleSet's — already says)."""
    from .functions import index_view

    if index_digest is None:
        # Any index that can digest itself keys the rules that read it (a Unity index too).
        index_digest = index_digest_of(index)
    view = index_view(index, index_digest, root)
    ruleset = RuleSet(
        [], 0, index_digest=index_digest, defined=dict(defined or {}), timeout=timeout
    )
    for path in rule_files:
        for key_id, raw, line in read_rule_file(path):
            ruleset.total += 1
            _compile_one(
                ruleset,
                key_id,
                raw,
                ruleset.total,
                f"{Path(path).name}:{line}",
                view=view,
                allow_custom_code=allow_custom_code,
                timeout=timeout,
            )
    kept = {_defined_key(rule.code_key, view) for rule in ruleset.rules if rule.func_str}
    ruleset.defined = {key: names for key, names in ruleset.defined.items() if key in kept}
    return ruleset


def _label(key_id: str | None, raw: dict, position: int) -> str | None:
    for candidate in (key_id, raw.get("id"), raw.get("name")):
        if candidate is not None and str(candidate).strip():
            return str(candidate)
    return None


def _compile_one(
    ruleset: RuleSet,
    key_id,
    raw,
    position: int,
    where: str,
    *,
    view,
    allow_custom_code: bool,
    timeout,
) -> None:
    if not isinstance(raw, dict):
        label = key_id or f"#{position}"
        ruleset.rule_errors.append(RuleNote(label, f"{where}: a rule must be a mapping"))
        return
    label = _label(key_id, raw, position)
    if label is None:
        ruleset.rule_errors.append(
            RuleNote(f"#{position}", f"{where}: the rule has neither id nor name")
        )
        return
    enabled = raw.get("enabled", True)
    if enabled is False:
        ruleset.skipped.append(SkippedRule(label, "disabled (enabled: false)"))
        return
    if raw.get("func_str") is not None and not allow_custom_code:
        ruleset.skipped.append(SkippedRule(label, "rules.allow_custom_code is false"))
        return
    try:
        rule, warnings = _compile_fields(
            raw, label, position, where, view, timeout, ruleset.defined
        )
    except _RuleProblem as exc:
        message = str(exc)  # every rule error names the rule file and the rule's line
        if not message.startswith(f"{where}: "):
            message = f"{where}: {message}"
        ruleset.rule_errors.append(RuleNote(label, message))
        return
    ruleset.rules.append(rule)
    ruleset.warnings.extend(RuleNote(label, message) for message in warnings)


def _compile_fields(
    raw: dict, label: str, position: int, where: str, view, timeout, defined: dict
) -> tuple[CompiledRule, list[str]]:
    problems: list[str] = []
    meant: set[str] = set()  # fields a misspelling stands for
    for key in raw:
        if key not in FIELDS:
            problems.append(unknown_key_message(str(key), list(FIELDS), noun="field"))
            meant.update(difflib.get_close_matches(str(key), FIELDS, n=1))
    if "enabled" in raw and not isinstance(raw["enabled"], bool):
        problems.append(f"enabled must be true or false, not {raw['enabled']!r}")
    for key in REQUIRED:
        # A misspelt field also leaves the field it meant missing: the misspelling says both.
        if key in meant and key not in raw:
            continue
        if raw.get(key) is None:
            problems.append(
                f"required field '{key}' is missing"
                if key not in raw
                else f"required field '{key}' is null"
            )
    for key in (
        "rpath",
        "not_rpath",
        "xpath",
        "filter",
        "not_filter",
        "subxpath",
        "subfilter",
        "func_str",
    ):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            problems.append(f"{key} must be a string, not {type(raw[key]).__name__}")
    given = raw.get("severity")
    # null is "not given"; any text, the empty string included, must name a severity.
    severity = SEVERITIES.get("error" if given is None else str(given).strip().lower())
    if severity is None:
        problems.append(
            f"unknown severity {raw.get('severity')!r} (error, warning, info, 严重, 一般, 提示)"
        )
    if raw.get("subfilter") is not None and raw.get("subxpath") is None:
        problems.append("subfilter without subxpath")
    if problems:
        raise _RuleProblem(f"{where}: " + "; ".join(problems))

    available = view.available
    custom_names: frozenset[str] = frozenset()
    func_str = raw.get("func_str")
    uses_index = custom_index = False
    digest = code_key = _rule_digest(raw)
    if func_str is not None:
        custom_names, custom_index = _run_custom_code(
            func_str, label, code_key, view, timeout, defined
        )
        uses_index = custom_index
    rpath, rpath_set = _compile_rpath(raw["rpath"], available)
    not_rpath = _regex("not_rpath", raw.get("not_rpath"))
    xpath = _compile_path("xpath", raw["xpath"])
    subxpath = (
        _compile_path("subxpath", raw["subxpath"]) if raw.get("subxpath") is not None else None
    )
    filter_ref = _compile_filter("filter", raw.get("filter"), custom_names, available)
    subfilter = _compile_filter("subfilter", raw.get("subfilter"), custom_names, available)
    not_filter = _regex("not_filter", raw.get("not_filter"))
    try:
        condition = compile_condition(
            raw["condition"], custom_names=custom_names, index_available=available
        )
    except ConditionError as exc:
        raise _RuleProblem(f"condition: {exc}") from None
    uses_index = (
        uses_index
        or rpath_set is not None
        or condition.uses_index
        or any(
            ref is not None
            and ref.kind == "predefined"
            and PREDEFINED_FUNCTIONS[ref.name].needs_index  # type: ignore[index]
            for ref in (filter_ref, subfilter)
        )
    )
    sees_root = func_str is not None or sees_absolute_paths(
        condition, filter_ref, not_filter, subxpath, subfilter
    )
    if condition.check is not None:  # a plug-in's own version decides its results too
        digest = digest_value([digest, condition.check.target, condition.check.version])
    warnings = [
        f"{key}: & and | mixed without precedence (evaluated left to right)"
        for key, ref in (("xpath", xpath), ("subxpath", subxpath))
        if ref is not None and ref.xml is not None and ref.xml.mixes_and_or
    ]
    rule = CompiledRule(
        position,
        label,
        severity,  # type: ignore[arg-type]
        digest,
        rpath,
        rpath_set,
        not_rpath,
        xpath,
        filter_ref,
        not_filter,
        subxpath,
        subfilter,
        condition,
        func_str,
        uses_index,
        sees_root=sees_root,
        code_key=code_key,
        custom_index=custom_index,
        name=str(raw.get("name") or ""),
        file=where,
    )
    return rule, warnings


def sees_absolute_paths(
    condition: Condition,
    filter_ref: FilterRef | None,
    not_filter: Regex | None,
    subxpath: PathRef | None,
    subfilter: FilterRef | None,
) -> bool:
    """Whether absolute paths of the index (the predefined sets hold them) reach what decides
    the rule's outcome: a condition on a set of paths or an expression over the index, the
    values of a path function when no subxpath turns them into project files (or a not_filter
    sees them first), a path function as subfilter. A built-in check sees them too, but is the
    product's code: it answers from what the paths hold, never from where they lie."""

    def path_function(ref: FilterRef | None) -> bool:
        return ref is not None and ref.kind == "predefined" and ref.name in PATH_FUNCTIONS

    path_set = condition.set_name is not None and PREDEFINED_SETS[condition.set_name].of_paths
    return (
        path_set
        or (condition.method == "expr" and condition.uses_index)
        or path_function(subfilter)
        or (path_function(filter_ref) and (subxpath is None or not_filter is not None))
    )


def _rule_digest(raw: dict) -> str:
    checked = {key: _jsonable(value) for key, value in raw.items() if key not in DISPLAY_FIELDS}
    return digest_value({"engine": ENGINE_VERSION, "rule": checked})


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


def _run_custom_code(
    source: str, label: str, digest: str, view, timeout, defined: dict
) -> tuple[frozenset[str], bool]:
    try:
        uses_index = bool(names_used(source) & set(INDEX_MODULES))
    except SyntaxError as exc:
        raise _RuleProblem(f"func_str does not compile: {exc.msg} (line {exc.lineno})") from None
    if uses_index and not view.available:
        raise _RuleProblem("func_str uses res_store/res_filter, which need a Messiah project index")
    known = defined.get(_defined_key(digest, view))
    if known is not None:  # defined when a worker first calls it
        return frozenset(known), uses_index
    try:
        names = custom_code_host().define(CustomCode(digest, label, source), view, timeout)
    except CustomCodeTimeout as exc:
        raise _RuleProblem(f"func_str: {exc}") from None
    except CustomCodeError as exc:
        if str(exc).startswith("raised SyntaxError:"):
            raise _RuleProblem(f"func_str does not compile: {str(exc)[20:]}") from None
        raise _RuleProblem(f"func_str {exc}") from None
    defined[_defined_key(digest, view)] = sorted(names)
    return frozenset(names), uses_index


def _defined_key(code_key: str, view) -> str:
    """What a func_str's names are remembered under: its code, and whether an index offers
    the predefined sets (the names its top level defines are taken not to depend on what the
    index holds, so an edit to the project never runs custom code to load the rules; nor on
    where the checkout lies: they are kept in the validate stage's state, which another
    checkout of the project may take whole)."""
    return f"{code_key}:{'index' if view.available else 'none'}"


def _regex(key: str, text: str | None) -> Regex | None:
    if text is None:
        return None
    try:
        return compile_regex(text)
    except re.error as exc:
        raise _RuleProblem(f"{key}: {exc}") from None


def _compile_rpath(text: str, index_available: bool) -> tuple[Regex | None, str | None]:
    if text.startswith("artfunc_"):
        name = text[len("artfunc_") :]
        if name not in PREDEFINED_SETS:
            raise _RuleProblem(f"rpath: unknown predefined set {text!r}")
        if not PREDEFINED_SETS[name].of_paths:
            raise _RuleProblem(f"rpath: {text!r} is not a set of file paths")
        if not index_available:
            raise _RuleProblem(f"rpath: {text!r}: predefined sets need a Messiah project index")
        return None, name
    return _regex("rpath", text), None


def _compile_path(key: str, text: str) -> PathRef:
    try:
        xml, xml_error = registry.XML.compile(text), None
    except PathSyntaxError as exc:
        xml, xml_error = None, str(exc)
    accepted = []
    for name, language in registry.path_languages().items():
        if language is registry.XML:
            continue
        try:
            registry.compiled_query(language, text)
        except Exception:  # a plug-in rejects the expression in its own way
            continue
        accepted.append(name)
    if xml is None and not accepted:
        raise _RuleProblem(f"{key}: {xml_error} (in {text!r})")
    return PathRef(text, xml, xml_error, tuple(accepted))


def _compile_filter(
    key: str, text: str | None, custom_names: frozenset[str], index_available: bool
) -> FilterRef | None:
    if text is None:
        return None
    if text.startswith("artfunc_"):
        name = text[len("artfunc_") :]
        if name in PREDEFINED_FUNCTIONS:
            if PREDEFINED_FUNCTIONS[name].needs_index and not index_available:
                raise _RuleProblem(f"{key}: {text!r} needs a Messiah project index")
            return FilterRef("predefined", text, name=name)
        if name in custom_names:
            return FilterRef("custom", text, name=name)
        if name in PREDEFINED_SETS:
            raise _RuleProblem(f"{key}: {text!r} is a set, not a function")
        raise _RuleProblem(
            f"{key}: {text!r} does not resolve to a predefined function or a "
            "function of this rule's func_str"
        )
    return FilterRef("regex", text, pattern=_regex(key, text))
