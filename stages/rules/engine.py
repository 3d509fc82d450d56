"""Checking source files against compiled rules.

The work on one project file F: `check_file` parses F once, runs every rule whose rpath
selected it (or, for a large file, one group of them: stages/rules/parts.py), and parses each
subxpath target P once for all the rules that reach it. The rules share the work on a document
through its memo (stages/rules/xmleval.py). `check_files` does this for each file of a unit (a
shard of small files) under one context, with one outcome per rule for the unit. Results are
keyed by rule digest (not position), so a cached result stays right when rules are reordered or
grouped differently.

`plan_files` decides which rules apply to which files (driver side, before any project file is
read); `validate_project` runs the whole thing in-process without the build engine.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, NamedTuple

from lxml import etree

from orchestrator import Reader, paused_gc, record, to_posix

from . import registry
from .conditions import Verdict, check, lines_of
from .custom.containment import DEFAULT_LIMITS, WorkerLimits
from .custom.host import CustomCode, CustomCodeError, custom_code_host, use_limits
from .expressions import expression_globals
from .functions import PREDEFINED_FUNCTIONS, EvalContext, index_view, reading_for
from .kept import KEPT, Parsed
from .loader import CompiledRule, FilterRef, PathRef, RuleNote, RuleSet, load_rules
from .paths import DocumentError, element_label
from .regex import RegexTimeout, regex_time_limit
from .sandbox import CustomCodeTimeout, unit_time_limits
from .traced import TracedView
from .xmleval import evaluate as xml_evaluate


@record
class Failure(NamedTuple):
    """One failing (rule, source, via): values as JSON-able data, their lines, a message."""

    source: str
    via: str | None
    errors: tuple
    lines: tuple
    message: str | None


@record
class RuleOutcome(NamedTuple):
    """What one rule found in one unit: every [source, via] it checked, and the failures.

    The pairs are lists, which the codec stores as plain msgpack arrays: a unit checks tens of
    thousands of them, and each tuple would be an extension type packed by a Python call."""

    digest: str
    checked: list[list[str | None]]
    failures: tuple[Failure, ...]


@dataclass(frozen=True)
class Shared:
    """Read-only data every unit of a run shares (sent to workers once)."""

    rules: tuple[CompiledRule, ...]
    index: Any
    index_digest: str
    root: str  # the driver's absolute project root: the index's paths are under it
    timeout: float | None = 30.0
    limits: WorkerLimits = DEFAULT_LIMITS  # rules.limits, for custom-code workers


class Prepared(NamedTuple):
    ruleset: RuleSet
    shared: Shared


class _Stop(Exception):
    """A source fails as a whole (parse failure, misbehaving filter): errors [] and a message."""


class _Absent(Exception):
    """A file named by a value does not exist (subxpath drops such values)."""


# -- planning ------------------------------------------------------------------------------------


def plan_files(ruleset: RuleSet, root: str, relpaths, index: Any) -> dict[str, list[int]]:
    """Project-relative path → positions (into `ruleset.rules`) of the rules that check it.

    A rule whose rpath or not_rpath runs past `rules.timeout` on a path (only a pattern RE2
    cannot run can, stages/rules/regex.py) selects nothing and becomes a rule error; it keeps
    its position, which the units of other files refer to."""
    relpaths = list(relpaths)
    known = set(relpaths)
    absolute = [f"{root}/{rel}" for rel in relpaths]
    selected: dict[str, list[int]] = {}
    by_pattern: dict[tuple, list[int]] = {}
    with unit_time_limits(), regex_time_limit(ruleset.timeout):
        for i, rule in enumerate(ruleset.rules):
            if rule.rpath is not None:
                key = (
                    rule.rpath.pattern,
                    rule.rpath.flags,
                    rule.not_rpath.pattern if rule.not_rpath is not None else None,
                )
                by_pattern.setdefault(key, []).append(i)
                continue
            view = index_view(index, ruleset.index_digest, root)
            members = [to_posix(path) for path in sorted(view.container(rule.rpath_set))]  # type: ignore[arg-type]
            pairs = [
                (path[len(root) + 1 :], path) for path in members if path.startswith(root + "/")
            ]
            chosen = _selecting(ruleset, [i], [(rel, path) for rel, path in pairs if rel in known])
            for rel in chosen:
                selected.setdefault(rel, []).append(i)
        for positions in by_pattern.values():
            for rel in _selecting(ruleset, positions, zip(relpaths, absolute)):
                selected.setdefault(rel, []).extend(positions)
    return {rel: sorted(selected[rel]) for rel in sorted(selected)}


def _selecting(ruleset: RuleSet, positions: list[int], paths) -> list[str]:
    """The relative paths of (relative, absolute) pairs that the rules at `positions` (one rpath
    and not_rpath) select; none, and a rule error for each, when a search runs too long."""
    first = ruleset.rules[positions[0]]
    search = first.rpath.searcher() if first.rpath is not None else None
    exclude = first.not_rpath.searcher() if first.not_rpath is not None else None
    chosen = []
    field = "rpath"
    try:
        for rel, path in paths:
            field = "rpath"
            if search is not None and not search(path):
                continue
            field = "not_rpath"
            if exclude is not None and exclude(path):
                continue
            chosen.append(rel)
    except RegexTimeout as exc:
        for i in positions:
            rule = ruleset.rules[i]
            ruleset.rule_errors.append(
                RuleNote(rule.label, f"{rule.file}: {field}: {exc} on {path!r}")
            )
        return []
    return chosen


# -- one unit ------------------------------------------------------------------------------------


class _Documents:
    """Parsed files of one unit; the unit's own file is kept, targets are parsed on demand."""

    def __init__(self, ctx: EvalContext) -> None:
        self.ctx = ctx

    def load(self, relpath: str) -> Parsed:
        """The file parsed, or raise _Stop with a message naming the file and line."""
        reader = self.ctx.reader
        try:
            data = reader.read_bytes(relpath)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise _Absent(relpath) from None
        path = self.ctx.abspath(relpath)
        digest = getattr(reader, "reads", {}).get(relpath) if KEPT.on else None
        found = KEPT.get(path, digest)
        if found is not None:  # the previous unit's part of this very file (kept.py)
            return found
        language = registry.language_for(relpath, data)
        try:
            document = language.parse(data, relpath)
            KEPT.offer(path, digest, len(data), language, document)
            return Parsed(language, document)
        except DocumentError as exc:
            where = f"{relpath}:{exc.line}" if exc.line else relpath
            raise _Stop(f"{where}: {exc.message}") from None
        except Exception as exc:  # a plug-in language's own parse error
            line = getattr(exc, "line", None) or getattr(exc, "lineno", None)
            where = f"{relpath}:{line}" if line else relpath
            raise _Stop(f"{where}: cannot parse as {language.name}: {exc}") from None


