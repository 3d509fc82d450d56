"""Targets (met / missed) and the markdown of docs/benchmarks.md, from the recorded figures."""

from __future__ import annotations

from common import DOC, fmt_s, latest_results

MB = 2**20
OUTPUT_STAGES = ("write", "archive", "hash")


def _f(figures: dict, name: str, key: str = "median"):
    figure = figures.get(name)
    return figure.get(key) if isinstance(figure, dict) else None


def _ratio(a, b):
    return a / b if (a is not None and b) else None


def _x(value) -> str:
    return "n/a" if value is None else (f"{value:.2f}x" if value < 100 else f"{value:.0f}x")


def _pct(value) -> str:
    return "n/a" if value is None else f"{value * 100:.1f} %"


def _mb(value) -> str:
    return "n/a" if not value else f"{value / MB:.0f} MB"


def output_seconds(figures: dict, name: str) -> float | None:
    stages = _f(figures, name, "stages") or {}
    if not all(s in stages for s in OUTPUT_STAGES):
        return None
    return sum(stages[s] for s in OUTPUT_STAGES)


def targets(figures: dict) -> list[dict]:
    """The issue's targets, each with the measured value and met / missed (None: not measured)."""
    rows = []

    def add(name, value, shown, limit, met, detail=""):
        rows.append(
            {
                "target": name,
                "value": value,
                "shown": shown,
                "limit": limit,
                "met": None if value is None else met,
                "detail": detail,
            }
        )

    noop, ninja = _f(figures, "noop"), _f(figures, "floor.ninja_noop")
    ray_imported = _f(figures, "noop", "ray_imported")
    r = _ratio(noop, ninja)
    add(
        "no-op rerun / ninja no-op, and Ray not imported",
        r,
        f"{_x(r)} ({fmt_s(noop)} vs {fmt_s(ninja)}); Ray imported: "
        f"{'n/a' if ray_imported is None else ('yes' if ray_imported else 'no')}",
        "≤ 3x, not imported",
        r is not None and r <= 3 and ray_imported is False,
    )

    cold = _f(figures, "cold.ray2")
    edit = _f(figures, "edit.attribute")
    r = _ratio(edit, cold)
    add(
        "one edited attribute file / cold build",
        r,
        f"{_pct(r)} ({fmt_s(edit)} process vs {fmt_s(cold)})",
        "≤ 3 %",
        r is not None and r <= 0.03,
    )

    floor2 = _f(figures, "floor.read_parse.p2")
    r = _ratio(cold, floor2)
    add(
        "cold build (Ray, 2 workers) / read+parse floor on 2 processes",
        r,
        f"{_x(r)} ({fmt_s(cold)} vs {fmt_s(floor2)})",
        "≤ 2x",
        r is not None and r <= 2,
    )

    v1, v2 = _f(figures, "validate.ray1"), _f(figures, "validate.ray2")
    r = _ratio(v1, v2)
    add(
        "validation speed-up, 2 workers / 1 worker",
        r,
        f"{_x(r)} ({fmt_s(v1)} → {fmt_s(v2)})",
        "≥ 1.8x",
        r is not None and r >= 1.8,
    )

    per_rule = _f(figures, "validate.per_rule")
    r = _ratio(per_rule, v2)
    extrapolated = _f(figures, "validate.per_rule", "extrapolated")
    add(
        "validation (2 workers) vs parse-per-rule",
        r,
        f"{_x(r)} faster ({fmt_s(v2)} vs {fmt_s(per_rule)}"
        + (", per-rule extrapolated from a sample" if extrapolated else "")
        + ")",
        "≥ 20x faster",
        r is not None and r >= 20,
    )

    opened = _f(figures, "report.open")
    assets = _f(figures, "report.page_bytes", "assets")
    add(
        "build report: opens in a browser (navigation to drawn)",
        opened,
        f"{fmt_s(opened)}" + (f" ({assets:,} assets)" if assets else ""),
        "< 3 s",
        opened is not None and opened < 3,
    )
    page = _f(figures, "report.page_bytes")
    add(
        "build report: page size",
        page,
        "n/a" if page is None else f"{page / MB:.2f} MB",
        "≤ 5 MB",
        page is not None and page <= 5 * MB,
    )

    driver = _f(figures, "cold.ray2", "driver_peak_rss")
    private = _f(figures, "cold.ray2", "driver_peak_private")
    add(
        "driver peak RSS (cold build, Ray 2 workers)",
        driver,
        _mb(driver) + (f" (not shared with other processes: {_mb(private)})" if private else ""),
        "≤ 600 MB",
        driver is not None and driver <= 600 * MB,
    )
    return rows


