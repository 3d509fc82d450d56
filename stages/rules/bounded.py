"""What an expression computes, bounded before it is computed.

`rules.timeout` stops an expression between two steps of Python code, not inside one C call:
`'x'.ljust(3 * 10**9)` asks for 3 GB at once, `sum([[0]] * 10**5, [])` copies quadratically,
`str([s] * 10**6)` writes a million copies of a shared string. So every operation an expression
can reach whose result is not bounded by a constant times its operands is checked here first,
against MAX_RESULT_ITEMS (characters, bytes or items) and MAX_RESULT_BITS (integers):

- operators (`bounded_binop`): `*` (repetition, big integers), `+` (concatenation, which
  repeated doubles), `**`, `<<`, `//` and `%` of big integers (quadratic division), and `%`
  formatting (widths and precisions, `%s` of shared structures);
- `str(x)`, f-string fields and `%s`: the length of the text, counted over the value's structure
  (`text_size`), shared parts once per appearance, as the text would hold them;
- `sum` (linear concatenation instead of quadratic), `*x` and `**x` unpacking;
- the methods whose result grows with an argument (`ljust`, `center`, `rjust`, `zfill`,
  `expandtabs`, `join`, `replace`, `translate`, `int.to_bytes`, `list.extend`), those that grow
  by a constant factor (`upper`, `encode`, ..., checked after: chained, they would compound),
  and re's `sub`, `subn`, `findall`, `split` and `Match.expand`, whose results can be
  quadratic in the text (groups inside lookarounds): run match by match, counted as they go.

Results are bounded where they are made; work is bounded where it is done. Comparing, hashing
and sorting visit a value's whole structure, shared parts once per appearance: `[s] * 10**6 ==
[t] * 10**6` compares a million copies of `s`, and a tuple built by doubling `(x, x)` forty
times hashes 2^40 items, each time in one C call. So comparisons between computed values,
membership, subscripts and the keys of sets and dicts, and `sorted`/`min`/`max` (and the list
methods that compare) count that work first (`work`), against MAX_WORK.

A refusal raises ExpressionRefused, which fails the value with its message.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from operator import eq, ge, gt, is_, is_not, le, lt, ne
from types import SimpleNamespace
from typing import Any

from lxml import etree

from .traced import TracedEntries

#: The largest result an expression may make in one operation: characters of a string, bytes,
#: items of a container; and bits of an integer.
MAX_RESULT_ITEMS = 10_000_000
MAX_RESULT_BITS = 1 << 20
#: Units of work (a character compared, an item visited) one comparison, hash or sort may do:
#: about a tenth of a second of C. Counting them (or a text's length) visits at most MAX_VISITS
#: items: a structure with more is refused, counting it would cost what it guards against.
MAX_WORK = 100_000_000
MAX_VISITS = 1_000_000
#: (quotient bits) x (divisor bits) of an integer division: schoolbook division is quadratic
#: (2^20-bit by 2^19-bit integers: about a second in one C call).
MAX_DIVISION_WORK = 1 << 34


_VIEWS: tuple[type, ...] = (type({}.keys()), type({}.values()), type({}.items()))


class ExpressionRefused(Exception):
    """An expression reached, at run time, something expressions may not use."""


def refuse_size(what: str, size: int, unit: str = "items") -> None:
    if size > MAX_RESULT_ITEMS:
        raise ExpressionRefused(
            f"{what} would make {size:,} {unit}: too large (at most {MAX_RESULT_ITEMS:,})"
        )


# -- the length of a value's text ----------------------------------------------------------------


class _TooLong(Exception):
    pass


def text_size(value: Any, *, as_repr: bool = False, limit: int = MAX_RESULT_ITEMS) -> int:
    """An upper bound of len(str(value)) (of repr(value) with `as_repr`), counted until it
    passes `limit` (then any number above it)."""
    return _measure(_count, value, as_repr, limit)


def _measure(walk: Callable, value: Any, option: bool, limit: int) -> int:
    """The units a counting walk spends over `value`, or `limit` + 1 once it passes `limit`
    or visits MAX_VISITS items (the walk costs at most that many steps)."""
    budget = [limit, MAX_VISITS]
    try:
        walk(value, option, budget, set())
    except _TooLong:
        return limit + 1
    return limit - budget[0]


def check_text(value: Any, what: str, *, as_repr: bool = False) -> None:
    refuse_size(what, text_size(value, as_repr=as_repr), "characters")


def _spend(budget: list[int], amount: int) -> None:
    """Count `amount` units and one item visited; past either limit, stop counting."""
    budget[0] -= amount
    budget[1] -= 1
    if budget[0] < 0 or budget[1] < 0:
        raise _TooLong


def _count(value: Any, as_repr: bool, budget: list[int], ancestors: set[int]) -> None:
    kind = type(value)
    if kind is str:
        if not as_repr:
            _spend(budget, len(value))
        elif value.isprintable():  # quotes, and a backslash before ' and \
            _spend(budget, len(value) + value.count("\\") + value.count("'") + 2)
        else:  # \x.., \u...., \U........
            _spend(budget, 10 * len(value) + 2)
    elif kind is bytes or kind is bytearray:
        _spend(budget, 4 * len(value) + 14)
    elif kind is bool or value is None:
        _spend(budget, 5)
    elif kind is int:
        _spend(budget, value.bit_length() * 3 // 10 + 2)
    elif kind is float:
        _spend(budget, 24)
    elif kind is complex:
        _spend(budget, 52)
    elif isinstance(value, (list, tuple, set, frozenset, dict, SimpleNamespace, etree._Attrib)):
        _count_container(value, budget, ancestors)
    elif isinstance(value, _VIEWS):
        _spend(budget, 16)
        _count_container(value, budget, ancestors)
    elif isinstance(value, etree._Element):
        tag = value.tag
        _spend(budget, (len(tag) if isinstance(tag, str) else 16) + 40)
    else:  # patterns and matches (Python shortens them), functions, generators: a short repr
        _spend(budget, 300)


def _count_container(value: Any, budget: list[int], ancestors: set[int]) -> None:
    identity = id(value)
    if identity in ancestors:  # repr writes [...] for a container inside itself
        _spend(budget, 5)
        return
    _spend(budget, len(type(value).__name__) + 4)  # brackets, or Name(...) of a subclass
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple: field=value
        _spend(budget, sum(len(name) + 1 for name in value._fields))
    ancestors.add(identity)
    try:
        if isinstance(value, (SimpleNamespace, etree._Attrib)):
            items: Iterable = (
                value.__dict__ if isinstance(value, SimpleNamespace) else value
            ).items()
        else:
            items = value.items() if isinstance(value, dict) else value
        _spend(budget, 2 * len(value.__dict__ if isinstance(value, SimpleNamespace) else value))
        for item in items:
            if isinstance(value, (dict, SimpleNamespace, etree._Attrib)):
                _count(item[0], True, budget, ancestors)
                _spend(budget, 2)
                _count(item[1], True, budget, ancestors)
            else:
                _count(item, True, budget, ancestors)
    finally:
        ancestors.discard(identity)


# -- the work of comparing, hashing and sorting ---------------------------------------------------

_SCALARS = frozenset({str, bytes, int, float, complex, bool, type(None)})
# TracedEntries: a predefined set, looked up by key (its members are the index's entries).
_HASHED_CONTAINERS: tuple[type, ...] = (
    dict,
    set,
    frozenset,
    type({}.keys()),
    type({}.items()),
    TracedEntries,
)
_FIXED_COST = frozenset({int, float, complex, bool, type(None)})  # compared in a bounded time
_TEXTS = frozenset({str, bytes})


def work(value: Any, limit: int = MAX_WORK, *, hashing: bool = False) -> int:
    """The units of work comparing `value` (or, with `hashing`, hashing it) can cost: each
    string its length, each container 1 and its items', shared parts once per appearance;
    counted until it passes `limit` (then any number above it). Hashing visits only tuples
    (strings and frozensets keep their hashes)."""
    return _measure(_walk, value, hashing, limit)


def _walk(value: Any, hashing: bool, budget: list[int], ancestors: set[int]) -> None:
    kind = type(value)
    if kind in _SCALARS:
        _spend(budget, 1 if hashing or kind not in (str, bytes) else len(value) + 1)
        return
    if hashing and not isinstance(value, tuple):
        _spend(budget, 1)
        return
    if not isinstance(value, (list, tuple, set, frozenset, dict, *_VIEWS)):
        _spend(budget, 1)  # elements, patterns, matches...: compared by identity, or not at all
        return
    identity = id(value)
    _spend(budget, 1)
    if identity in ancestors:
        return
    ancestors.add(identity)
    try:
        items: Any = value.items() if isinstance(value, dict) else value
        for item in items:
            _walk(item, hashing, budget, ancestors)
    finally:
        ancestors.discard(identity)


def refuse_work(what: str, units: int) -> None:
    if units > MAX_WORK:
        raise ExpressionRefused(
            f"{what} would take over {MAX_WORK:,} steps inside one call: too long (a value "
            "shared many times over?)"
        )


def check_hash(key: Any, what: str = "hashing a key") -> Any:
    """`key`, once hashing it is known to be bounded (a tuple's hash is not kept)."""
    if type(key) not in _SCALARS:
        refuse_work(what, work(key, hashing=True))
    return key


def check_membership(item: Any, container: Any) -> None:
    """`item in container`: a hash for sets and dicts, else a comparison with each member."""
    kind = type(container)
    if kind in _SCALARS:  # a substring test: linear
        return
    if isinstance(container, _HASHED_CONTAINERS):
        check_hash(item, "a membership test")
        return
    if not hasattr(container, "__len__"):
        return  # an iterator: iterated step by step, or by Python code
    count = len(container)
    if count * (work(item, MAX_WORK // max(count, 1)) + 1) > MAX_WORK:
        refuse_work("a membership test", work(container))


def check_comparison(left: Any, right: Any) -> None:
    """Comparing two containers visits at most the smaller of them."""
    if type(left) in _SCALARS or type(right) in _SCALARS:
        return
    if work(left) > MAX_WORK:
        refuse_work("a comparison", work(right))


_COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "Eq": eq,
    "NotEq": ne,
    "Lt": lt,
    "LtE": le,
    "Gt": gt,
    "GtE": ge,
    "Is": is_,
    "IsNot": is_not,
}


def bounded_compare(operator: str, left: Any, right: Any) -> Any:
    """`left op right`, its work bounded first (`is` needs none)."""
    if operator == "In" or operator == "NotIn":
        if type(right) not in _SCALARS:
            check_membership(left, right)
        return (left in right) if operator == "In" else (left not in right)
    if type(left) not in _SCALARS and type(right) not in _SCALARS and operator[0] != "I":
        check_comparison(left, right)
    return _COMPARISONS[operator](left, right)


def bounded_chain(operators: tuple[str, ...], *operands: Callable[[], Any]) -> Any:
    """`a < b <= c`: each operand evaluated when Python would, each comparison bounded."""
    left = operands[0]()
    result: Any = True
    for operator, thunk in zip(operators, operands[1:]):
        right = thunk()
        result = bounded_compare(operator, left, right)
        if not result:
            return result
        left = right
    return result


def bounded_item(container: Any, key: Any) -> Any:
    """`container[key]`: a dict hashes the key first."""
    if type(key) not in _SCALARS and isinstance(container, dict):
        check_hash(key, "a lookup")
    return container[key]


def _sort_work(items: list, key: Callable | None) -> Callable | None:
    """Refuse a sort (or min, max) whose comparisons would do too much work; the key function
    to use, its results counted as they come."""
    if key is None:
        kinds = set(map(type, items))
        if kinds <= _FIXED_COST:
            return None
        levels = max(len(items), 2).bit_length()
        if kinds <= _TEXTS:  # strings: each comparison reads at most the shorter
            refuse_work("sorting", (sum(map(len, items)) + len(items)) * levels)
        else:
            refuse_work("sorting", work(items, MAX_WORK // levels) * levels)
        return None
    levels = max(len(items), 2).bit_length()
    budget = [MAX_WORK // levels]

    def counted(item):
        result = key(item)
        budget[0] -= work(result, budget[0] + 1)
        if budget[0] < 0:
            refuse_work("sorting", MAX_WORK + 1)
        return result

    return counted


def bounded_sorted(iterable: Iterable, /, *, key: Callable | None = None, reverse: bool = False):
    items = list(iterable)
    return sorted(items, key=_sort_work(items, key), reverse=reverse)


def _extreme(function: Callable) -> Callable:
    def bounded(*args, key=None, **kwargs):
        items = list(args[0]) if len(args) == 1 else list(args)
        counted = _sort_work(items, key)
        if len(args) == 1:
            return function(items, key=counted, **kwargs) if key else function(items, **kwargs)
        return function(*items, key=counted, **kwargs) if key else function(*items, **kwargs)

    bounded.__name__ = function.__name__
    return bounded


bounded_min = _extreme(min)
bounded_max = _extreme(max)


class BoundedType:
    """A builtin type as expressions call it: the call checked first; its attributes
    (`str.join`, `dict.fromkeys`) are the type's own, through guarded_attribute."""

    __slots__ = ("kind", "call")

    def __init__(self, kind: type, call: Callable) -> None:
        self.kind = kind
        self.call = call

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.call(*args, **kwargs)

    def __repr__(self) -> str:
        return repr(self.kind)


def _hashed_items(iterable: Any, what: str) -> Any:
    """An iterable whose items are about to be hashed, with their hashing bounded."""
    if isinstance(iterable, (set, frozenset, dict, *_VIEWS, str, bytes)):
        return iterable  # hashed already, or characters
    items = list(iterable)
    if not all(type(item) in _SCALARS for item in items):
        refuse_work(what, sum(work(item, MAX_WORK, hashing=True) for item in items))
    return items


def _set(*args: Any) -> set:
    return set(_hashed_items(args[0], "set()")) if args else set()


def _dict(*args: Any, **kwargs: Any) -> dict:
    if args and not isinstance(args[0], dict) and not hasattr(args[0], "keys"):
        pairs = list(args[0])
        keys = [pair[0] for pair in pairs if isinstance(pair, (tuple, list)) and pair]
        _hashed_items(keys, "dict()")
        args = (pairs, *args[1:])
    return dict(*args, **kwargs)


# -- operators -----------------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return type(value) is int or type(value) is bool


def _sized(value: Any) -> int | None:
    if isinstance(value, (str, bytes, bytearray, list, tuple)):
        return len(value)
    return None


def bounded_binop(operator: str, left: Any, right: Any) -> Any:
    """`left op right` for the operators of `BOUNDED_OPERATORS`, refusing results (or work)
    too large to compute in one C call."""
    if operator == "Add":
        size = _sized(left)
        if size is not None and _sized(right) is not None:
            refuse_size(f"concatenating a {type(left).__name__}", size + len(right))
        return left + right
    if operator == "Mult":
        if _is_int(left) and _is_int(right):
            if left.bit_length() + right.bit_length() > MAX_RESULT_BITS:
                raise ExpressionRefused(
                    f"multiplying integers of {left.bit_length():,} and {right.bit_length():,} "
                    "bits is too large to compute"
                )
            return left * right
        for sequence, count in ((left, right), (right, left)):
            size = _sized(sequence)
            if size is not None and _is_int(count) and size * count > MAX_RESULT_ITEMS:
                raise ExpressionRefused(
                    f"repeating a {type(sequence).__name__} of {size} {count} times is too large"
                )
        return left * right
    if operator == "Pow":
        if (
            _is_int(left)
            and _is_int(right)
            and right > 0
            and abs(left) > 1
            and right * left.bit_length() > MAX_RESULT_BITS
        ):
            raise ExpressionRefused(f"{left} ** {right} is too large to compute")
        return left**right
    if operator == "LShift":
        if (
            _is_int(left)
            and _is_int(right)
            and left
            and left.bit_length() + right > MAX_RESULT_BITS
        ):
            raise ExpressionRefused(f"{left} << {right} is too large to compute")
        return left << right
    if operator == "Mod" and isinstance(left, (str, bytes)):
        refuse_size("%-formatting", _percent_size(left, right), "characters")
        return left % right
    if operator in ("Mod", "FloorDiv") and _is_int(left) and _is_int(right):
        divisor = right.bit_length()
        if max(left.bit_length() - divisor, 1) * divisor > MAX_DIVISION_WORK:
            raise ExpressionRefused(
                f"dividing an integer of {left.bit_length():,} bits by one of {divisor:,} bits "
                "is too long to compute"
            )
    return left % right if operator == "Mod" else left // right


BOUNDED_OPERATORS = frozenset({"Add", "Mult", "Pow", "LShift", "Mod", "FloorDiv"})


def _percent_size(template: str | bytes, args: Any) -> int:
    """An upper bound of the length of `template % args`, reading the conversions as Python
    does (of the part computed before Python would raise on a missing argument)."""
    text = template.decode("latin-1") if isinstance(template, bytes) else template
    positional = args if type(args) is tuple else (args,)
    mapping = args if hasattr(args, "keys") and not isinstance(args, (tuple, str, bytes)) else None
    taken = 0
    size = len(text)

    def argument() -> Any:
        nonlocal taken
        value = positional[taken]
        taken += 1
        return value

    try:
        for key, width, precision, conversion in _conversions(text):
            if conversion == "%":
                continue
            width_value = argument() if width == "*" else int(width or 0)
            precision_value = argument() if precision == "*" else int(precision or 0)
            value = argument() if key is None else mapping[key]  # type: ignore[index]
            limits = [abs(n) for n in (width_value, precision_value) if _is_int(n)]
            size += max(limits, default=0) + _converted_size(value, conversion)
            if size > MAX_RESULT_ITEMS:
                break
    except (IndexError, KeyError, TypeError, ValueError):
        pass  # Python raises at the same conversion, having formatted only what came before
    return size


def _conversions(text: str):
    """(key, width, precision, type) of each conversion of a %-format, as CPython parses them
    (unicode_format_arg_parse): `%(key)` with nested parentheses, flags, `*` or digits."""
    i = text.find("%")
    while i >= 0:
        i += 1
        key = None
        if text[i] == "(":
            depth, start = 1, i + 1
            while depth:
                i += 1
                depth += {"(": 1, ")": -1}.get(text[i], 0)
            key, i = text[start:i], i + 1
        while text[i] in "-+ #0":
            i += 1
        width, i = _number(text, i)
        precision = ""
        if text[i] == ".":
            precision, i = _number(text, i + 1)
        if text[i] in "hlL":
            i += 1
        yield key, width, precision, text[i]
        i = text.find("%", i + 1)


def _number(text: str, i: int) -> tuple[str, int]:
    if text[i] == "*":
        return "*", i + 1
    start = i
    while text[i].isdigit() and text[i].isascii():
        i += 1
    return text[start:i], i


def _converted_size(value: Any, conversion: str) -> int:
    """The most characters one conversion writes, width and precision aside."""
    if conversion in "sra":
        return text_size(value, as_repr=conversion != "s")
    if conversion in "eEfFgG" or not _is_int(value):
        return 330  # a float, or an integer of one: at most 309 digits and the default six
    return value.bit_length() + 3  # digits in any base, a sign, 0x or 0o


def bounded_format(value: Any, conversion: int, spec: str) -> str:
    """An f-string field `{value!conversion:spec}`, its text bounded first: the value's text
    (or number's digits) and any width or precision the spec holds."""
    if conversion == ord("s"):
        check_text(value, "an f-string field")
        value = str(value)
    elif conversion in (ord("r"), ord("a")):
        check_text(value, "an f-string field", as_repr=True)
        value = repr(value) if conversion == ord("r") else ascii(value)
    runs = re.findall(r"\d+", spec)  # a width, a precision (or a fill digit: counted too)
    if any(len(run) > 18 for run in runs):
        raise ExpressionRefused(f"the format spec {spec[:40]!r} asks for too large a field")
    numbers = [int(run) for run in runs] or [0]
    if _is_int(value):
        base = 2 * value.bit_length() + 8
    elif isinstance(value, (float, complex)):
        base = 700
    else:
        base = text_size(value)
    refuse_size("an f-string field", base + 2 * max(numbers), "characters")
    return format(value, spec)


def sized(value: Any) -> Any:
    """`*value` / `**value` in a display or call: its length bounded (repeated, unpacking
    doubles like `+`)."""
    if hasattr(value, "__len__"):
        refuse_size(f"unpacking a {type(value).__name__}", len(value))
    return value


# -- builtins ------------------------------------------------------------------------------------


def _str(*args: Any, **kwargs: Any) -> str:
    if len(args) + len(kwargs) == 1:  # str(x): a conversion (with an encoding: a decode)
        check_text(args[0] if args else kwargs.get("object", ""), "str()")
    return str(*args, **kwargs)


STR = BoundedType(str, _str)
SET = BoundedType(set, _set)
DICT = BoundedType(dict, _dict)


def bounded_sum(iterable: Iterable, /, start: Any = 0) -> Any:
    """`sum`, with lists and tuples concatenated in linear time (the builtin copies the total
    at every item: quadratic) and their total bounded."""
    if type(start) is not list and type(start) is not tuple:
        return sum(iterable, start)
    kind = type(start)
    total = list(start)
    for item in iterable:
        if not isinstance(item, kind):
            raise TypeError(
                f'can only concatenate {kind.__name__} (not "{type(item).__name__}") to '
                f"{kind.__name__}"
            )
        refuse_size(f"sum() of {kind.__name__}s", len(total) + len(item))
        total.extend(item)
    return total if kind is list else tuple(total)


# -- methods -------------------------------------------------------------------------------------


def _width(name: str) -> Callable:
    def method(self, width, *args):
        if isinstance(self, (str, bytes)) and _is_int(width) and width > len(self):
            refuse_size(f"{type(self).__name__}.{name}", width)
        return getattr(type(self), name)(self, width, *args)

    return method


def _expandtabs(self, tabsize=8):
    if _is_int(tabsize) and isinstance(self, (str, bytes)):
        tab = "\t" if isinstance(self, str) else b"\t"
        refuse_size("expandtabs", len(self) + self.count(tab) * max(tabsize, 0))
    return type(self).expandtabs(self, tabsize)


def _join(self, iterable):
    items = list(iterable)
    if isinstance(self, (str, bytes)):
        size = len(self) * max(len(items) - 1, 0)
        size += sum(len(item) for item in items if isinstance(item, (str, bytes)))
        refuse_size(f"{type(self).__name__}.join", size)
    return type(self).join(self, items)


def _replace(self, old, new, count=-1):
    if isinstance(self, (str, bytes)) and type(old) is type(self) and type(new) is type(self):
        found = len(self) + 1 if not old else self.count(old)
        if _is_int(count) and count >= 0:
            found = min(found, count)
        refuse_size(f"{type(self).__name__}.replace", len(self) + found * (len(new) - len(old)))
    return type(self).replace(self, old, new, count)


def _translate(self, table, *rest):
    if isinstance(self, str):
        longest = 1
        values = table.values() if isinstance(table, dict) else ()
        for value in values:
            if isinstance(value, str):
                longest = max(longest, len(value))
        refuse_size("str.translate", len(self) * longest)
    return type(self).translate(self, table, *rest)


def _to_bytes(self, length=1, *args, **kwargs):
    if _is_int(length):
        refuse_size("int.to_bytes", length, "bytes")
    return int.to_bytes(self, length, *args, **kwargs)


def _extend(self, iterable):
    if hasattr(iterable, "__len__"):
        refuse_size("list.extend", len(self) + len(iterable))
    list.extend(self, iterable)
    refuse_size("list.extend", len(self))


def _sort(self, *, key=None, reverse=False):
    list.sort(self, key=_sort_work(self, key), reverse=reverse)


def _comparing(kind: type, name: str) -> Callable:
    """count, index, remove: the argument compared with each item."""
    function = getattr(kind, name)

    def method(self, value, *args):
        if isinstance(self, kind):
            check_membership(value, self)
        return function(self, value, *args)

    return method


def _hashing(kind: type, name: str) -> Callable:
    """get, pop, setdefault, add, discard, remove: the key hashed."""
    function = getattr(kind, name)

    def method(self, key, *args):
        check_hash(key)
        return function(self, key, *args)

    return method


def _hashing_all(kind: type, name: str) -> Callable:
    """update, union, fromkeys...: every item of each argument hashed."""
    function = getattr(kind, name)

    def method(self, *others, **kwargs):
        return function(self, *(_hashed_items(other, name) for other in others), **kwargs)

    return method


def _dict_update(self, *args, **kwargs):
    return dict.update(self, _dict(*args), **kwargs) if args else dict.update(self, **kwargs)


def _checked_after(kind: type, name: str) -> Callable:
    """A method whose result is at most a few times its input: computed, then refused when too
    large (chained, the factors would compound)."""
    function = getattr(kind, name)

    def method(self, *args, **kwargs):
        result = function(self, *args, **kwargs)
        refuse_size(f"{kind.__name__}.{name}", len(result))
        return result

    return method


# -- re's functions whose results can outgrow their text ------------------------------------------


def _pattern(pattern: Any, flags: int) -> re.Pattern:
    return re.compile(pattern, flags)


def _pattern_sub(self: re.Pattern, repl, string, count=0, *, counting=False):
    """sub/subn, replacement by replacement, their total counted as it grows."""
    budget = [MAX_RESULT_ITEMS - (len(string) if isinstance(string, (str, bytes)) else 0)]
    produce: Callable
    if callable(repl):
        produce = repl
    elif not isinstance(repl, (str, bytes)) or _backslash(repl) not in repl:
        produce = functools.partial(_literal, repl)  # no backslash: used as it is
    else:
        self.sub(repl, string[:0])  # as Python does, refuse a bad template before any match
        produce = functools.partial(_expand, template=repl)

    def replacement(match):
        text = produce(match)
        budget[0] -= len(text)
        if budget[0] < 0:
            raise ExpressionRefused(
                f"re.sub{'n' if counting else ''} would make more than {MAX_RESULT_ITEMS:,} "
                "characters: too large"
            )
        return text

    return (self.subn if counting else self.sub)(replacement, string, count)


def _backslash(text: str | bytes) -> Any:
    return "\\" if isinstance(text, str) else b"\\"


def _literal(text, match):
    return text


def _expand(match: re.Match, template) -> Any:
    if isinstance(template, (str, bytes)):
        longest = max((end - start for start, end in map(match.span, range(match.re.groups + 1))))
        slash = "\\" if isinstance(template, str) else b"\\"
        refuse_size("a replacement", len(template) + template.count(slash) * longest)  # type: ignore[arg-type]
    return match.expand(template)


def _linear_result(self: re.Pattern, string: Any) -> bool:
    """Whether findall and split on `string` are linear: groups can reach outside their match
    (so results grow quadratic) only from inside a lookaround."""
    text = self.pattern if isinstance(self.pattern, str) else self.pattern.decode("latin-1")
    lookaround = "(?=" in text or "(?!" in text or "(?<" in text
    size = len(string) if isinstance(string, (str, bytes)) else MAX_RESULT_ITEMS
    return not lookaround and (self.groups + 2) * (size + 1) <= MAX_RESULT_ITEMS


def _pattern_findall(self: re.Pattern, string, pos=0, endpos=None):
    if _linear_result(self, string):
        return self.findall(string, pos) if endpos is None else self.findall(string, pos, endpos)
    budget = [MAX_RESULT_ITEMS]
    found = []
    groups = self.groups
    matches = self.finditer(string, pos) if endpos is None else self.finditer(string, pos, endpos)
    for match in matches:
        spans = [match.span(g) for g in (range(1, groups + 1) if groups else (0,))]
        budget[0] -= 1 + sum(end - start for start, end in spans)
        if budget[0] < 0:
            raise ExpressionRefused("re.findall would make too large a result")
        empty = string[:0]
        if groups == 0:
            found.append(match.group())
        elif groups == 1:
            group = match.group(1)
            found.append(empty if group is None else group)
        else:
            found.append(tuple(empty if g is None else g for g in match.groups()))
    return found


def _pattern_split(self: re.Pattern, string, maxsplit=0):
    if _linear_result(self, string):
        return self.split(string, maxsplit)
    budget = [MAX_RESULT_ITEMS - len(string)]
    pieces = []
    last = 0
    for done, match in enumerate(self.finditer(string)):
        if maxsplit and done >= maxsplit:
            break
        groups = match.groups()
        budget[0] -= 1 + sum(len(g) + 1 for g in groups if g is not None)
        if budget[0] < 0:
            raise ExpressionRefused("re.split would make too large a result")
        pieces.append(string[last : match.start()])
        pieces.extend(groups)
        last = match.end()
    pieces.append(string[last:])
    return pieces


def _re_sub(pattern, repl, string, count=0, flags=0):
    return _pattern_sub(_pattern(pattern, flags), repl, string, count)


def _re_subn(pattern, repl, string, count=0, flags=0):
    return _pattern_sub(_pattern(pattern, flags), repl, string, count, counting=True)


def _re_findall(pattern, string, flags=0):
    return _pattern_findall(_pattern(pattern, flags), string)


def _re_split(pattern, string, maxsplit=0, flags=0):
    return _pattern_split(_pattern(pattern, flags), string, maxsplit)


#: re's functions as expressions get them (the others are re's own).
REGEX_FUNCTIONS: dict[str, Callable] = {
    "sub": _re_sub,
    "subn": _re_subn,
    "findall": _re_findall,
    "split": _re_split,
}


def _table() -> dict[tuple[type, str], Callable]:
    table: dict[tuple[type, str], Callable] = {}
    for kind in (str, bytes):
        for name in ("center", "ljust", "rjust", "zfill"):
            table[kind, name] = _width(name)
        table[kind, "expandtabs"] = _expandtabs
        table[kind, "join"] = _join
        table[kind, "replace"] = _replace
        for name in ("upper", "lower", "swapcase", "title", "capitalize"):
            table[kind, name] = _checked_after(kind, name)
    table[str, "translate"] = _translate
    table[str, "casefold"] = _checked_after(str, "casefold")
    table[str, "encode"] = _checked_after(str, "encode")
    table[bytes, "decode"] = _checked_after(bytes, "decode")
    table[bytes, "hex"] = _checked_after(bytes, "hex")
    table[int, "to_bytes"] = _to_bytes
    table[list, "extend"] = _extend
    table[list, "sort"] = _sort
    comparing: tuple[tuple[type, tuple[str, ...]], ...] = (
        (list, ("count", "index", "remove")),
        (tuple, ("count", "index")),
    )
    for container, names in comparing:
        for name in names:
            table[container, name] = _comparing(container, name)
    hashing: tuple[tuple[type, tuple[str, ...]], ...] = (
        (dict, ("get", "pop", "setdefault")),
        (set, ("add", "discard", "remove")),
    )
    for container, names in hashing:
        for name in names:
            table[container, name] = _hashing(container, name)
    for name in (
        "update",
        "union",
        "intersection",
        "intersection_update",
        "difference",
        "difference_update",
        "symmetric_difference",
        "symmetric_difference_update",
        "issubset",
        "issuperset",
        "isdisjoint",
    ):
        table[set, name] = _hashing_all(set, name)
    table[dict, "update"] = _dict_update
    table[dict, "fromkeys"] = lambda iterable, *value: dict.fromkeys(
        _hashed_items(iterable, "dict.fromkeys"), *value
    )
    table[re.Pattern, "sub"] = _pattern_sub
    table[re.Pattern, "subn"] = _pattern_sub_counting
    table[re.Pattern, "findall"] = _pattern_findall
    table[re.Pattern, "split"] = _pattern_split
    table[re.Match, "expand"] = _expand
    return table


def _pattern_sub_counting(self, repl, string, count=0):
    return _pattern_sub(self, repl, string, count, counting=True)


#: (type, method name) → the bounded method, taking the instance first (as `str.join` does).
BOUNDED_METHODS = _table()


def bounded_method(owner: Any, name: str) -> Callable | None:
    """The bounded form of `owner.name` (bound to `owner`, or unbound when `owner` is the type
    itself: `str.join`), or None when the attribute needs no bound."""
    if isinstance(owner, type):  # unbound: str.join(sep, items); dict.fromkeys is a classmethod
        return BOUNDED_METHODS.get((owner, name))
    method = BOUNDED_METHODS.get((type(owner), name))
    if method is None:
        return None
    if (type(owner), name) == (dict, "fromkeys"):
        return method
    return functools.partial(method, owner)
