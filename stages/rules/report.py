"""The validation results: the JSON document (spec/rules.md "The results, as a machine reads
them"), exit gating, and the JSON / JUnit XML / text renderings."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable
from typing import NamedTuple

from lxml import etree

from orchestrator import record

from .loader import SEVERITY_RANK, RuleSet

FAIL_ON_RANK = {**SEVERITY_RANK, "never": 99}

SCHEMA_VERSION = 1
FORMATS = ("json", "junit", "text")


JUNIT_DETAIL_MAX = 10_000  # checked pairs past which JUnit reports passes per rule
WORST_RULES_SHOWN = 3  # rules named in the reason a build failed its gate


def build_document(ruleset: RuleSet, unit_results: Iterable[tuple]) -> dict:
    """Assemble unit results (tuples of RuleOutcome) into the document, deterministically sorted.

    Failures come in rule order, then by source and via. Private keys (`public(doc)` drops
    them): "_counts", each rule's number of (source, via) pairs checked; and, while there are at
    most JUNIT_DETAIL_MAX of them, "_checked", the pairs themselves (JUnit lists each one; past
    that it reports passes per rule, and the document stays small to patch).
    """
    checked_by_digest: dict[str, list] = defaultdict(list)
    failures_by_digest: dict[str, list] = defaultdict(list)
    for outcomes in unit_results:
        for outcome in outcomes:
            checked_by_digest[outcome.digest].extend(outcome.checked)
            failures_by_digest[outcome.digest].extend(outcome.failures)
    counts = {rule.label: len(checked_by_digest.get(rule.digest, ())) for rule in ruleset.rules}
    detailed = sum(counts.values()) <= JUNIT_DETAIL_MAX
    checked: list[list] = []
    failures: list[dict] = []
    for rule in ruleset.rules:
        if detailed:
            pairs = sorted(checked_by_digest.get(rule.digest, ()), key=_source_key)
            checked.extend([rule.label, source, via] for source, via in pairs)
        failures.extend(
            _failure(rule, failure)
            for failure in sorted(failures_by_digest.get(rule.digest, ()), key=_source_key)
        )
    document = {
        "schema_version": SCHEMA_VERSION,
        "rules": ruleset.total,
        "sources_checked": sum(counts.values()),
        "failures": failures,
        "rule_errors": [e._asdict() for e in ruleset.rule_errors],
        "skipped": [s._asdict() for s in ruleset.skipped],
        "warnings": [w._asdict() for w in ruleset.warnings],
        # what a person reads for a rule known by its id (the build report shows it)
        "rule_names": {
            rule.label: rule.name for rule in ruleset.rules if rule.name and rule.name != rule.label
        },
        "_counts": counts,
    }
    if detailed:
        document["_checked"] = checked
    return document


def _failure(rule, failure) -> dict:
    return {
        "rule": rule.label,
        "severity": rule.severity,
        "source": failure.source,
        "via": failure.via,
        "errors": list(failure.errors),
        "lines": list(failure.lines),
        "message": failure.message,
    }


def patch_document(
    document: dict, ruleset: RuleSet, gone: Iterable[tuple], new: Iterable[tuple]
) -> dict | None:
    """The document with the outcomes of some units replaced: `gone` are the outcomes those
    units had, `new` the ones they have now. None when it cannot be patched (the detail JUnit
    needs would have to come back): assemble it again."""
    by_digest: dict[str, list] = defaultdict(list)
    for rule in ruleset.rules:
        by_digest[rule.digest].append(rule)
    position = {rule.label: i for i, rule in enumerate(ruleset.rules)}
    counts = dict(document["_counts"])
    detailed = "_checked" in document
    checked = {tuple(pair) for pair in document.get("_checked", ())}
    failures = {(f["rule"], f["source"], f["via"]): f for f in document["failures"]}
    for sign, outcomes_list in ((-1, gone), (1, new)):
        for outcomes in outcomes_list:
            for outcome in outcomes:
                for rule in by_digest.get(outcome.digest, ()):
                    counts[rule.label] = counts.get(rule.label, 0) + sign * len(outcome.checked)
                    for source, via in outcome.checked:
                        if sign < 0:
                            checked.discard((rule.label, source, via))
                            failures.pop((rule.label, source, via), None)
                        else:
                            checked.add((rule.label, source, via))
                    if sign > 0:
                        for failure in outcome.failures:
                            failures[(rule.label, failure.source, failure.via)] = _failure(
                                rule, failure
                            )
    total = sum(counts.values())
    if not detailed and total <= JUNIT_DETAIL_MAX:
        return None
    patched = dict(document)
    patched["_counts"] = counts
    patched["sources_checked"] = total
    patched["failures"] = [
        failures[key]
        for key in sorted(
            failures, key=lambda k: (position.get(k[0], len(position)), k[1], k[2] or "")
        )
    ]
    if detailed and total <= JUNIT_DETAIL_MAX:
        patched["_checked"] = [
            list(pair)
            for pair in sorted(
                checked, key=lambda p: (position.get(p[0], len(position)), p[1], p[2] or "")
            )
        ]
    else:
        patched.pop("_checked", None)
    return patched


def _source_key(item) -> tuple:
    return (item[0], item[1] or "")


def public(document: dict) -> dict:
    """The document as published (without the private keys)."""
    return {key: value for key, value in document.items() if not key.startswith("_")}


# -- gating ------------------------------------------------------------------------------------


@record
class RuleFailures(NamedTuple):
    rule: str
    severity: str
    failures: int


@record
class ValidationSummary(NamedTuple):
    """What the end of a run reports and gates on (validate's `validation_summary` value): the
    document's counts, and its failures as runs of one rule and severity in document order
    (what gating and the worst rules need of them, without their values)."""

    rules: int  # every rule read
    sources_checked: int
    failing: tuple[RuleFailures, ...]
    broken: int  # rules that could not be compiled (rule errors)

    def failure_count(self) -> int:
        return sum(run.failures for run in self.failing)

    def highest_severity(self) -> str | None:
        """The most severe failure (rule errors count as `error`), or None when nothing
        failed."""
        severities = [run.severity for run in self.failing]
        if self.broken:
            severities.append("error")
        return max(severities, key=SEVERITY_RANK.__getitem__) if severities else None

    def gate_fails(self, fail_on: str) -> bool:
        """Whether `rules.fail_on` (error | warning | info | never) fails the build."""
        worst = self.highest_severity()
        if fail_on == "never" or worst is None:
            return False
        return SEVERITY_RANK[worst] >= SEVERITY_RANK[fail_on]

    def gate_reason(self, fail_on: str) -> str | None:
        """Why `rules.fail_on` fails the build (failures and broken rules at or above it), or
        None."""
        threshold = FAIL_ON_RANK[fail_on]
        gating = [run for run in self.failing if SEVERITY_RANK.get(run.severity, 3) >= threshold]
        broken = self.broken if threshold <= SEVERITY_RANK["error"] else 0
        if not (gating or broken):
            return None
        count = sum(run.failures for run in gating)
        reason = f"{count} rule failure(s) and {broken} broken rule(s) at or above '{fail_on}'"
        worst = worst_rules(gating)
        if not worst:
            return reason
        shown = ", ".join(
            f"{w.rule} ({w.failures} {w.severity})" for w in worst[:WORST_RULES_SHOWN]
        )
        more = len(worst) - WORST_RULES_SHOWN
        return f"{reason}; worst rules: {shown}" + (f" and {more} more" if more > 0 else "")

    def line(self) -> str:
        """The rule results in one line, for the end of a run."""
        counts: dict[str, int] = {}
        for run in self.failing:
            counts[run.severity] = counts.get(run.severity, 0) + run.failures
        shown = (
            ", ".join(f"{n} {severity}" for severity, n in sorted(counts.items())) or "no failures"
        )
        return (
            f"rules: {self.rules} rules, {self.sources_checked} checks, {shown}, "
            f"{self.broken} broken rules"
        )


def summarize(document: dict) -> ValidationSummary:
    """The summary of a document (`build_document`'s, or `public`'s)."""
    return ValidationSummary(
        document.get("rules", 0),
        document.get("sources_checked", 0),
        failure_runs(document.get("failures", [])),
        len(document.get("rule_errors", [])),
    )


def failure_runs(failures: Iterable[dict]) -> tuple[RuleFailures, ...]:
    """The failures of a document as runs of one rule and severity, in their order."""
    runs: list[RuleFailures] = []
    for failure in failures:
        rule, severity = failure["rule"], failure["severity"]
        if runs and runs[-1].rule == rule and runs[-1].severity == severity:
            runs[-1] = runs[-1]._replace(failures=runs[-1].failures + 1)
        else:
            runs.append(RuleFailures(rule, severity, 1))
    return tuple(runs)


def worst_rules(runs: Iterable[RuleFailures]) -> list[RuleFailures]:
    """Each failing rule with its failures (a rule's severity: that of its last run), most
    severe first, then most failures, then in rule order (the order of `runs`)."""
    counts: dict[str, int] = {}
    severity: dict[str, str] = {}
    for run in runs:
        counts[run.rule] = counts.get(run.rule, 0) + run.failures
        severity[run.rule] = run.severity
    order = {rule: i for i, rule in enumerate(counts)}
    return sorted(
        (RuleFailures(rule, severity[rule], n) for rule, n in counts.items()),
        key=lambda w: (-SEVERITY_RANK.get(w.severity, 3), -w.failures, order[w.rule]),
    )


# -- renderings ----------------------------------------------------------------------------------


def render(document: dict, fmt: str) -> bytes:
    """The document in one of FORMATS, as UTF-8 bytes."""
    if fmt == "json":
        return render_json(document)
    if fmt == "junit":
        return render_junit(document)
    if fmt == "text":
        return render_text(document)
    raise ValueError(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")


def render_json(document: dict) -> bytes:
    return (json.dumps(public(document), ensure_ascii=False, indent=1) + "\n").encode("utf-8")


def _where(failure: dict) -> str:
    lines = [line for line in failure["lines"] if line is not None]
    where = failure["source"] + (f":{lines[0]}" if len(set(lines)) == 1 else "")
    return where + (f" (via {failure['via']})" if failure["via"] else "")


def _value_lines(failure: dict) -> list[str]:
    out = []
    for value, line in zip(failure["errors"], failure["lines"]):
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        out.append(
            f"{failure['source']}:{line}: {shown}"
            if line is not None
            else f"{failure['source']}: {shown}"
        )
    return out


def render_junit(document: dict) -> bytes:
    """One testsuite per rule; a testcase per (rule, source, via) checked; rule errors as errors,
    skipped rules as skipped testcases."""
    failures_at = {(f["rule"], f["source"], f["via"]): f for f in document["failures"]}
    suites: dict[str, dict] = {}  # rule → (source, via) pairs, in order (dict as ordered set)
    for rule, source, via in document.get("_checked", []):
        suites.setdefault(rule, {})[(source, via)] = None
    for failure in document["failures"]:  # also when "_checked" was dropped
        suites.setdefault(failure["rule"], {}).setdefault((failure["source"], failure["via"]))
    passed_only = "_checked" not in document  # a large project: passes counted per rule
    counted = document.get("_counts", {})
    if passed_only:
        for rule, count in counted.items():
            if count:
                suites.setdefault(rule, {})
    root = etree.Element("testsuites", name="orchestrate validate")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for rule, pairs in suites.items():
        suite = etree.SubElement(root, "testsuite", name=xml_safe(rule))
        counts = {"tests": len(pairs), "failures": 0, "errors": 0, "skipped": 0}
        passes = counted.get(rule, 0) - len(pairs) if passed_only else 0
        if passes > 0:
            etree.SubElement(suite, "testcase", classname=rule, name=f"{passes} sources passed")
            counts["tests"] += passes
        for source, via in pairs:
            case = etree.SubElement(
                suite,
                "testcase",
                classname=xml_safe(rule),
                name=xml_safe(source + (f" (via {via})" if via else "")),
            )
            failure = failures_at.get((rule, source, via))
            if failure is not None:
                counts["failures"] += 1
                message = failure["message"] or f"{len(failure['errors'])} failing value(s)"
                node = etree.SubElement(
                    case, "failure", type=failure["severity"], message=xml_safe(message)
                )
                node.text = xml_safe("\n".join(_value_lines(failure)) or message)
        _set_counts(suite, counts, totals)
    for kind, entries, key in (
        ("errors", document["rule_errors"], "message"),
        ("skipped", document["skipped"], "reason"),
    ):
        for entry in entries:
            label = xml_safe(entry["rule"])
            suite = etree.SubElement(root, "testsuite", name=label)
            case = etree.SubElement(suite, "testcase", classname=label, name="(rule)")
            etree.SubElement(
                case, "error" if kind == "errors" else "skipped", message=xml_safe(entry[key])
            )
            _set_counts(
                suite,
                {
                    "tests": 1,
                    "failures": 0,
                    "errors": int(kind == "errors"),
                    "skipped": int(kind == "skipped"),
                },
                totals,
            )
    for name, count in totals.items():
        root.set(name, str(count))
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8", pretty_print=True)


# Characters XML 1.0 cannot hold (control characters, lone surrogates, U+FFFE/U+FFFF): a rule
# id, a file name or a value may contain them.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_safe(text: str) -> str:
    """`text` with the characters XML cannot hold written as `\\uXXXX`."""
    return _NOT_XML.sub(lambda match: f"\\u{ord(match.group()):04x}", str(text))


def _set_counts(suite, counts: dict, totals: dict) -> None:
    for name, count in counts.items():
        suite.set(name, str(count))
        totals[name] += count


def render_text(document: dict) -> bytes:
    """Failures grouped by rule, one line per failing value with file and line."""
    out: list[str] = []
    by_rule: dict[str, list] = {}
    for failure in document["failures"]:
        by_rule.setdefault(failure["rule"], []).append(failure)
    for rule, failures in by_rule.items():
        out.append(f"{rule} [{failures[0]['severity']}]: {len(failures)} failing source(s)")
        for failure in failures:
            via = f" (via {failure['via']})" if failure["via"] else ""
            if failure["message"]:
                out.append(f"  {_where(failure)}: {failure['message']}")
            if not failure["errors"] and not failure["message"]:
                out.append(f"  {failure['source']}{via}: fails (no values)")
            for line in _value_lines(failure):
                out.append(f"  {line}{via}")
    for title, entries, key in (
        ("rule errors", document["rule_errors"], "message"),
        ("skipped", document["skipped"], "reason"),
        ("warnings", document["warnings"], "message"),
    ):
        if entries:
            out.append(f"{title}:")
            out.extend(f"  {entry['rule']}: {entry[key]}" for entry in entries)
    out.append(
        f"{document['rules']} rule(s), {document['sources_checked']} source(s) checked, "
        f"{len(document['failures'])} failure(s), {len(document['rule_errors'])} rule "
        f"error(s)"
    )
    return ("\n".join(out) + "\n").encode("utf-8")