def figure_rows(figures: dict) -> list[tuple[str, str, str, str]]:
    """(figure, median, ratio, against what) for the main table."""
    rows = []
    f = lambda name, key="median": _f(figures, name, key)  # noqa: E731

    def add(label, value, ratio_value=None, against="", ratio_text=None):
        rows.append(
            (
                label,
                value if isinstance(value, str) else fmt_s(value),
                ratio_text
                if ratio_text is not None
                else ("" if ratio_value is None and not against else _x(ratio_value)),
                against,
            )
        )

    floor1, floor2 = f("floor.read_parse.p1"), f("floor.read_parse.p2")
    cold_local, cold_ray = f("cold.local"), f("cold.ray2")
    add(
        "cold build, local executor (engine seconds)",
        cold_local,
        _ratio(cold_local, floor1),
        "read+parse floor, 1 process",
    )
    add(
        "cold build, Ray 2 workers (startup excluded)",
        cold_ray,
        _ratio(cold_ray, floor2),
        "read+parse floor, 2 processes",
    )
    add("Ray startup (reported apart)", f("cold.ray2", "ray_startup_median"))
    add("cold build, Ray 2 workers, whole process", f("cold.ray2", "wall_median"))
    add("floor: walk + stat every file", f("floor.stat"))
    add("floor: read every file + lxml-parse every XML, 1 process", floor1)
    add("floor: read every file + lxml-parse every XML, 2 processes", floor2)
    add("floor: read + lxml-parse every XML file, 1 process", f("floor.xml_parse.p1"))
    noop = f("noop")
    add(
        "no-op rerun (`orchestrate run`, whole process)",
        noop,
        _ratio(noop, f("floor.ninja_noop")),
        "ninja no-op",
    )
    add("", "", _ratio(noop, f("floor.stat")), "stat floor")
    add("ninja no-op (same inputs, one edge per asset)", f("floor.ninja_noop"))
    for name, label in (
        ("edit.attribute", "one edited attribute file (texture Width)"),
        ("edit.repository", "one edited repository (an Item's Name)"),
        ("edit.cosmetic", "cosmetic XML edit (re-indent a texture.xml)"),
    ):
        value = f(name)
        rows.append(
            (
                label + ", whole process",
                fmt_s(value),
                _pct(_ratio(value, cold_ray)),
                "cold build, Ray 2 workers",
            )
        )
        built = f(name, "built") or {}
        engine = f(name, "engine_median")
        rows.append(
            (
                "  engine seconds; units rebuilt",
                fmt_s(engine),
                _pct(_ratio(engine, cold_ray)),
                ", ".join(f"{k} {v}" for k, v in built.items()) or "nothing",
            )
        )
    xml1 = f("floor.xml_parse.p1")
    c1, c2 = f("collect.cold.ray1"), f("collect.cold.ray2")
    add(
        "collect+dependency cold, local",
        f("collect.cold.local"),
        _ratio(f("collect.cold.local"), xml1),
        "XML parse floor, 1 process",
    )
    add("collect+dependency cold, Ray 1 worker", c1, _ratio(c1, xml1), "XML parse floor, 1 process")
    add("collect+dependency cold, Ray 2 workers", c2, _ratio(c1, c2), "speed-up over 1 worker")
    add("collect+dependency no-op, whole process", f("collect.noop"))
    ce = f("collect.edit_attribute")
    rows.append(
        (
            "collect+dependency, one edited attribute file, whole process",
            fmt_s(ce),
            _pct(_ratio(ce, c2)),
            "collect+dependency cold, Ray 2 workers",
        )
    )
    v1, v2 = f("validate.ray1"), f("validate.ray2")
    add("validate stage, Ray 1 worker", v1, _ratio(v1, xml1), "XML parse floor, 1 process")
    add("validate stage, Ray 2 workers", v2, _ratio(v1, v2), "speed-up over 1 worker")
    eng = f("validate.engine_inprocess")
    per = f("validate.per_rule")
    extrap = " (extrapolated)" if f("validate.per_rule", "extrapolated") else ""
    add(
        "validate_project, in one process" + extrap,
        eng,
        _ratio(eng, xml1),
        "XML parse floor, 1 process",
    )
    add(
        "validate_per_rule (ArtEase 1.x), in one process" + extrap,
        per,
        _ratio(per, eng),
        "slower than validate_project (same process, same files)",
    )
    add("", "", _ratio(per, v2), "slower than the validate stage, 2 workers")
    payload = f("output.payloads", "bytes")
    zstd = f("output.zstd")
    for name, label in (("cold.local", "local"), ("cold.ray2", "Ray 2 workers")):
        seconds = output_seconds(figures, name)
        mbs = payload / MB / seconds if (payload and seconds) else None
        zmbs = payload / MB / zstd if (payload and zstd) else None
        rows.append(
            (
                f"write+archive+hash, {label}",
                "n/a" if mbs is None else f"{mbs:.0f} MB/s ({fmt_s(seconds)})",
                _x(_ratio(zmbs, mbs)),
                "zstd -3 -T1 is this much faster",
            )
        )
    if zstd and payload:
        rows.append(
            (
                "zstd -3 -T1 on the same payloads",
                f"{payload / MB / zstd:.0f} MB/s ({fmt_s(zstd)}, {payload / MB:.0f} MB)",
                "",
                "",
            )
        )
    for name, label in (("cold.ray2", "Ray 2 workers"), ("cold.local", "local")):
        rows.append(
            (
                f"peak RSS, cold build {label}: driver / workers / all",
                f"{_mb(f(name, 'driver_peak_rss'))} / {_mb(f(name, 'workers_peak_rss'))} / "
                f"{_mb(f(name, 'peak_rss_total'))}",
                "",
                "sampled every 0.25 s",
            )
        )
        if f(name, "driver_peak_private"):
            rows.append(
                (
                    f"  driver peak RSS less shared pages, {label}",
                    _mb(f(name, "driver_peak_private")),
                    "",
                    "Ray's object store pages mapped into the driver are shared",
                )
            )
    cocos_cold = f("cocos.cold.ray2")
    if cocos_cold is not None or f("cocos.noop") is not None:
        files = (figures.get("cocos.project") or {}).get("assets", "?")
        rows.append(
            (
                f"Cocos project ({files} assets), cold build, Ray 2 workers, engine",
                fmt_s(cocos_cold),
                _x(_ratio(cocos_cold, f("cold.ray2"))),
                "vs the Messiah cold build (Ray 2 workers)",
            )
        )
        rows.append(
            (
                "Cocos no-op rerun, whole process",
                fmt_s(f("cocos.noop")),
                _x(_ratio(f("cocos.noop"), f("noop"))),
                "vs the Messiah no-op rerun",
            )
        )
        rows.append(
            (
                "Cocos, one edited sprite frame, whole process",
                fmt_s(f("cocos.edit")),
                _pct(_ratio(f("cocos.edit"), cocos_cold)),
                "of the Cocos cold build",
            )
        )
    page = f("report.page_bytes")
    if page is not None:
        rows.append(
            (
                "build report: reports/index.html",
                f"{page / MB:.2f} MB",
                "",
                f"{f('report.page_bytes', 'assets') or 0:,} assets, "
                f"{f('report.page_bytes', 'bundles') or 0:,} bundles",
            )
        )
    add("build report: render, content made afresh (in process)", f("report.render"))
    add("build report: render, content kept from the last run", f("report.render_kept"))
    add(
        "build report: open in headless Chromium, navigation to drawn",
        f("report.open"),
        None,
        "load event: " + fmt_s(f("report.open", "load_median")),
        ratio_text="",
    )
    add("build report: click the largest bundle (drawn)", f("report.open", "click_median"))
    add("build report: search every asset (no match)", f("report.open", "search_median"))
    return rows


