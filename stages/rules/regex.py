"""The regexes of rules outside expressions: `rpath`, `not_rpath`, `filter`, `not_filter` and the
backtick values of path expressions. Python's `re.search` semantics (spec/rules.md "Decision
(regex)"), in bounded time.

Python's engine backtracks: `^(.*?/)*(.*.*)*Q$` on one path runs for hours inside one C call.
So each pattern is run by the cheapest engine that is safe for it, with the same results:

- a pattern with no repetition and no alternation (`\\.xml$`, `resource\\.repository`) cannot
  backtrack more than its own length at each position: Python's engine runs it, as fast as ever;
- any other pattern that RE2 can express (no backreference, lookaround, atomic group or
  possessive repeat) is run by RE2 (google-re2), in time linear in the text. It is not given the
  pattern's text, whose meaning differs between the engines (`$` before a final newline, `\\w`
  and `\\d` over Unicode, `[[:alpha:]]`, case folding), but a translation of what Python's own
  parser read: every single-character test becomes the explicit set of code points Python
  matches (under IGNORECASE, asked of Python itself for each character that has a case), every
  anchor the RE2 anchor that means the same. Where the meaning still depends on the text — `$`
  on a text ending in a newline, `\\b` on a text that is not ASCII, `\\B` on the empty text, a
  text RE2 cannot encode — that text goes to Python's engine, as below;
- the rest runs in Python's engine under `rules.timeout` (sandbox.time_limit: the engine checks
  for signals as it backtracks), and a search past it raises RegexTimeout naming the pattern.

`Regex` is the compiled form rules carry (frozen, picklable: the engines are built again, once,
in each process that searches).
"""

from __future__ import annotations

import _sre  # type: ignore[import-not-found]
import functools
import re
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

from .sandbox import CustomCodeTimeout, time_limit


class RegexTimeout(Exception):
    """A search in Python's engine ran past `rules.timeout`."""

    def __init__(self, pattern: str, seconds: float) -> None:
        super().__init__(f"the regex {pattern!r} ran longer than {seconds:g} s (rules.timeout)")
        self.pattern = pattern
        self.seconds = seconds


@dataclass(frozen=True)
class Regex:
    """A compiled rule regex: `found_in(text)` is `re.search(pattern, text, flags) is not None`."""

    pattern: str
    flags: int = 0

    def found_in(self, text: str) -> bool:
        return bool(self.searcher()(text))

    def searcher(self) -> Callable[[str], object]:
        """The search for loops over many texts: its result is true when the pattern is found
        (a pattern Python's engine runs as it is gets that engine's own search)."""
        return _engine(self.pattern, self.flags).search

    @property
    def engine(self) -> str:
        """Which engine runs it: "plain" (Python, no backtracking possible), "linear" (RE2) or
        "limited" (Python, under the time limit)."""
        return _engine(self.pattern, self.flags).kind


def compile_regex(pattern: str, flags: int = 0) -> Regex:
    """Compile a rule regex; raises re.error when Python's `re` does not accept it."""
    _engine(pattern, flags)
    return Regex(pattern, flags)


# -- the time limit ------------------------------------------------------------------------------

_LIMIT = threading.local()
DEFAULT_SECONDS = 30.0  # rules.timeout's default (stages/settings)


@contextmanager
def regex_time_limit(seconds: float | None) -> Iterator[None]:
    """Searches in Python's engine inside the block stop after `seconds` (None or 0: never)."""
    before = getattr(_LIMIT, "seconds", DEFAULT_SECONDS)
    _LIMIT.seconds = seconds
    try:
        yield
    finally:
        _LIMIT.seconds = before


# -- engines -------------------------------------------------------------------------------------


