"""Stage `validate`: check the project against the build's rule files (spec/rules.md).

Each file is parsed once and checked by every rule whose rpath selects it (subxpath targets are
read through the reader, so they enter the unit's cache key). Small files are checked in shards
of about 64 (one unit each); a large file that many rules select (a Messiah resource.repository
carries most of a library) is split into parts, each a unit that parses the file once and runs a
contiguous group of its rules, so that workers share the long pole (stages/rules/parts.py).
Results are keyed by rule digest, so the document does not depend on the grouping. The rules
are loaded and compiled in `plan`, before any project file is read; custom code runs there once
and again, lazily, once per worker process.

Incrementally: a file edited is checked again by the engine (its unit read it); a file added or
removed re-plans its shard here; a change to the rules, the index or (with `scope: cooked`)
the cook list plans everything again. The document is patched from the outcomes of the units
that ran, and the reports are rendered again only when it changed.
"""

from __future__ import annotations

import uuid
from typing import Any, NamedTuple

from orchestrator import (
    PROJECT,
    UNCHANGED,
    Keyed,
    Plan,
    StageChanges,
    StageSpec,
    Unit,
    digest_value,
    record,
)
from stages.algorithms.globs import compile_globs
from stages.rules.custom.host import close_workers, patch_indexes, preload_index, use_limits
from stages.rules.engine import Shared, check_files, plan_files
from stages.rules.functions import StoredIndex, index_is_available, index_view
from stages.rules.kept import KEPT
from stages.rules.keyed_index import ILEVELS, PREFIXES, ROOT, IndexEdit
from stages.rules.loader import RuleSet, load_rules
from stages.rules.parts import (
    SHARD_MAX_BYTES,
    file_size,
    shard_count,
    shard_id,
    shard_of,
    split_rules,
    unit_cost,
)
from stages.rules.report import ValidationSummary, build_document, patch_document, render, summarize
from stages.settings import rule_file_paths, worker_limits
from stages.sources.base import WHOLE_INDEX, IndexPatcher, index_of, member_rooting

#: Entries of the index the plan reads (rpath sets, the root paths are made under): a change
#: to one plans everything again.
PLANNED_FROM_INDEX = frozenset({ILEVELS, ROOT, WHOLE_INDEX})

SPEC = StageSpec(
    name="validate",
    # 3: incremental; JUnit counts passes per rule past 10,000 checks. 4: the index keyed, its
    # entries in the units' traces
    version=4,
    inputs=(PROJECT, "assets", "index", "cooklist"),
    outputs=("validation", "validation_summary"),
    config_keys=("rules",),
    description="check source files against the rule library",
)


@record
class FileCheck(NamedTuple):
    """A unit's payload is a tuple of these: a file, and the positions (into the plan's shared
    rules) of the rules that check it."""

    path: str
    rules: tuple[int, ...]


@record
class ValidateState(NamedTuple):
    """What the next run's `update` starts from (the plan's state)."""

    rules: str  # the rule library's key (`_rules_key`)
    # what its custom code defines: loading the same rules again runs none of it
    defined: dict[str, list[str]]
    shards: int
    # the index's identity in the caches of the processes that read it (a token, kept while
    # the index is unchanged: a digest of the whole would read all of it) and whether it
    # offers the predefined sets: an unchanged index is decoded only if a rule reads it
    index_digest: str
    index_available: bool


class PlannedFile(NamedTuple):
    """A file to check as planning sees it: its rules, and its size (what the unit costs)."""

    path: str
    rules: tuple[int, ...]
    size: int


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


