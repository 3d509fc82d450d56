"""The ArtEase 1.x way, kept as the benchmark's baseline: every rule on its own, re-reading and
re-parsing each file it selects. Gives the same document as `engine.validate_project`."""

from __future__ import annotations

from typing import Any

from orchestrator import Reader

from .engine import check_file, prepare, walk_files
from .functions import index_view
from .report import build_document


def validate_per_rule(
    root: str,
    rule_files,
    index: Any,
    files=None,
    allow_custom_code: bool = True,
    timeout: float | None = 30.0,
) -> dict:
    """Check a project rule by rule (one parse per (rule, file)); returns the JSON document."""
    ruleset, shared = prepare(
        root, rule_files, index, allow_custom_code=allow_custom_code, timeout=timeout
    )
    relpaths = walk_files(shared.root) if files is None else sorted(files)
    results = []
    for rule in ruleset.rules:
        for relpath in _selected(rule, shared.root, relpaths, index, ruleset.index_digest):
            results.append(check_file(relpath, [rule], shared, Reader(shared.root)))
    return build_document(ruleset, results)


def _selected(rule, root: str, relpaths: list[str], index: Any, index_digest: str) -> list[str]:
    if rule.rpath_set is not None:
        members = index_view(index, index_digest, root).container(rule.rpath_set)
        chosen = [rel for rel in relpaths if f"{root}/{rel}" in members]
    else:
        chosen = [rel for rel in relpaths if rule.rpath.searcher()(f"{root}/{rel}")]
    if rule.not_rpath is not None:
        chosen = [rel for rel in chosen if not rule.not_rpath.searcher()(f"{root}/{rel}")]
    return chosen