class _Engine:
    __slots__ = (
        "python",
        "search",
        "linear",
        "anchor",
        "kind",
        "required",
        "required_folded",
        "final_newline_differs",
        "needs_ascii",
        "empty_differs",
    )

    def __init__(self, pattern: str, flags: int) -> None:
        self.python = re.compile(pattern, flags)
        self.search: Callable[[str], object] = self.python.search
        self.linear: Any = None
        self.anchor: Any = None
        self.final_newline_differs = self.needs_ascii = self.empty_differs = False
        self.required: tuple[str, ...] = ()
        self.required_folded: tuple[str, ...] = ()
        with warnings.catch_warnings():  # re.compile has warned already (nested sets)
            warnings.simplefilter("ignore", FutureWarning)
            parsed = sre_parse.parse(pattern, flags)
        self.kind = "plain"
        if _is_plain(parsed.data):
            return
        self.kind = "limited"
        self.search = self.found_in
        self.required, self.required_folded = _required_literals(parsed.data, parsed.state.flags)
        try:
            translation = _Translation()
            text = translation.sequence(parsed.data, parsed.state.flags)
        except _Untranslatable:
            return
        engine = _re2_binding()
        compiled = engine.compile(text.encode("utf-8"))
        if not compiled.ok():  # beyond RE2's limits (repeat counts, program size)
            return
        self.linear, self.anchor = compiled, engine.unanchored
        self.kind = "linear"
        self.final_newline_differs = translation.final_newline_differs
        self.needs_ascii = translation.needs_ascii
        self.empty_differs = translation.empty_differs

    def found_in(self, text: str) -> bool:
        # Literals every match holds: most paths a rule does not select lack one, and `in` is
        # cheaper than either engine (this is what makes Python's engine fast on them).
        for literal in self.required:
            if literal not in text:
                return False
        if self.required_folded and text.isascii():
            lowered = text.lower()
            for literal in self.required_folded:
                if literal not in lowered:
                    return False
        if (
            self.linear is not None
            and not (self.final_newline_differs and text.endswith("\n"))
            and not (self.needs_ascii and not text.isascii())
            and not (self.empty_differs and not text)
        ):
            try:
                data = text.encode("utf-8")
            except UnicodeEncodeError:  # lone surrogates (undecodable file names): Python's
                pass
            else:
                return self.linear.Match(self.anchor, data, 0, len(data))[0][0] >= 0
        seconds = getattr(_LIMIT, "seconds", DEFAULT_SECONDS)
        try:
            with time_limit(seconds):
                return self.python.search(text) is not None
        except CustomCodeTimeout:
            raise RegexTimeout(self.python.pattern, seconds or 0.0) from None


@functools.lru_cache(maxsize=1024)
def _engine(pattern: str, flags: int) -> _Engine:
    return _Engine(pattern, flags)


class _RE2:
    """RE2 as the engines use it. The binding itself: the Python wrapper's search builds a match
    object and maps byte offsets back to characters (about 7 µs a call); a yes/no needs neither
    (under 1 µs). Imported on the first pattern that needs it (a tenth of a second)."""

    def __init__(self) -> None:
        import re2
        from re2 import _re2

        self.binding = _re2
        self.unanchored = _re2.RE2.Anchor.UNANCHORED
        self.options = re2.Options()
        self.options.log_errors = False  # a pattern beyond RE2 falls back quietly
        self.options.never_capture = True  # a yes/no needs no groups: RE2's fastest path
        self.options.max_mem = 64 << 20  # the explicit Unicode classes of \w need room

    def compile(self, pattern: bytes) -> Any:
        return self.binding.RE2(pattern, self.options)


@functools.cache
def _re2_binding() -> _RE2:
    return _RE2()


_SINGLE = (sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN)


def _is_plain(items) -> bool:
    """No repetition, no alternation, no backreference: at most the pattern's length of work at
    each position of the text, whatever the engine."""
    for op, av in items:
        if op is sre.SUBPATTERN:
            if not _is_plain(av[3]):
                return False
        elif op not in _SINGLE and op is not sre.AT:
            return False
    return True


