"""Stage `validate`: check the project against the build's rule files (spec/rules.md).

One unit per source file: it parses the file once and runs every rule whose rpath selects it
(subxpath targets are read through the reader, so they enter the unit's cache key). A large file
that many rules select (a Messiah resource.repository carries most of a library) is split into
parts, each a unit that parses the file once and runs a contiguous group of its rules, so that
workers share the long pole (stages/rules/parts.py). Results are keyed by rule digest, so the
document does not depend on the split. The rules are loaded and compiled in `plan`, before any
project file is read; custom code runs there once and again, lazily, once per worker process.

Incrementally: a file edited is checked again by the engine (its units read it); a file added or
removed gets or loses its units here; a change to the rules, the index or (with `scope: cooked`)
the cook list plans everything again. The document is patched from the outcomes of the units
that ran, and the reports are rendered again only when it changed.
"""

from __future__ import annotations

from orchestrator.hashing import digest_value
from orchestrator.typing import PROJECT, Plan, StageChanges, StageSpec, Unit
from orchestrator.values import UNCHANGED
from stages.algorithms.globs import compile_globs
from stages.rules.custom.host import close_workers
from stages.rules.engine import Shared, check_file, plan_files
from stages.rules.loader import RuleSet, load_rules
from stages.rules.parts import file_size, split_rules, unit_cost
from stages.rules.report import (
    build_document,
    gate_fails,
    gate_reason,
    highest_severity,
    patch_document,
    render,
    summary_line,
)
from stages.settings import rule_file_paths

SPEC = StageSpec(
    name="validate",
    version=3,  # 3: incremental; JUnit counts passes per rule past 10,000 checks
    inputs=(PROJECT, "assets", "index", "cooklist"),
    outputs=("validation", "validation_summary"),
    config_keys=("rules",),
    description="check source files against the rule library",
)

REPORTS = {
    "json": "reports/validate.json",
    "junit": "reports/junit.xml",
    "text": "reports/validate.txt",
}


def candidate_files(ctx, paths) -> list[str]:
    """The project files rules may select: `collect.exclude` leaves some out."""
    patterns = ctx.section("collect").get("exclude") or []
    if not patterns:
        return list(paths)
    excluded = compile_globs(patterns)
    return [path for path in paths if not excluded(path)]


def _cooked_files(assets, cooklist, files) -> set[str]:
    """Files of cooked assets: their files plus what else lies under their folders, except the
    files of assets that are not cooked (a Unity folder holds many assets; a Messiah resource
    folder is one asset's)."""
    cooked = set(cooklist.cooked)
    chosen: set[str] = set()
    others: set[str] = set()
    folders: list[str] = []
    for asset in assets.values():
        if asset.id not in cooked:
            others.update(asset.files)
            continue
        chosen.update(asset.files)
        folders.extend(f.rstrip("/") + "/" for f in asset.folders if f)
    if folders:
        prefixes = tuple(sorted(set(folders)))
        chosen.update(path for path in files if path.startswith(prefixes) and path not in others)
    return chosen & set(files)


def _load(ctx, index) -> RuleSet:
    section = ctx.section("rules")
    paths = rule_file_paths(ctx.build)
    for path in paths:  # the rule files are this stage's inputs too: a skip must see edits
        ctx.track_file(path)
    return load_rules(
        paths,
        index=index,
        root=ctx.root,
        allow_custom_code=bool(section.get("allow_custom_code", True)),
        timeout=section.get("timeout"),
    )


def _rules_key(ruleset: RuleSet) -> str:
    """What the rule library is, as far as the units and the document go (a rule's digest
    leaves out what only the document shows: its label, severity and name)."""
    return digest_value(
        [
            [[rule.digest, rule.label, rule.severity, rule.name] for rule in ruleset.rules],
            ruleset.total,
            ruleset.rule_errors,
            ruleset.skipped,
            ruleset.warnings,
            ruleset.index_digest,
        ]
    )


def plan(ctx, inputs: dict) -> Plan:
    index = inputs["index"]
    section = ctx.section("rules")
    ruleset = _load(ctx, index)
    candidates = candidate_files(ctx, (entry.path for entry in ctx.walk()))
    if section.get("scope") == "cooked":
        cooked = _cooked_files(inputs["assets"], inputs["cooklist"], candidates)
        candidates = [path for path in candidates if path in cooked]
    units = _units(ctx, ruleset, plan_files(ruleset, ctx.root, candidates, index))
    return Plan(
        units=units, shared=_shared(ctx, ruleset, index), state=_rules_key(ruleset), scratch=ruleset
    )