def _load(ctx, index, defined: dict | None = None, track: bool = True) -> RuleSet:
    """The rules compiled (custom code run, unless `defined` says what it defines); `track`:
    the rule files recorded as the stage's inputs (not by `warm`, whose stage was skipped)."""
    section = ctx.section("rules")
    paths = rule_file_paths(ctx.build)
    for path in paths if track else ():  # the rule files are the stage's inputs too: a skip
        ctx.track_file(path)  # must see edits
    use_limits(worker_limits(section))  # loading runs custom code once
    patch_indexes(ctx.resident)  # a resident build's workers are sent the next index as a patch
    return load_rules(
        paths,
        index=index,
        root=ctx.root,
        allow_custom_code=bool(section.get("allow_custom_code", True)),
        timeout=section.get("timeout"),
        defined=defined,
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
        ]
    )


#: The index a resident build (orchestrate watch) decoded last: the next build patches it.
RESIDENT_INDEX = IndexPatcher()


def stored_index(
    value: Any, identity: str | None = None, resident: bool = False, edit: IndexEdit | None = None
) -> StoredIndex:
    """Collect's keyed `index` as the rules read it: decoded (sources.base.index_of) the first
    time a rule reads it, and traced entry by entry (rules/traced.py). Whether it offers the
    predefined sets is known without decoding it; `identity` names this content of it in the
    caches of the processes that read it (a new one, unless the index is as the last run had
    it: a digest of the whole would read all of it). A `resident` build patches the index the
    previous one decoded (RESIDENT_INDEX) by the entries that changed, which `edit` names when
    the stage knows them."""
    keyed = value if isinstance(value, Keyed) else Keyed("index", memory=value)
    whole = WHOLE_INDEX in keyed
    available = not whole or index_is_available(keyed[WHOLE_INDEX])
    identity = identity or uuid.uuid4().hex
    return StoredIndex(
        (lambda: RESIDENT_INDEX.index(keyed, identity, edit))
        if resident and not whole
        else lambda: index_of(keyed, lazily=True),
        identity,
        available,
        entries=None if whole else keyed,
        edit=edit,
        # A unit run here looks GUIDs up entry by entry, not in the index decoded whole; a
        # resident build patches the index it holds instead, which is cheaper still.
        rooting=None if resident or whole else member_rooting,
    )


def plan(ctx, inputs: dict) -> Plan:
    KEPT.start()  # the driver: units it runs itself share a split file's parse (rules/kept.py)
    index = stored_index(inputs["index"], resident=ctx.resident)
    section = ctx.section("rules")
    ruleset = _load(ctx, index)
    candidates = candidate_files(ctx, (entry.path for entry in ctx.walk()))
    if section.get("scope") == "cooked":
        cooked = _cooked_files(inputs["assets"], inputs["cooklist"], candidates)
        candidates = [path for path in candidates if path in cooked]
    units, shards = _units(ctx, ruleset, plan_files(ruleset, ctx.root, candidates, index))
    return Plan(
        units=units,
        shared=_shared(ctx, ruleset, index),
        state=_state(ruleset, shards, index),
        scratch=ruleset,
    )


def _state(ruleset: RuleSet, shards: int, index) -> ValidateState:
    return ValidateState(
        _rules_key(ruleset),
        ruleset.defined,
        shards,
        ruleset.index_digest,
        index_is_available(index),
    )