class _ConditionEnv:
    """What conditions see of the run for one (rule, source)."""

    __slots__ = ("rule", "ctx", "filepath", "timeout", "_globals")

    def __init__(self, rule: CompiledRule, ctx: EvalContext, filepath: str) -> None:
        self.rule = rule
        self.ctx = ctx
        self.filepath = filepath
        self.timeout = ctx.timeout
        self._globals: dict | None = None

    def container(self, set_name: str):
        return self.ctx.view.container(set_name)

    def expression_globals(self) -> dict:
        if self._globals is None:
            self._globals = expression_globals(self.ctx.view.namespaces())
        return self._globals

    def custom(self, name: str):
        return _custom_function(self.rule, self.ctx, name, "condition")

    def call_check(self, ref, data: list, condition: list):
        check = registry.check_callable(ref.target)
        if check.accepts_context:
            return check.function(
                data=data, filepath=self.filepath, condition=condition, context=self.ctx
            )
        return check.function(data=data, filepath=self.filepath, condition=condition)


def _custom_function(rule: CompiledRule, ctx: EvalContext, name: str, role: str):
    """Function `name` of the rule's func_str, called in a custom-code worker (custom/host.py)."""
    code = CustomCode(rule.code_key, rule.label, rule.func_str or "")

    def call(**kwargs):
        if rule.custom_index:  # custom code holds the index whole: it may read any of it
            ctx.view.whole()
        return custom_code_host().call(code, ctx.view.shared, name, role, kwargs, ctx.timeout)

    return call


