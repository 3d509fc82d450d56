"""The product's own identity in every cache key: a digest of the engine's and the stages' code.

A stage's `version` says when its author knew its results changed; this says when anything in
the code that shapes results changed at all (a library module a stage uses, the engine's key
material), so a result is never reused across a change of the product itself.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from ..hashing import digest_bytes

CODE_SUFFIXES = (".py", ".yaml")


def code_digest(module_names: Iterable[str]) -> str:
    """Digest of every source file of the top-level packages holding these modules and the
    engine (`orchestrator`)."""
    packages = sorted({name.split(".")[0] for name in module_names} | {"orchestrator"})
    return _digest(tuple(packages))


@lru_cache(maxsize=8)
def _digest(packages: tuple[str, ...]) -> str:
    parts = []
    for package in packages:
        module = sys.modules.get(package) or importlib.import_module(package)
        origin = getattr(module, "__file__", None)
        if not origin:
            continue
        folder = Path(origin).parent
        if Path(origin).name != "__init__.py":  # a single module, not a package
            files = [Path(origin)]
        else:
            files = sorted(
                p
                for p in folder.rglob("*")
                if p.suffix in CODE_SUFFIXES and "__pycache__" not in p.parts
            )
        for path in files:
            relative = f"{package}/{path.relative_to(folder).as_posix()}"
            parts.append(relative.encode("utf-8") + b"\0" + path.read_bytes())
    return digest_bytes(b"\0\0".join(parts))
