"""The `condition` of a rule: compiled once at load, checked per source.

Checking returns the failing values (and their lines) in order, plus a message when checking a
value raised or a function misbehaved (spec/rules.md "Conditions").
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass
from typing import Any

from lxml import etree

from orchestrator import MissingInput, OrchestrateError

from .custom.host import CustomCodeError
from .expressions import ExpressionError, compile_expression, expression_globals
from .functions import PREDEFINED_SETS, RuleModules
from .paths import element_label
from .registry import CHECK_PREFIXES, CheckRef, available_checks
from .sandbox import CustomCodeTimeout, time_limit

NO_INDEX = RuleModules(None, None)  # for expressions that name neither

METHODS = {
    "存在": "exists",
    "exists": "exists",
    "不存在": "not_exists",
    "not_exists": "not_exists",
    "存在于": "in",
    "in": "in",
    "不存在于": "not_in",
    "not_in": "not_in",
    "空集合": "empty",
    "empty": "empty",
    "非空集合": "not_empty",
    "not_empty": "not_empty",
    "唯一": "unique",
    "unique": "unique",
    "满足表达式": "expr",
    "expr": "expr",
}
COMPARISONS = {
    ">": operator.gt,
    "<": operator.lt,
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
}
MAX_MESSAGES = 5


class ConditionError(ValueError):
    """A condition that does not compile (a rule error)."""


@dataclass(frozen=True)
class Condition:
    """A compiled condition. `raw` is the list as written (custom functions receive it)."""

    method: str  # a METHODS value, "compare", "custom" or "check"
    raw: tuple
    set_name: str | None = None  # in / not_in: a predefined set
    members: tuple | None = None  # in / not_in: a literal collection
    hashed: frozenset | None = None  # its hashable members, for fast lookups
    unhashable: tuple = ()  # its other members
    op: str | None = None
    number: float | None = None  # compare: the operand as a float, when it converts
    text: str | None = None  # compare: the operand as a string; expr: the expression
    function: str | None = None  # custom: the func_str function's name
    check: CheckRef | None = None
    uses_index: bool = False


def compile_condition(
    raw: Any, *, custom_names: frozenset[str], index_available: bool
) -> Condition:
    """Compile a condition list, raising ConditionError with the reason."""
    if not isinstance(raw, list) or not raw:
        raise ConditionError("must be a non-empty list: the method, then its arguments")
    method = raw[0]
    if not isinstance(method, str):
        raise ConditionError(f"the method must be a string, got {method!r}")
    raw_t = tuple(raw)
    args = raw[1:]
    if method in COMPARISONS:
        _need(args, method, "a value")
        text = str(args[0])
        try:
            number = float(text.strip())
        except ValueError:
            number = None
        return Condition("compare", raw_t, op=method, number=number, text=text)
    if method in METHODS:
        kind = METHODS[method]
        if kind in ("in", "not_in"):
            _need(args, method, "a set")
            return _membership(kind, raw_t, args[0], index_available)
        if kind == "expr":
            _need(args, method, "an expression")
            return _expression(raw_t, args[0], index_available)
        return Condition(kind, raw_t)
    for prefix in CHECK_PREFIXES:
        if method.startswith(prefix):
            ref = available_checks().get(method[len(prefix) :])
            if ref is None:
                known = ", ".join(sorted(available_checks()))
                raise ConditionError(f"unknown check {method!r} (registered: {known})")
            return Condition("check", raw_t, check=ref, uses_index=True)
    if method.startswith("func_"):
        name = method[len("func_") :]
        if name in custom_names:
            return Condition("custom", raw_t, function=name)
        ref = available_checks().get(name)
        if ref is not None:
            return Condition("check", raw_t, check=ref, uses_index=True)
        raise ConditionError(f"{method!r}: no function {name!r} in this rule's func_str")
    raise ConditionError(f"unknown method {method!r}")


def _need(args: list, method: str, what: str) -> None:
    if not args:
        raise ConditionError(f"{method!r} needs {what}")


def _membership(kind: str, raw: tuple, operand: Any, index_available: bool) -> Condition:
    if isinstance(operand, str) and operand.startswith("artfunc_"):
        name = operand[len("artfunc_") :]
        if name not in PREDEFINED_SETS:
            raise ConditionError(
                f"unknown predefined set {operand!r} (known: "
                f"{', '.join('artfunc_' + n for n in PREDEFINED_SETS)})"
            )
        if not index_available:
            raise ConditionError(f"{operand!r}: predefined sets need a Messiah project index")
        return Condition(kind, raw, set_name=name, uses_index=True)
    if isinstance(operand, str):
        try:
            value = ast.literal_eval(operand.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise ConditionError(
                f"{operand!r} is neither artfunc_<set> nor a Python list "
                "literal (quote the items: \"['A', 'B']\")"
            ) from None
        if not isinstance(value, (list, tuple, set, frozenset)):
            raise ConditionError(f"{operand!r} is not a list, tuple or set")
        members = tuple(value)
    elif isinstance(operand, list):
        members = tuple(operand)
    else:
        raise ConditionError(f"{operand!r} is not a set: use artfunc_<set> or a list")
    hashed, unhashable = [], []
    for member in members:
        try:
            hash(member)
            hashed.append(member)
        except TypeError:
            unhashable.append(member)
    return Condition(
        kind, raw, members=members, hashed=frozenset(hashed), unhashable=tuple(unhashable)
    )


def _expression(raw: tuple, source: Any, index_available: bool) -> Condition:
    if not isinstance(source, str):
        raise ConditionError(f"the expression must be a string, got {source!r}")
    try:
        compiled = compile_expression(source)
    except ExpressionError as exc:
        raise ConditionError(f"expression {source!r}: {exc}") from None
    if compiled.uses_index and not index_available:
        raise ConditionError(
            "the expression uses res_store/res_filter, which need a Messiah project index"
        )
    return Condition("expr", raw, text=source, uses_index=compiled.uses_index)


# -- checking ------------------------------------------------------------------------------------


@dataclass
class Verdict:
    """The outcome for one source: failed or not, the failing values, their lines, a message."""

    failed: bool
    errors: list
    lines: list
    message: str | None = None


PASS = Verdict(False, [], [])


def hashable(value: Any) -> Any:
    """The form values are compared in by 唯一 (and matched back to their lines)."""
    if isinstance(value, etree._Element):
        return element_label(value)
    if isinstance(value, (list, tuple)):
        return tuple(hashable(v) for v in value)
    if isinstance(value, dict):
        items = [(hashable(k), hashable(v)) for k, v in value.items()]
        try:
            return tuple(sorted(items))
        except TypeError:
            return tuple(sorted(items, key=repr))
    if isinstance(value, (set, frozenset)):
        return frozenset(hashable(v) for v in value)
    try:
        hash(value)
    except TypeError:
        return ("<unhashable>", repr(value))
    return value


def is_true(value: Any) -> bool:
    """Python truth, except that an extracted element is always true."""
    return True if isinstance(value, etree._Element) else bool(value)


def check(condition: Condition, values: list, lines: list, env) -> Verdict:
    """Check a source's values. `env` gives `container(set)`, `expression_globals()`,
    `custom(name)`, `call_check(ref, ...)`, `filepath`, `timeout`."""
    method = condition.method
    if method == "empty":
        return Verdict(True, list(values), list(lines)) if values else PASS
    if method == "not_empty":
        return PASS if values else Verdict(True, [], [])
    if method == "unique":
        return _unique(values, lines)
    if method in ("custom", "check"):
        return _call_function(condition, values, lines, env)
    if not values:
        return PASS
    if method == "expr":
        return _expression_verdict(condition, values, lines, env)
    if method in ("in", "not_in"):
        verdict = _membership_verdict(condition, values, lines, env)
        if verdict is not None:
            return verdict
    return _per_value(_value_test(condition, env), values, lines)


def _membership_verdict(condition: Condition, values: list, lines: list, env) -> Verdict | None:
    """存在于 / 不存在于 in one pass over the values (a repository's GUIDs and dependencies:
    hundreds of thousands at 100,000 resources); None when a value is unhashable, which the
    per-value path then checks (and reports) one by one, with the reason."""
    if condition.set_name is not None:
        container: Any = env.container(condition.set_name)
    elif not condition.unhashable:
        container = condition.hashed
    else:
        return None
    outcome = condition.method == "not_in"  # the membership that fails a value
    try:
        failing = [i for i, value in enumerate(values) if (value in container) is outcome]
    except Exception:  # an unhashable value (or a strange one): checked one by one
        return None
    if not failing:
        return PASS
    return Verdict(True, [values[i] for i in failing], [lines[i] for i in failing])


def _value_test(condition: Condition, env):
    method = condition.method
    if method == "exists":
        return is_true
    if method == "not_exists":
        return lambda d: not is_true(d)
    if method == "compare":
        compare = COMPARISONS[condition.op]  # type: ignore[index]
        number = condition.number
        if number is None:
            text = condition.text
            return lambda d: compare(str(d), text)  # type: ignore[arg-type]

        def numeric(d):
            kind = type(d)
            return compare(
                float(d) if kind is float or kind is int else float(str(d).strip()), number
            )

        return numeric
    if condition.set_name is not None:
        container = env.container(condition.set_name)

        def member(d):
            return d in container
    else:
        hashed, members, unhashable = condition.hashed, condition.members, condition.unhashable

        def member(d):
            try:
                return d in hashed or (bool(unhashable) and d in unhashable)
            except TypeError:  # an unhashable value: compare by equality, as a list does
                return d in members

    if method == "in":
        return member
    return lambda d: not member(d)


def _expression_verdict(condition: Condition, values: list, lines: list, env) -> Verdict:
    """满足表达式 over a source's values, under `rules.timeout`; messages name the expression
    (a rule may hold one among many, and the value alone does not say what refused it)."""
    named = f"expression {condition.text!r}"
    try:
        with time_limit(env.timeout):
            verdict = _per_value(_expression_test(condition, env), values, lines)
    except CustomCodeTimeout as exc:
        return Verdict(True, [], [], f"{named} timed out after {exc.seconds:g} s (rules.timeout)")
    if verdict.message is None:
        return verdict
    return Verdict(True, verdict.errors, verdict.lines, f"{named}: {verdict.message}")


def _expression_test(condition: Condition, env):
    compiled = compile_expression(condition.text)  # type: ignore[arg-type]
    code = compiled.code
    # An expression naming neither index module gets none: building the modules decodes the
    # index, a second at 100,000 resources, for expressions that only look at `d`.
    scope = env.expression_globals() if compiled.uses_index else dict(_NO_INDEX_GLOBALS)

    def test(d):
        scope["d"] = d
        return eval(code, scope)  # noqa: S307 - checked by an allow-list, guarded attributes

    return test


# Copied for each (rule, source) as the literal was built: a copy of ~50 names is a quarter of
# the cost, and expressions on small files run once per file.
_NO_INDEX_GLOBALS = expression_globals(NO_INDEX)


def _per_value(test, values: list, lines: list) -> Verdict:
    errors, error_lines, messages = [], [], []
    for i, value in enumerate(values):
        try:
            if test(value):
                continue
        except (KeyboardInterrupt, CustomCodeTimeout, MissingInput, OrchestrateError):
            raise  # MissingInput: the executor resends the unit; OrchestrateError: the product's
        except BaseException as exc:  # a value that cannot be checked fails, with the reason
            messages.append(f"{_short(value)}: {type(exc).__name__}: {exc}")
        errors.append(value)
        error_lines.append(lines[i])
    if not errors:
        return PASS
    return Verdict(True, errors, error_lines, join_messages(messages))


def _unique(values: list, lines: list) -> Verdict:
    seen, reported = set(), set()
    errors, error_lines = [], []
    for value, line in zip(values, lines):
        # Strings (most values) are their own comparison form: no call per value.
        key = value if type(value) is str else hashable(value)
        if key in seen:
            if key not in reported:
                reported.add(key)
                errors.append(value)
                error_lines.append(line)
        else:
            seen.add(key)
    return Verdict(True, errors, error_lines) if errors else PASS


def _call_function(condition: Condition, values: list, lines: list, env) -> Verdict:
    label = condition.raw[0]
    try:
        if condition.method == "custom":
            # a custom-code worker enforces the timeout itself, by killing the worker
            result = env.custom(condition.function)(
                data=list(values), filepath=env.filepath, condition=list(condition.raw)
            )
        else:
            with time_limit(env.timeout):
                result = env.call_check(condition.check, list(values), list(condition.raw))
    except CustomCodeTimeout as exc:
        return Verdict(True, [], [], f"condition {label}: {exc}")
    except CustomCodeError as exc:
        return Verdict(True, [], [], f"condition {label} {exc}")
    except (MissingInput, KeyboardInterrupt):  # MissingInput: the executor resends the unit
        raise
    except OrchestrateError:  # this product's own failure (custom/host.py): not the rule's
        raise
    except BaseException as exc:  # SystemExit too: a check must not end the build
        return Verdict(True, [], [], f"condition {label} raised {type(exc).__name__}: {exc}")
    return interpret_return(result, values, lines, label)


def interpret_return(result: Any, values: list, lines: list, label: str) -> Verdict:
    """Read what a custom or built-in condition returned (2.0 list, 1.x (ok, list), …)."""
    if result is None or result is True:
        return PASS
    if result is False:
        return Verdict(True, [], [])
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], bool):
        result = result[1]  # 1.x: (ok, failing values); ok is ignored, the list decides
        if result is None:
            return PASS
    if isinstance(result, str):
        failing = [result]
    elif isinstance(result, (list, tuple)):
        failing = list(result)
    else:
        return Verdict(
            True,
            [],
            [],
            f"condition {label} returned {type(result).__name__}, not a list of failing values",
        )
    if not failing:
        return PASS
    return Verdict(True, failing, lines_of(failing, values, lines))


def lines_of(failing: list, values: list, lines: list) -> list:
    """The line of each failing value: that of the first unused equal value among `values`."""
    wanted = {hashable(value) for value in failing}
    available: dict[Any, list] = {}
    for value, line in zip(values, lines):
        # Strings (most values) are their own comparison form: no call per value.
        key = value if type(value) is str else hashable(value)
        if key in wanted:
            available.setdefault(key, []).append(line)
    used: dict[Any, int] = {}
    out = []
    for value in failing:
        key = hashable(value)
        queue = available.get(key)
        taken = used.get(key, 0)
        if queue is not None and taken < len(queue):
            out.append(queue[taken])
            used[key] = taken + 1
        else:
            out.append(None)
    return out


def _short(value: Any) -> str:
    if isinstance(value, etree._Element):
        return element_label(value)
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def join_messages(messages: list[str]) -> str | None:
    if not messages:
        return None
    shown = "; ".join(messages[:MAX_MESSAGES])
    if len(messages) > MAX_MESSAGES:
        shown += f"; and {len(messages) - MAX_MESSAGES} more"
    return shown