def _extract(ref: PathRef, language: Any, document: Any, relpath: str) -> tuple[list, list]:
    if language is registry.XML:
        if ref.xml is None:
            raise _Stop(
                f"{relpath}: the expression {ref.text!r} is not valid for XML files: "
                f"{ref.xml_error}"
            )
        return registry.XML.evaluate(ref.xml, document)
    if language.name not in ref.languages:
        raise _Stop(
            f"{relpath}: the expression {ref.text!r} is not valid for {language.name} files"
        )
    try:
        values, lines = language.evaluate(registry.compiled_query(language, ref.text), document)
    except Exception as exc:
        raise _Stop(f"{relpath}: evaluating {ref.text!r} failed: {exc}") from None
    return list(values), list(lines)


def _apply_filter(
    ref: FilterRef, values: list, lines: list, rule: CompiledRule, ctx: EvalContext, filepath: str
) -> tuple[list, list]:
    if ref.kind == "regex":
        return _keep(ref.pattern, True, values, lines, "filter")
    if ref.kind == "predefined":
        return PREDEFINED_FUNCTIONS[ref.name].function(values, lines, ctx)  # type: ignore[index]
    function = _custom_function(rule, ctx, ref.name, "filter")  # type: ignore[arg-type]
    try:
        result = function(data=list(values), filepath=filepath)
    except CustomCodeTimeout as exc:
        raise _Stop(f"filter {ref.text}: {exc}") from None
    except CustomCodeError as exc:
        raise _Stop(f"filter {ref.text} {exc}") from None
    if not isinstance(result, (list, tuple)):
        raise _Stop(f"filter {ref.text} returned {type(result).__name__}, not a list")
    result = list(result)
    return result, lines_of(result, values, lines)


def _keep(pattern, matching: bool, values: list, lines: list, field: str) -> tuple[list, list]:
    """The values whose str() the regex finds (or, `matching` False, does not find); a search
    past rules.timeout fails the source, naming the field, the pattern and the value."""
    search = pattern.searcher()
    keep = []
    try:
        for i, value in enumerate(values):
            if bool(search(str(value))) is matching:
                keep.append(i)
    except RegexTimeout as exc:
        shown = repr(str(value))  # the value being searched
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise _Stop(f"{field}: {exc} on the value {shown}") from None
    return [values[i] for i in keep], [lines[i] for i in keep]


class _RuleRun:
    """One rule's run on one file: records into its unit's lists for the rule's digest."""

    __slots__ = ("rule", "checked", "failures")

    def __init__(self, rule: CompiledRule, checked: list, failures: list) -> None:
        self.rule = rule
        self.checked: list[list[str | None]] = checked
        self.failures: list[Failure] = failures

    def record(self, source: str, via: str | None, verdict: Verdict) -> None:
        self.checked.append([source, via])
        if verdict.failed:
            self.failures.append(
                Failure(
                    source,
                    via,
                    tuple(to_json_value(v) for v in verdict.errors),
                    tuple(verdict.lines),
                    verdict.message,
                )
            )

    def stop(self, source: str, via: str | None, message: str) -> None:
        self.record(source, via, Verdict(True, [], [], message))


class _UnitOutcomes:
    """A unit's checked pairs and failures by rule digest, across its files (in file order)."""

    def __init__(self) -> None:
        self.by_digest: dict[str, tuple[list, list]] = {}

    def runs_for(self, rules: list[CompiledRule]) -> dict[str, _RuleRun]:
        """The file's runs: its first rule of each digest, recording into the unit's lists."""
        runs: dict[str, _RuleRun] = {}
        for rule in rules:
            if rule.digest not in runs:
                lists = self.by_digest.get(rule.digest)
                if lists is None:
                    lists = self.by_digest[rule.digest] = ([], [])
                runs[rule.digest] = _RuleRun(rule, *lists)
        return runs

    def outcomes(self) -> tuple[RuleOutcome, ...]:
        return tuple(
            RuleOutcome(digest, checked, tuple(failures))
            for digest, (checked, failures) in self.by_digest.items()
        )