def update(ctx, inputs: dict, changes: StageChanges) -> Plan | None:
    """Files added get their units, files removed lose theirs; edits are re-run by the engine,
    and so are the units that looked up index entries that changed (their traces hold them).
    New rules, a change to what selects files (the used levels, the project root, an index its
    source does not key) or (scope: cooked) a new cook list plan everything again."""
    KEPT.start()
    section = ctx.section("rules")
    index_changes = changes.inputs["index"]
    if (index_changes.touched & PLANNED_FROM_INDEX) or (
        section.get("scope") == "cooked"
        and (changes.inputs["cooklist"] or changes.inputs["assets"])
    ):
        return None
    known = changes.state
    if not isinstance(known, ValidateState):
        return None
    index = stored_index(
        inputs["index"],
        None if index_changes else known.index_digest,
        ctx.resident,
        IndexEdit(known.index_digest, index_changes.touched) if index_changes else None,
    )
    if index.available != known.index_available:
        return None
    ruleset = _load(ctx, index, known.defined)
    if _rules_key(ruleset) != known.rules:
        return None
    project = changes.inputs[PROJECT]
    added = sorted(project.changed - set(changes.files_modified))
    if section.get("scope") == "cooked" and added:
        return None
    shards = known.shards or 1
    units: list[Unit] = []
    removed: tuple[str, ...] = ()
    reasons = {}
    moved = set(added) | set(project.removed)
    if moved:
        # The shards files came into or left are planned again whole (with their files that
        # have units of their own, so a file never sits in two units).
        touched = {shard_of(path, shards) for path in moved}
        members = [e.path for e in ctx.walk() if shard_of(e.path, shards) in touched]
        selected = plan_files(ruleset, ctx.root, candidate_files(ctx, members), index)
        units, _ = _units(ctx, ruleset, selected, shards)
        planned = {unit.id for unit in units}
        stale = {shard_id(shard, shards) for shard in touched}
        mine = set(members) | set(project.removed)
        removed = tuple(
            unit_id
            for unit_id in changes.stored_ids()
            if unit_id not in planned and (unit_id in stale or unit_id.partition("#")[0] in mine)
        )
        reasons = {unit.id: "files added or removed: " + _named(moved, unit) for unit in units}
    shared = _shared(ctx, ruleset, index)
    if index_changes and any(rule.custom_index for rule in ruleset.rules):
        # Their units read all of the index: they run again, and the custom-code worker
        # decodes it meanwhile, while the units before them run.
        preload_index(index_view(shared.index, shared.index_digest, shared.root))
    return Plan(
        units=units,
        shared=shared,
        state=_state(ruleset, shards, index),
        removed=removed,
        scratch=ruleset,
        reasons=reasons,
    )


def warm(ctx, inputs: dict, known) -> None:
    """`orchestrate watch` skipped this stage (its first build after the start, say): decode
    the index its next run patches (RESIDENT_INDEX, rooted) and hand it to a custom-code
    worker, when rule code reads it, as that run would. Then the first edit of the index
    after the start patches both by the entries it changed, as later edits do, instead of
    decoding and sending the whole index (about 6 s at 100,000 resources)."""
    if not isinstance(known, ValidateState) or not known.index_available:
        return
    index = stored_index(inputs["index"], known.index_digest, resident=True)
    if not index.available or index.entries is None:  # an index its source does not key
        return
    decoded = index.get()  # RESIDENT_INDEX holds it now, under the identity the update names
    rooted = getattr(decoded, "at", None)
    if rooted is not None:  # and its rooted form, from which the next one's is patched
        made = rooted(ctx.root)
        for attribute in PREFIXES:  # each set rooted now (they are rooted when first read)
            getattr(made, attribute)
    if not ctx.section("rules").get("allow_custom_code", True):
        return
    ruleset = _load(ctx, index, known.defined, track=False)  # what custom code defines is known
    if any(rule.custom_index for rule in ruleset.rules):
        preload_index(index_view(index, ruleset.index_digest, ctx.root))


def _named(moved: set[str], unit: Unit) -> str:
    """The added or removed files a re-planned unit is about (for --explain)."""
    return ", ".join(sorted(moved & set(unit.files))) or "its shard changed"


def _shared(ctx, ruleset: RuleSet, index) -> Shared:
    return Shared(
        tuple(ruleset.rules),
        index,
        ruleset.index_digest,
        ctx.root,
        ctx.section("rules").get("timeout"),
        worker_limits(ctx.section("rules")),
    )


