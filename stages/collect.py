"""Stage `collect`: the file table and the asset source's view of the project.

Parsing fans out over the source's parse units (per repository, per world/level, per batch of
attribute files); each is cached by the content of the files it read, so editing one file
re-parses only its unit. `finish` assembles the parts into assets and the rule index.
"""

from __future__ import annotations

from orchestrator.hashing import digest_bytes
from orchestrator.typing import Plan, StageSpec, Unit
from stages.algorithms.globs import compile_globs
from stages.sources import get_source, raise_on_fatal

SPEC = StageSpec(
    name="collect",
    # 2: repository order compares folders segment by segment; empty Deps are kept in the index.
    version=2,
    inputs=(),
    outputs=("files", "source"),
    config_keys=("project", "source", "collect", "cocos"),
    description="walk the project; parse repositories, maps and attribute files",
)


def project_files(ctx) -> list:
    """The project's FileEntry list without the paths `collect.exclude` leaves out."""
    patterns = ctx.section("collect").get("exclude") or []
    if not patterns:  # the usual case: no call per file
        return list(ctx.walk())
    excluded = compile_globs(patterns)
    return [entry for entry in ctx.walk() if not excluded(entry.path)]


def source_options(ctx, source) -> dict:
    """`collect` options, plus what a source reads of the build beyond them (its `configure`:
    the Cocos source's `cocos` section and engine folder). Keys starting with `_` are for the
    source's `plan` and `assemble` in the driver only, never sent with the parse units."""
    options = dict(ctx.section("collect"))
    configure = getattr(source, "configure", None)
    if configure is not None:
        options.update(configure(ctx))
    return options


def plan(ctx, inputs: dict) -> Plan:
    name = ctx.section("source")
    source = get_source(name)
    options = source_options(ctx, source)
    unit_options = {key: value for key, value in options.items() if not key.startswith("_")}
    units = []
    for unit in source.plan(project_files(ctx), options):
        units.append(
            Unit(
                id=unit.id,
                payload=(name, unit, unit_options),
                # The file list is key material: a file joining a batch must re-run it
                # even though the trace only records the files that were read.
                key={
                    "source": name,
                    "source_version": source.version,
                    "kind": unit.kind,
                    "files": list(unit.files),
                },
                files=unit.files,
                cost=max(1, len(unit.files)),
            )
        )
    return Plan(units=units)


def run(payload, shared, reader):
    name, unit, options = payload
    return get_source(name).parse(unit, reader, options)


def finish(ctx, inputs: dict, results) -> dict:
    name = ctx.section("source")
    source = get_source(name)
    options = source_options(ctx, source)
    entries = project_files(ctx)
    files = {entry.path: ctx.file_digest(entry.path) for entry in entries}
    parts = PartResults(results)
    result = source.assemble(ctx.root, entries, parts, options)
    raise_on_fatal(result.problems, bool(options.get("skip_broken")))
    for problem in result.problems:
        ctx.log.warning(
            "collect.problem",
            kind=problem.kind,
            file=problem.file,
            line=problem.line,
            message=problem.message,
        )
    result.digest = _content_digest(name, source.version, options, files, parts.digests)
    return {"files": files, "source": result}


class PartResults(dict):
    """The parse results by unit id, with `digests` (unit id → digest of the stored result).

    A source may name what it derives from a few parts by their digests instead of hashing the
    derived value (the Messiah index: 100,000 entries, from a handful of repository parts).
    """

    def __init__(self, results) -> None:
        super().__init__((unit_id, results[unit_id]) for unit_id in results)
        self.digests = {unit_id: results.digest(unit_id) for unit_id in results}


def _content_digest(name: str, version: int, options: dict, files: dict, parts: dict) -> str:
    """Everything the assets derive from, hashed without building a huge JSON document: the
    parse results and the listing — not the files' contents, so an edit that parses the same
    (whitespace, a texture's size) does not re-run the cook list."""
    lines = [f"{name}\0{version}\0{sorted(options.items())!r}"]
    lines += [f"f\0{path}" for path in files]
    lines += [f"p\0{unit_id}\0{parts[unit_id]}" for unit_id in sorted(parts)]
    return digest_bytes("\n".join(lines).encode("utf-8"))
