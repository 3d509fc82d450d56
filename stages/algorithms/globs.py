"""Globs on `/`-separated paths with `**` semantics (as in .gitignore and Ant).

`*` matches within one path segment, `?` one character of a segment, `[abc]` a character class,
and `**` any number of whole segments (zero included): `UI/**` matches everything below `UI`,
`**/icon_*` an `icon_` file at any depth, `a/**/b` both `a/b` and `a/x/y/b`. A metacharacter is
matched literally inside a class (`[*]`, `[[]`); `escape_glob` writes a path that way. Every glob
of the build file (layout rules, `collect.exclude`) goes through here, so they all agree.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache

GLOB_METACHARACTERS = "*?["


@lru_cache(maxsize=1024)
def compile_glob(pattern: str) -> re.Pattern[str]:
    """The regular expression matching exactly the paths `pattern` matches."""
    return re.compile(glob_regex(pattern) + r"\Z", re.DOTALL)


def glob_regex(pattern: str) -> str:
    """The regular-expression source of a glob, unanchored (callers anchor it or join several)."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        char = pattern[i]
        if pattern.startswith("**", i):
            at_start = i == 0 or pattern[i - 1] == "/"
            at_end = i + 2 == n or pattern[i + 2] == "/"
            if at_start and i + 2 < n and pattern[i + 2] == "/":
                out.append("(?:.*/)?")  # `**/` : zero or more leading segments
                i += 3
                continue
            if at_start and at_end:
                out.append(".*")  # trailing `**`: everything below
                i += 2
                continue
            out.append("[^/]*")  # `**` inside a segment behaves like `*`
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = pattern.find("]", i + 2)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = pattern[i + 1 : end]
                negate = body.startswith("!")
                body = body[1:] if negate else body
                out.append("[" + ("^/" if negate else "") + _class_body(body) + "]")
                i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def _class_body(body: str) -> str:
    """A class body as regex source; `[ & ~ |` escaped (Python reads them as set operations)."""
    return "".join("\\" + char if char in "\\[&~|" else char for char in body)


def escape_glob(path: str) -> str:
    """A glob that matches exactly `path`: each metacharacter wrapped in a class of its own."""
    return "".join(f"[{char}]" if char in GLOB_METACHARACTERS else char for char in path)


def glob_match(pattern: str, path: str) -> bool:
    """Whether the whole `path` matches `pattern`."""
    return compile_glob(pattern).match(path) is not None


def literal_path(pattern: str) -> str | None:
    """The one path a glob matches when it has no wildcard (metacharacters written as
    one-character classes, as `escape_glob` does, count as literal); None otherwise."""
    if not any(char in pattern for char in GLOB_METACHARACTERS):
        return pattern
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        one_char_class = char == "[" and i + 2 < len(pattern) and pattern[i + 2] == "]"
        if one_char_class and pattern[i + 1] in GLOB_METACHARACTERS:
            out.append(pattern[i + 1])
            i += 3
            continue
        if char in GLOB_METACHARACTERS:
            return None
        out.append(char)
        i += 1
    return "".join(out)


class GlobSet:
    """A predicate for "does a whole path match any of these globs": literal paths by set
    lookup, the rest by one combined regular expression compiled once.

    A layout that lists its assets (Unity Addressables groups: thousands of paths) then costs a
    lookup per asset path, not a match against every pattern.
    """

    def __init__(self, patterns: Iterable[str]) -> None:
        self.literals: set[str] = set()
        wild = []
        for pattern in patterns:
            literal = literal_path(pattern)
            if literal is None:
                wild.append(pattern)
            else:
                self.literals.add(literal)
        self.regex = (
            # The alternation grouped whole: `\Z` must anchor every alternative, not the last.
            re.compile("(?:" + "|".join(f"(?:{glob_regex(p)})" for p in wild) + r")\Z", re.DOTALL)
            if wild
            else None
        )

    def __call__(self, path: str) -> bool:
        if path in self.literals:
            return True
        return self.regex is not None and self.regex.match(path) is not None

    def __bool__(self) -> bool:
        return bool(self.literals) or self.regex is not None


def compile_globs(patterns: Iterable[str]) -> Callable[[str], bool]:
    """One predicate: does a whole path match any of the globs (see GlobSet)."""
    return GlobSet(patterns)