def _required_literals(items, flags: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The runs of literal characters of the pattern's top-level sequence (groups included),
    which every match holds: as they are, and (under IGNORECASE, ASCII runs only) lower-cased,
    for texts that are ASCII (where Python's case folding is ASCII's)."""
    exact: list[str] = []
    folded: list[str] = []
    run: list[str] = []
    run_folded = False

    def close() -> None:
        if run:
            text = "".join(run)
            if not run_folded:
                exact.append(text)
            elif text.isascii():
                folded.append(text.lower())
            run.clear()

    def walk(items, flags: int) -> None:
        nonlocal run_folded
        for op, av in items:
            if op is sre.LITERAL:
                ignorecase = bool(flags & re.IGNORECASE)
                if run and ignorecase != run_folded:
                    close()
                run_folded = ignorecase
                run.append(chr(av))
            elif op is sre.SUBPATTERN:
                walk(av[3], _combined(flags, av[1], av[2]))
            else:
                close()

    walk(items, flags)
    close()
    return tuple(exact), tuple(folded)


# -- translation to RE2 --------------------------------------------------------------------------


class _Untranslatable(Exception):
    """A construct RE2 has no equivalent for (it backtracks by nature)."""


_RE2_MAX_REPEAT = 1000
_TYPE_FLAGS = re.ASCII | re.LOCALE | re.UNICODE


def _combined(flags: int, add: int, remove: int) -> int:
    """The flags inside `(?add-remove:...)`, as Python's compiler combines them."""
    if add & _TYPE_FLAGS:
        flags &= ~_TYPE_FLAGS
    return (flags | add) & ~remove


class _Translation:
    """Python's parse of a pattern → RE2 syntax with the same meaning, noting what depends on
    the text searched."""

    def __init__(self) -> None:
        self.final_newline_differs = False  # `$` also matches before a final newline in Python
        self.needs_ascii = False  # `\b` over Unicode: RE2's word boundary is ASCII's; `\B`
        self.empty_differs = False  # `\B` never matches an empty text in Python (before 3.14)

    def sequence(self, items, flags: int) -> str:
        return "".join(self.item(op, av, flags) for op, av in items)

    def item(self, op, av, flags: int) -> str:
        if op in _SINGLE:
            return _class_syntax(_single_character(op, av, flags))
        if op is sre.SUBPATTERN:
            _group, add, remove, items = av
            return "(?:" + self.sequence(items, _combined(flags, add, remove)) + ")"
        if op is sre.BRANCH:
            return "(?:" + "|".join(self.sequence(items, flags) for items in av[1]) + ")"
        if op is sre.MAX_REPEAT or op is sre.MIN_REPEAT:
            low, high, items = av
            if low > _RE2_MAX_REPEAT or (high is not sre.MAXREPEAT and high > _RE2_MAX_REPEAT):
                raise _Untranslatable("a repeat count over RE2's 1000")
            count = f"{{{low},}}" if high is sre.MAXREPEAT else f"{{{low},{high}}}"
            lazy = "?" if op is sre.MIN_REPEAT else ""
            return "(?:" + self.sequence(items, flags) + ")" + count + lazy
        if op is sre.AT:
            return self.anchor(av, flags)
        raise _Untranslatable(str(op))  # backreferences, lookaround, atomic, possessive

    def anchor(self, at, flags: int) -> str:
        multiline = bool(flags & re.MULTILINE)
        if at is sre.AT_BEGINNING:
            return "(?m:^)" if multiline else r"\A"
        if at is sre.AT_BEGINNING_STRING:
            return r"\A"
        if at is sre.AT_END:
            if multiline:
                return "(?m:$)"  # before any newline or at the end, in both engines
            self.final_newline_differs = True
            return r"\z"
        if at is sre.AT_END_STRING:
            return r"\z"
        if at is sre.AT_BOUNDARY:
            self.needs_ascii |= not flags & re.ASCII
            return r"\b"
        if at is sre.AT_NON_BOUNDARY:
            # RE2 also tries `\B` between the bytes of one character, where Python never looks
            self.needs_ascii = self.empty_differs = True
            return r"\B"
        raise _Untranslatable(str(at))


# Sets of code points are sorted lists of inclusive (low, high) ranges.
Ranges = list[tuple[int, int]]
_TOP = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)  # never in text RE2 sees (it is encoded as UTF-8 first)


def _single_character(op, av, flags: int) -> Ranges:
    """The code points a single-character item matches, as Python's engine decides."""
    if op is sre.ANY:
        return [(0, _TOP)] if flags & re.DOTALL else _complement([(10, 10)])
    plain = _plain_set(op, av, flags)
    if not flags & re.IGNORECASE:
        return plain
    # A character without case matches as without IGNORECASE; for those with one, Python says.
    python = re.compile(_python_syntax(op, av, flags))
    cased, cased_ranges = _cased()
    agreeing = [(c, c) for c in cased if python.fullmatch(chr(c))]
    return _union(_subtract(plain, cased_ranges), agreeing)


def _plain_set(op, av, flags: int) -> Ranges:
    if op is sre.LITERAL:
        return [(av, av)]
    if op is sre.NOT_LITERAL:
        return _complement([(av, av)])
    negate = False
    parts: list[Ranges] = []
    for kind, value in av:
        if kind is sre.NEGATE:
            negate = True
        elif kind is sre.LITERAL:
            parts.append([(value, value)])
        elif kind is sre.RANGE:
            parts.append([value])
        elif kind is sre.CATEGORY:
            parts.append(_category(value, bool(flags & re.ASCII)))
        else:
            raise _Untranslatable(str(kind))
    found = _union(*parts)
    return _complement(found) if negate else found


