"""Globs on `/`-separated paths with `**` semantics (as in .gitignore and Ant).

`*` matches within one path segment, `?` one character of a segment, `[abc]` a character class,
and `**` any number of whole segments (zero included): `UI/**` matches everything below `UI`,
`**/icon_*` an `icon_` file at any depth, `a/**/b` both `a/b` and `a/x/y/b`.
"""

from __future__ import annotations

import re
from functools import lru_cache


@lru_cache(maxsize=1024)
def compile_glob(pattern: str) -> re.Pattern[str]:
    """The regular expression matching exactly the paths `pattern` matches."""
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
                body = pattern[i + 1:end]
                negate = body.startswith("!")
                body = body[1:] if negate else body
                out.append("[" + ("^/" if negate else "") + body.replace("\\", "\\\\") + "]")
                i = end
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def glob_match(pattern: str, path: str) -> bool:
    """Whether the whole `path` matches `pattern`."""
    return compile_glob(pattern).match(path) is not None