def stage_table(figures: dict) -> list[str]:
    local = _f(figures, "cold.local", "stages") or {}
    ray = _f(figures, "cold.ray2", "stages") or {}
    names = list(dict.fromkeys([*local, *ray]))
    if not names:
        return []
    lines = ["| stage | local | Ray, 2 workers | local / Ray |", "|---|---:|---:|---:|"]
    for name in names:
        a, b = local.get(name), ray.get(name)
        lines.append(f"| {name} | {fmt_s(a)} | {fmt_s(b)} | {_x(_ratio(a, b))} |")
    lines.append(
        f"| **total** | {fmt_s(sum(local.values()) if local else None)} | "
        f"{fmt_s(sum(ray.values()) if ray else None)} | |"
    )
    return lines


def size_markdown(size: str, entry: dict) -> list[str]:
    figures, meta = entry.get("figures", {}), entry.get("meta", {})
    machine = meta.get("machine", {})
    project = figures.get("project", {})
    out = [f"## {int(size):,} resources", ""]
    out.append(
        f"Measured {meta.get('finished', '?')} with `{meta.get('command', '?')}` "
        f"(repeat {meta.get('repeat')}, cold builds {meta.get('repeat_cold')}; medians). "
        f"Project: {project.get('files', '?')} files, "
        f"{(project.get('bytes') or 0) / MB:.0f} MB of file content, seed {project.get('seed')}. "
        f"Machine: {machine.get('cores')} cores, {machine.get('ram_gb')} GB, "
        f"{machine.get('cpu', '')}; Python {machine.get('python')}, "
        f"Ray {machine.get('ray')}, lxml {machine.get('lxml')}; "
        f"commit {machine.get('git', {}).get('commit', '?')} "
        f"(+{machine.get('git', {}).get('modified_files', '?')} modified files)."
    )
    history = (meta.get("history_by_size") or {}).get(str(size))
    if history:
        out.append(
            f"This invocation re-measured the sections {', '.join(meta.get('sections', []))};"
            " the other figures come from earlier invocations, merged (`--merge`):"
        )
        out += [""] + [
            f"- `{h.get('command')}` — sections {', '.join(h.get('sections') or [])}, "
            f"repeat {h.get('repeat')}, cold builds {h.get('repeat_cold')}, "
            f"finished {h.get('finished')}, commit {h.get('commit')}"
            for h in history
        ]
    if meta.get("partial"):
        out.append("**Partial: the run was still going or was interrupted.**")
    out += ["", "### Targets", "", "| target | measured | limit | |", "|---|---|---|---|"]
    for row in targets(figures):
        verdict = {True: "**met**", False: "**missed**", None: "not measured"}[row["met"]]
        out.append(f"| {row['target']} | {row['shown']} | {row['limit']} | {verdict} |")
    out += ["", "### Figures", "", "| figure | median | ratio | against |", "|---|---:|---:|---|"]
    for label, value, ratio, against in figure_rows(figures):
        out.append(f"| {label} | {value} | {ratio} | {against} |")
    stages = stage_table(figures)
    if stages:
        out += [
            "",
            "### Cold build per stage (medians; Ray's startup taken out of the stage that "
            "started Ray)",
            "",
            *stages,
        ]
    targets_info = figures.get("edit.targets")
    if targets_info:
        out += [
            "",
            f"Edited files: `{targets_info['attribute']}` and the Item `{targets_info['guid']}` "
            f"of `{targets_info['repository']}` (restored after each run).",
        ]
    per = figures.get("validate.per_rule") or {}
    if per.get("extrapolated"):
        factor = per.get("small_factor") or 0
        out += [
            "",
            f"The in-process validation figures ran on every repository, world and level "
            f"file plus every {round(factor)}th other file "
            f"({per.get('files_small', '?')} files); the other-files part is scaled up "
            f"×{factor:.1f}. Measured: per-rule {fmt_s(per.get('measured_s'))}.",
        ]
    versions = {
        run.get("code")
        for figure in figures.values()
        if isinstance(figure, dict)
        for run in figure.get("runs", [])
        if run.get("code")
    }
    if len(versions) > 1:
        out += [
            "",
            f"**These figures span {len(versions)} versions of `orchestrator/` and "
            "`stages/`** (commits landed while the suite ran; every run records the digest "
            "of the sources it imported, `code` in the results file): a ratio between two "
            "sections may compare different engines.",
        ]
    notes, errors = entry.get("notes", []), entry.get("errors", {})
    if notes or errors:
        out += (
            [""]
            + [f"- note: {n}" for n in notes]
            + [f"- **not measured** — {k}: {v}" for k, v in errors.items()]
        )
    return out + [""]