def _units(
    ctx, ruleset: RuleSet, selected: dict, shards: int | None = None
) -> tuple[list[Unit], int]:
    """The units checking `selected` (path → rule positions), and the number of shards."""
    units = []
    small: list[PlannedFile] = []
    for relpath, positions in selected.items():
        size = file_size(ctx.root, relpath)
        groups = split_rules(size, [ruleset.rules[i] for i in positions], positions)
        if len(groups) == 1 and size < SHARD_MAX_BYTES:
            small.append(PlannedFile(relpath, tuple(groups[0]), size))
            continue
        for part, group in enumerate(groups):
            unit_id = relpath if len(groups) == 1 else f"{relpath}#{part + 1}"
            units.append(_unit(ctx, ruleset, unit_id, [PlannedFile(relpath, tuple(group), size)]))
    shards = shards or shard_count(len(small))
    by_shard: dict[int, list[PlannedFile]] = {}
    for planned in small:
        by_shard.setdefault(shard_of(planned.path, shards), []).append(planned)
    for shard, files in sorted(by_shard.items()):
        units.append(_unit(ctx, ruleset, shard_id(shard, shards), sorted(files)))
    # The heaviest first: executors hand units out in order, and a long unit started last
    # would leave the other workers idle at the end.
    units.sort(key=lambda unit: -unit.cost)
    return units, shards


def _unit(ctx, ruleset: RuleSet, unit_id: str, files: list[PlannedFile]) -> Unit:
    """A unit checking each of `files` with its rules."""
    rules = {i: ruleset.rules[i] for planned in files for i in planned.rules}
    key: dict = {
        "files": [
            [planned.path, [ruleset.rules[i].digest for i in planned.rules]] for planned in files
        ]
    }
    # What the rules look up in the index is in the unit's trace (rules/traced.py), not its key.
    if any(rule.sees_root for rule in rules.values()):
        key["root"] = ctx.root  # its rule code may see where the checkout lies
    return Unit(
        id=unit_id,
        payload=tuple(FileCheck(planned.path, planned.rules) for planned in files),
        key=key,
        files=tuple(planned.path for planned in files),
        cost=sum(
            unit_cost(planned.size, [ruleset.rules[i] for i in planned.rules]) for planned in files
        ),
        # Custom code reading the whole index: the driver's custom-code worker holds it
        # (`preload_index`), which a forked helper's would have to load again.
        pinned=any(rule.custom_index for rule in rules.values()),
    )


def run(checks: tuple[FileCheck, ...], shared: Shared, reader):
    """The outcomes of the unit's files, one per rule (its files' pairs and failures in file
    order)."""
    items = [(check.path, [shared.rules[i] for i in check.rules]) for check in checks]
    return check_files(items, shared, reader)


def finish(ctx, inputs: dict, results) -> dict:
    if not ctx.resident:  # the driver's custom-code workers (loading, local units) are done
        close_workers()  # (a resident build keeps them, and the index they hold, for the next)
    KEPT.stop()
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
    summary = summarize(document)
    ctx.log.info(
        "validate.done",
        rules=summary.rules,
        checked=summary.sources_checked,
        failures=summary.failure_count(),
        rule_errors=summary.broken,
        worst=summary.highest_severity(),
        gate_fails=summary.gate_fails(fail_on),
    )
    return {"validation": document, "validation_summary": summary}


def publish(ctx, outputs: dict) -> None:
    """The three reports, rendered only when the document changed or a report is not as it
    was published (deleted or edited since)."""
    document = outputs["validation"]
    for fmt, relpath in REPORTS.items():
        if document is UNCHANGED and ctx.mark_published(relpath):
            continue
        if document is UNCHANGED:
            document = ctx.previous["validation"]
        ctx.publish_bytes(relpath, render(document, fmt))


def verdict(build, outputs) -> list[str]:
    """Rule failures (and broken rules) at or above `rules.fail_on` fail the build."""
    summary: ValidationSummary = outputs["validation_summary"]
    reason = summary.gate_reason(build.section("rules")["fail_on"])
    return [reason] if reason else []


def summary(build, outputs) -> list[str]:
    return [outputs["validation_summary"].line()]