def check_file(relpath: str, rules: list[CompiledRule], shared: Shared, reader: Any) -> tuple:
    """Check one file against `rules`; returns a tuple of RuleOutcome (one per rule digest)."""
    return check_files([(relpath, rules)], shared, reader)


def check_files(items, shared: Shared, reader: Any) -> tuple:
    """Check each (relpath, rules) of a unit, file after file; returns a tuple of RuleOutcome,
    one per rule digest, holding its pairs and failures of every file in file order (one record
    per rule, not per (file, rule), is what a shard of small files stores and sends)."""
    # paused_gc: see orchestrator/memory.py, a large file's checking is such a burst;
    # reading_for: files that custom code reads through res_filter's functions are this unit's;
    # unit_time_limits: the per-call time limits share one SIGALRM handler (sandbox.py).
    # regex_time_limit: searches Python's engine runs stop at rules.timeout (rules/regex.py).
    use_limits(shared.limits)
    with (
        paused_gc(),
        reading_for(reader),
        unit_time_limits(),
        regex_time_limit(shared.timeout),
    ):
        view = TracedView(index_view(shared.index, shared.index_digest, shared.root), reader)
        ctx = EvalContext(shared.root, view, reader, shared.timeout or 0.0)
        documents = _Documents(ctx)
        unit = _UnitOutcomes()
        for relpath, rules in items:
            _check_file(relpath, unit.runs_for(rules), ctx, documents)
        return unit.outcomes()


def _check_file(
    relpath: str, runs: dict[str, _RuleRun], ctx: EvalContext, documents: _Documents
) -> None:
    try:
        language, document = documents.load(relpath)
    except (_Stop, _Absent) as stop:
        message = str(stop) if isinstance(stop, _Stop) else f"{relpath}: cannot read the file"
        for run in runs.values():
            run.stop(relpath, None, message)
        return
    filepath = ctx.abspath(relpath)
    targets: dict[str, list[tuple[_RuleRun, str]]] = {}
    for run in runs.values():
        rule = run.rule
        try:
            values, lines = _values_of(
                rule.xpath,
                rule.filter,
                rule.not_filter,
                rule,
                ctx,
                language,
                document,
                relpath,
                filepath,
            )
        except _Stop as stop:
            run.stop(relpath, None, str(stop))
            continue
        if rule.subxpath is None:
            run.record(relpath, None, _check(rule, values, lines, ctx, filepath))
            continue
        for target in _file_targets(values, ctx):
            targets.setdefault(target, []).append((run, relpath))
    prefetch = getattr(ctx.reader, "prefetch", None)
    if prefetch is not None and targets:
        prefetch([target for target in targets if target != relpath])
    for target, waiting in targets.items():
        _check_target(
            target,
            waiting,
            documents,
            ctx,
            Parsed(language, document) if target == relpath else None,
        )


def _values_of(
    path: PathRef,
    filter_ref: FilterRef | None,
    not_filter,
    rule: CompiledRule,
    ctx: EvalContext,
    language: Any,
    document: Any,
    relpath: str,
    filepath: str,
) -> tuple[list, list]:
    query = path.xml
    try:
        if language is registry.XML and query is not None:  # most (rule, file) pairs: no detour
            values, lines = xml_evaluate(query, document.root, document.memo)
        else:
            values, lines = _extract(path, language, document, relpath)
    except RegexTimeout as exc:  # a backtick value of the expression
        raise _Stop(f"{relpath}: the path expression {path.text!r}: {exc}") from None
    if filter_ref is not None:
        values, lines = _apply_filter(filter_ref, values, lines, rule, ctx, filepath)
    if not_filter is None:
        return values, lines
    return _keep(not_filter, False, values, lines, "not_filter")


def _check(
    rule: CompiledRule, values: list, lines: list, ctx: EvalContext, filepath: str
) -> Verdict:
    # Rule code's own faults are verdicts where it runs (conditions.py, custom/host.py); what
    # else fails here is this product's code (an InternalError, exit 3): never a rule's result.
    try:
        return check(rule.condition, values, lines, _ConditionEnv(rule, ctx, filepath))
    except CustomCodeTimeout as exc:
        return Verdict(True, [], [], str(exc))


