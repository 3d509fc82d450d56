"""Whether a finished build passed, and the lines that tell a user what it produced."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SEVERITY_RANK = {"info": 1, "warning": 2, "error": 3}
FAIL_ON_RANK = {"info": 1, "warning": 2, "error": 3, "never": 99}


@dataclass
class Verdict:
    exit_code: int = 0
    reasons: list[str] = field(default_factory=list)


def build_verdict(build, outputs: dict[str, Any]) -> Verdict:
    """Exit 1 when rule failures reach `rules.fail_on`, or missing refs with `fail_on_missing`."""
    verdict = Verdict()
    threshold = FAIL_ON_RANK[build.config.rules.fail_on]
    document = _validation(outputs)
    if isinstance(document, dict):
        gating = [f for f in document.get("failures", [])
                  if SEVERITY_RANK.get(f.get("severity", "error"), 3) >= threshold]
        broken = document.get("rule_errors", []) if threshold <= 3 else []
        if gating or broken:
            verdict.reasons.append(f"{len(gating)} rule failure(s) and {len(broken)} broken "
                                   f"rule(s) at or above '{build.config.rules.fail_on}'")
    cooklist = _cook_summary(outputs)
    if cooklist is not None and build.config.cook.fail_on_missing and cooklist["missing"]:
        verdict.reasons.append(f"{len(cooklist['missing'])} missing reference(s) and "
                               f"cook.fail_on_missing is true")
    if verdict.reasons:
        verdict.exit_code = 1
    return verdict


def _validation(outputs) -> dict | None:
    """The rule results without the per-check list (a small value to load on a no-op)."""
    document = outputs.get("validation_summary")
    return document if document is not None else outputs.get("validation")


def _cook_summary(outputs) -> dict | None:
    summary = outputs.get("cook_summary")
    if summary is None and outputs.get("cooklist") is not None:
        from stages.dependency import summarize
        summary = summarize(outputs["cooklist"])
    return summary


def summary_lines(build, outputs: dict[str, Any]) -> list[str]:
    """Rule results in one line, then where the manifest and the reports are."""
    lines = []
    document = _validation(outputs)
    if isinstance(document, dict):
        counts: dict[str, int] = {}
        for failure in document.get("failures", []):
            counts[failure.get("severity", "error")] = counts.get(failure.get("severity"), 0) + 1
        shown = ", ".join(f"{n} {sev}" for sev, n in sorted(counts.items())) or "no failures"
        lines.append(f"rules: {document.get('rules', 0)} rules, "
                     f"{document.get('sources_checked', 0)} checks, {shown}, "
                     f"{len(document.get('rule_errors', []))} broken rules")
    cooklist = _cook_summary(outputs)
    if cooklist is not None:
        lines.append(f"cook list: {cooklist['cooked']} assets, {len(cooklist['missing'])} missing, "
                     f"{cooklist['ambiguous']} ambiguous, {cooklist['cycles']} cycles")
    out = build.output_dir
    if (out / "manifest.json").exists():
        lines.append(f"manifest: {out / 'manifest.json'}")
    if (out / "reports").exists():
        lines.append(f"reports: {out / 'reports'}")
    return lines