def update(ctx, inputs: dict, changes: StageChanges) -> Plan | None:
    """Files added get their units, files removed lose theirs; edits are re-run by the engine.
    New rules, a new index or (scope: cooked) a new cook list plan everything again."""
    section = ctx.section("rules")
    if changes.inputs["index"] or (
        section.get("scope") == "cooked"
        and (changes.inputs["cooklist"] or changes.inputs["assets"])
    ):
        return None
    index = inputs["index"]
    ruleset = _load(ctx, index)
    if _rules_key(ruleset) != changes.state:
        return None
    project = changes.inputs[PROJECT]
    added = sorted(project.changed - set(changes.files_modified))
    if section.get("scope") == "cooked" and added:
        return None
    units = _units(ctx, ruleset, plan_files(ruleset, ctx.root, candidate_files(ctx, added), index))
    gone = set(project.removed)
    removed = tuple(
        unit_id for unit_id in changes.stored_ids() if unit_id.partition("#")[0] in gone
    )
    return Plan(
        units=units,
        shared=_shared(ctx, ruleset, index),
        state=changes.state,
        removed=removed,
        scratch=ruleset,
        reasons={unit.id: f"new file {unit.payload[0]}" for unit in units},
    )


def _shared(ctx, ruleset: RuleSet, index) -> Shared:
    return Shared(
        tuple(ruleset.rules),
        index,
        ruleset.index_digest,
        ctx.root,
        ctx.section("rules").get("timeout"),
    )


def _units(ctx, ruleset: RuleSet, selected: dict) -> list[Unit]:
    units = []
    for relpath, positions in selected.items():
        size = file_size(ctx.root, relpath)
        groups = split_rules(size, [ruleset.rules[i] for i in positions], positions)
        for part, group in enumerate(groups):
            rules = [ruleset.rules[i] for i in group]
            key = {"path": relpath, "rules": [rule.digest for rule in rules]}
            if any(rule.uses_index for rule in rules):
                key["index"] = ruleset.index_digest
            if any(rule.func_str for rule in rules):
                key["root"] = ctx.root  # custom code sees absolute paths
            unit_id = relpath if len(groups) == 1 else f"{relpath}#{part + 1}"
            units.append(
                Unit(
                    id=unit_id,
                    payload=(relpath, tuple(group)),
                    key=key,
                    files=(relpath,),
                    cost=unit_cost(size, rules),
                )
            )
    # The heaviest first: executors hand units out in order, and a long unit started last
    # would leave the other workers idle at the end.
    units.sort(key=lambda unit: -unit.cost)
    return units


def run(payload, shared: Shared, reader):
    relpath, positions = payload
    return check_file(relpath, [shared.rules[i] for i in positions], shared, reader)


def finish(ctx, inputs: dict, results) -> dict:
    close_workers()  # the driver's custom-code workers (loading, local units) are done
    ruleset: RuleSet = results.plan.scratch
    document = None
    if results.changed is not None:
        if not results.changed and not results.removed:
            return {"validation": UNCHANGED, "validation_summary": UNCHANGED}
        gone = [ctx.load_result(digest) for unit_id, digest in sorted(results.before.items())]
        new = [results[unit_id] for unit_id in sorted(results.changed)]
        document = patch_document(ctx.previous["validation"], ruleset, gone, new)
    if document is None:
        document = build_document(ruleset, (results[unit_id] for unit_id in results))
    fail_on = ctx.section("rules").get("fail_on", "error")
    ctx.log.info(
        "validate.done",
        rules=document["rules"],
        checked=document["sources_checked"],
        failures=len(document["failures"]),
        rule_errors=len(document["rule_errors"]),
        worst=highest_severity(document),
        gate_fails=gate_fails(document, fail_on),
    )
    summary = {key: value for key, value in document.items() if not key.startswith("_")}
    return {"validation": document, "validation_summary": summary}


def publish(ctx, outputs: dict) -> None:
    """The three reports, rendered only when the document changed."""
    document = outputs["validation"]
    for fmt, relpath in REPORTS.items():
        if document is UNCHANGED:
            ctx.mark_published(relpath)
        else:
            ctx.publish_bytes(relpath, render(document, fmt))


def verdict(build, outputs) -> list[str]:
    """Rule failures (and broken rules) at or above `rules.fail_on` fail the build."""
    reason = gate_reason(outputs["validation_summary"], build.section("rules")["fail_on"])
    return [reason] if reason else []


def summary(build, outputs) -> list[str]:
    return [summary_line(outputs["validation_summary"])]