def _file_targets(values: list, ctx: EvalContext) -> list[str]:
    """The distinct project files named by string values, in order of first naming (whether
    they exist is found out when they are read: absent ones are dropped then)."""
    found: dict[str, None] = {}
    for value in values:
        if isinstance(value, str) and value:
            rel = ctx.relpath(value)
            if rel is not None:
                found.setdefault(rel)
    return list(found)


def _check_target(
    target: str, waiting: list, documents: _Documents, ctx: EvalContext, loaded: Parsed | None
) -> None:
    try:
        language, document = loaded or documents.load(target)
    except _Absent:  # a value naming no existing file leaves the flow (the read is traced)
        return
    except _Stop as stop:
        for run, via in waiting:
            run.stop(target, via, str(stop))
        return
    filepath = ctx.abspath(target)
    for run, via in waiting:
        rule = run.rule
        try:
            values, lines = _values_of(
                rule.subxpath, rule.subfilter, None, rule, ctx, language, document, target, filepath
            )
        except _Stop as stop:
            run.stop(target, via, str(stop))
            continue
        run.record(target, via, _check(rule, values, lines, ctx, filepath))


def to_json_value(value: Any) -> Any:
    """A failing value as the report writes it (elements as "<Tag> line N")."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, etree._Element):
        return element_label(value)
    if isinstance(value, dict):
        return {str(k): to_json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json_value(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((to_json_value(v) for v in value), key=repr)
    return str(value)


# -- without the build engine --------------------------------------------------------------------


def walk_files(root: str) -> list[str]:
    """Every file under `root` (hidden ones included; links to folders not followed), sorted."""
    found: list[str] = []
    for folder, _dirs, files in os.walk(root, followlinks=False):
        rel_folder = to_posix(os.path.relpath(folder, root))
        prefix = "" if rel_folder == "." else rel_folder + "/"
        found.extend(prefix + name for name in files if os.path.isfile(os.path.join(folder, name)))
    return sorted(found)


def prepare(
    root: str,
    rule_files,
    index: Any,
    *,
    allow_custom_code: bool = True,
    timeout: float | None = 30.0,
    limits: WorkerLimits = DEFAULT_LIMITS,
) -> Prepared:
    """The rules loaded (custom code run once) and what every unit checking them shares."""
    root = to_posix(os.path.abspath(root))
    use_limits(limits)  # loading runs custom code once
    ruleset = load_rules(
        rule_files,
        index=index,
        root=root,
        allow_custom_code=allow_custom_code,
        timeout=timeout,
    )
    shared = Shared(tuple(ruleset.rules), index, ruleset.index_digest, root, timeout, limits)
    return Prepared(ruleset, shared)


FILES_PER_RUN = 64  # validate_project's files per check_files call (about a stage shard's)


def validate_project(
    root: str,
    rule_files,
    index: Any,
    files=None,
    allow_custom_code: bool = True,
    timeout: float | None = 30.0,
    limits: WorkerLimits = DEFAULT_LIMITS,
) -> dict:
    """Check a project in this process; returns the JSON document (spec/rules.md)."""
    from .report import build_document

    ruleset, shared = prepare(
        root, rule_files, index, allow_custom_code=allow_custom_code, timeout=timeout, limits=limits
    )
    relpaths = walk_files(shared.root) if files is None else sorted(files)
    plan = plan_files(ruleset, shared.root, relpaths, index)
    items = [(relpath, [shared.rules[i] for i in positions]) for relpath, positions in plan.items()]
    # In runs of files, as the validate stage's shards are checked (one context per run).
    results = [
        check_files(items[start : start + FILES_PER_RUN], shared, Reader(shared.root))
        for start in range(0, len(items), FILES_PER_RUN)
    ]
    return build_document(ruleset, results)


__all__ = [
    "Failure",
    "RuleOutcome",
    "Shared",
    "check_file",
    "check_files",
    "plan_files",
    "prepare",
    "validate_project",
    "walk_files",
    "to_json_value",
]