_CATEGORY_SYNTAX = {
    sre.CATEGORY_DIGIT: r"\d",
    sre.CATEGORY_NOT_DIGIT: r"\D",
    sre.CATEGORY_SPACE: r"\s",
    sre.CATEGORY_NOT_SPACE: r"\S",
    sre.CATEGORY_WORD: r"\w",
    sre.CATEGORY_NOT_WORD: r"\W",
}


@functools.cache
def _category(category, ascii_only: bool) -> Ranges:
    """`\\d`, `\\w`, `\\s` and their negations, as the code points Python's engine matches."""
    syntax = _CATEGORY_SYNTAX.get(category)
    if syntax is None:
        raise _Untranslatable(str(category))
    found = re.finditer(f"[{syntax}]+", _every_character(), re.ASCII if ascii_only else 0)
    return [(match.start(), match.end() - 1) for match in found]


@functools.cache
def _every_character() -> str:
    return "".join(map(chr, range(_TOP + 1)))


@functools.cache
def _cased() -> tuple[list[int], Ranges]:
    """Every code point whose match can change under IGNORECASE: those with a case, and their
    lower-case forms (what Python's engine compares), from the tables its compiler uses."""
    cased = set(filter(_sre.unicode_iscased, range(_TOP + 1)))
    cased.update(map(_sre.unicode_tolower, list(cased)))
    codes = sorted(cased)
    return codes, _to_ranges(codes)


def _python_syntax(op, av, flags: int) -> str:
    """A single-character item written again for Python's engine (to ask it about cases)."""
    prefix = "(?i)" + ("(?a)" if flags & re.ASCII else "")
    if op is sre.LITERAL:
        return prefix + _escape(av)
    if op is sre.NOT_LITERAL:
        return f"{prefix}[^{_escape(av)}]"
    inner: list[str] = []
    for kind, value in av:
        if kind is sre.NEGATE:
            inner.insert(0, "^")
        elif kind is sre.LITERAL:
            inner.append(_escape(value))
        elif kind is sre.RANGE:
            inner.append(f"{_escape(value[0])}-{_escape(value[1])}")
        else:
            inner.append(_CATEGORY_SYNTAX[value])
    return f"{prefix}[{''.join(inner)}]"


def _escape(code: int) -> str:
    return f"\\U{code:08x}"


def _class_syntax(ranges: Ranges) -> str:
    ranges = _subtract(ranges, [_SURROGATES])
    if not ranges:
        return r"[^\x{0}-\x{10ffff}]"
    syntax = "".join(_range_syntax(low, high) for low, high in ranges)
    upper = ranges[0][0]
    if ranges == [(upper, upper), (upper + 32, upper + 32)] and 0x41 <= upper <= 0x5A:
        # RE2 reads [Kk] as the literal k with case folding, which an alternation around it
        # widens to Unicode's (K, the Kelvin sign): a surrogate, which no text RE2 sees holds,
        # keeps it a set of three
        syntax += r"\x{d800}"
    return f"[{syntax}]"


def _range_syntax(low: int, high: int) -> str:
    return f"\\x{{{low:x}}}" if low == high else f"\\x{{{low:x}}}-\\x{{{high:x}}}"


def _to_ranges(codes: Iterable[int]) -> Ranges:
    ranges: Ranges = []
    for code in codes:
        if ranges and ranges[-1][1] + 1 == code:
            ranges[-1] = (ranges[-1][0], code)
        else:
            ranges.append((code, code))
    return ranges


def _union(*sets: Ranges) -> Ranges:
    merged: Ranges = []
    for low, high in sorted(r for ranges in sets for r in ranges):
        if merged and low <= merged[-1][1] + 1:
            if high > merged[-1][1]:
                merged[-1] = (merged[-1][0], high)
        else:
            merged.append((low, high))
    return merged


def _complement(ranges: Ranges) -> Ranges:
    out: Ranges = []
    start = 0
    for low, high in _union(ranges):
        if low > start:
            out.append((start, low - 1))
        start = high + 1
    if start <= _TOP:
        out.append((start, _TOP))
    return out


def _subtract(ranges: Ranges, removed: Ranges) -> Ranges:
    kept = _complement(removed)
    out: Ranges = []
    i = j = 0
    ranges = _union(ranges)
    while i < len(ranges) and j < len(kept):
        low = max(ranges[i][0], kept[j][0])
        high = min(ranges[i][1], kept[j][1])
        if low <= high:
            out.append((low, high))
        if ranges[i][1] < kept[j][1]:
            i += 1
        else:
            j += 1
    return out
