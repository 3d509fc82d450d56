"""Reading a YAML file users wrote: the data and its node tree (for line numbers), or an error
of the caller's kind naming the file and the line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import OrchestrateError


def read_yaml(path: Path, error: type[OrchestrateError], what: str) -> tuple[Any, Any]:
    """(node tree, data) of a UTF-8 YAML file (BOM allowed); `what` names it in messages."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise error(f"{what} not found", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read the {what}: {exc}", file=str(path)) from None
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader), yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise error(
            f"not valid YAML: {problem}",
            file=str(path),
            line=mark.line + 1 if mark is not None else None,
        ) from None