INTRO = """# Benchmarks

Generated by `benchmarks/run_all.py` (do not edit by hand: rerun the suite). Raw figures, every
run and every stage: `benchmarks/results/<date>.json`.

```bash
python benchmarks/run_all.py --sizes 10000,100000 --repeat 3   # full suite, medians of 3
python benchmarks/run_all.py --sizes 10000                      # quick mode (~3 minutes)
```

How the figures are taken:

- Every `orchestrate` run is a fresh process (`benchmarks/runner.py` runs the console script's
  `main` and keeps `run_build`'s result). *Engine seconds* are `run_build`'s, with Ray's startup
  (`RunResult.ray_startup`, reported apart) taken out; *whole process* is what a user waits for
  (interpreter start, imports, Ray shutdown included).
- Cold builds start from an empty cache and output folder, from a copy of the generated build
  file (`benchmarks/work/.../bench-*.yaml`) with `executor.shared_paths: true` — see the note
  below. Rebuilds (no-op, edits) run as a user would: `orchestrate run build.yaml` (executor
  `auto`) on the warm cache of the last Ray cold build; each edit is undone after its run.
- Floors (shared/spec/pipeline.md, "Benchmark terms"): walk + stat every file; walk + read every
  file once + lxml-parse every XML file once, on 1 and on 2 processes (a fork pool; its start is
  counted); ninja's no-op over a `build.ninja` with one edge per asset (a resource folder's files;
  each repository, world and level) and one stamp per edge.
- Validation: the `validate` stage's own seconds from a `--stages validate` cold run (collect and
  dependency run first). The ArtEase 1.x baseline `validate_per_rule` (one parse per rule and
  file) and the engine's `validate_project` run in one process on the same files.
- Output throughput: MB = uncompressed cooked payload bytes of the bundles; write+archive+hash
  seconds come from the cold builds; `zstd -3 -T1` compresses the same payloads, concatenated per
  bundle, in one process.
- The machine is shared and noisy: compare ratios within one size's table, not across days.

Why `executor.shared_paths: true` (`--shared-paths true`, the default of the suite): measured at
commit c5ba01f, with the engine's default (`false`) a Ray worker is sent each unit's known files,
and a unit that reads more (the repository validate units read every texture.xml and source image
through custom checks) came back once per missing file and was re-run from the start
(`orchestrator/executors/ray.py`, `RayExecutor.execute`): a 10,000-resource cold build did not
finish in 15 minutes. On one machine the workers can read the project from disk. The rule
built-ins now fetch every file they will read in one round trip, and a 10,000-resource suite ran
with `--shared-paths false` (commit 3df1a24); the suite keeps `true` as its default.
"""


def render(current: dict[str, dict] | None = None) -> str:
    """The whole document: this invocation's sizes, and the latest stored result of the others."""
    entries = latest_results()
    entries.update(current or {})
    parts = [INTRO]
    for size in sorted(entries, key=int):
        parts.append("\n".join(size_markdown(size, entries[size])))
    return "\n".join(parts)


def write_doc(current: dict[str, dict] | None = None) -> None:
    DOC.write_text(render(current), encoding="utf-8")


def print_summary(figures: dict, only_measured: bool = True) -> None:
    """The figure rows (and the targets that could be judged) on standard output."""
    for label, value, ratio, against in figure_rows(figures):
        if (
            only_measured
            and not value.replace("n/a", "").strip(" /")
            and not ratio.replace("n/a", "").strip()
        ):
            continue
        print(f"{label:<66} {value:>18} {ratio:>8}  {against}")
    judged = [t for t in targets(figures) if t["met"] is not None]
    if judged:
        print()
    for row in judged:
        print(
            f"{'MET   ' if row['met'] else 'MISSED'} {row['target']}: {row['shown']} "
            f"(limit {row['limit']})"
        )
