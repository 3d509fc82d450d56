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


def _faster(value) -> str:
    """A speed ratio (baseline seconds / ours) in words: "5.00x faster" or "1.49x slower"."""
    if value is None:
        return "n/a"
    return f"{_x(value)} faster" if value >= 1 else f"{_x(1 / value)} slower"


def _mb(value) -> str:
    return "n/a" if not value else f"{value / MB:.0f} MB"


def output_seconds(figures: dict, name: str) -> float | None:
    stages = _f(figures, name, "stages") or {}
    if not all(s in stages for s in OUTPUT_STAGES):
        return None
    return sum(stages[s] for s in OUTPUT_STAGES)


ISSUE_15 = "issue 15"  # the incremental engine's targets: the first table
ISSUE_28 = "issue 28"  # the farm's: a fresh agent from a warm cache, scaling out
ISSUE_29 = "issue 29"  # the developer loop: `orchestrate watch`
EARLIER = "earlier"  # targets of earlier issues that are still measured


def _units_where(figures: dict, name: str) -> str:
    """Where a build's units ran, as its runs recorded (Ray imported or not)."""
    executor = _f(figures, name, "executor")
    return {"ray": "units on Ray", "driver": "units in the driver"}.get(executor, "")


def targets(figures: dict) -> list[dict]:
    """The targets, each with the measured value and met / missed (None: not measured): issue
    15's in its order (group ISSUE_15), then the earlier ones still measured (group EARLIER)."""
    rows = []

    def add(group, name, value, shown, limit, met):
        rows.append(
            {
                "group": group,
                "target": name,
                "value": value,
                "shown": shown,
                "limit": limit,
                "met": None if value is None else met,
            }
        )

    f = lambda name, key="median": _f(figures, name, key)  # noqa: E731
    noop, ninja = f("noop"), f("floor.ninja_noop")
    cold_wall, cold_engine = f("cold.auto", "wall_median"), f("cold.auto")
    where = _units_where(figures, "cold.auto")

    edit = f("edit.attribute")
    r = _ratio(edit, cold_wall)
    budget = None if noop is None else noop + 1.0
    within = None if (edit is None or budget is None) else edit <= budget
    add(
        ISSUE_15,
        "one edited attribute file / cold build",
        r,
        f"{_pct(r)} ({fmt_s(edit)} vs cold build {fmt_s(cold_wall)}, both whole process, "
        f"executor auto{': ' + where if where else ''}); {fmt_s(edit)} vs no-op + 1 s = "
        f"{fmt_s(budget)}",
        "≤ 3 %, and ≤ no-op + 1 s",
        None if within is None else (r is not None and r <= 0.03 and within),
    )

    ray_imported = f("noop", "ray_imported")
    rehashed = f("noop", "hashed_files")
    r = _ratio(noop, ninja)
    add(
        ISSUE_15,
        "no-op / ninja no-op over the same files (and Ray not imported)",
        r,
        f"{_x(r)} ({fmt_s(noop)} vs {fmt_s(ninja)}, whole processes); Ray imported: "
        f"{'n/a' if ray_imported is None else ('yes' if ray_imported else 'no')}"
        + ("" if rehashed is None else f"; files re-hashed: {rehashed}"),
        "≤ 1.5x, Ray not imported",
        r is not None and r <= 1.5 and ray_imported is False,
    )

    validate = f("validate.command")
    floor2 = f("floor.read_parse.p2")
    r = _ratio(validate, floor2)
    add(
        ISSUE_15,
        "cold `orchestrate validate` / read+parse floor on 2 processes",
        r,
        f"{_x(r)} ({fmt_s(validate)} whole process, "
        f"{_units_where(figures, 'validate.command') or 'executor auto'}, vs {fmt_s(floor2)})",
        "≤ 3x",
        r is not None and r <= 3,
    )

    per_rule = f("validate.per_rule")
    extrapolated = f("validate.per_rule", "extrapolated")
    r = _ratio(per_rule, validate)
    add(
        ISSUE_15,
        "cold `orchestrate validate` vs the parse-per-rule checker",
        r,
        f"{_faster(r)} ({fmt_s(validate)} vs {fmt_s(per_rule)} in one process"
        + (", per-rule extrapolated from a sample" if extrapolated else "")
        + ")",
        "≥ 5x faster",
        r is not None and r >= 5,
    )

    r = _ratio(cold_engine, floor2)
    add(
        ISSUE_15,
        "cold build / walk+read+parse floor on 2 processes",
        r,
        f"{_x(r)} (`orchestrate run`, executor auto{': ' + where if where else ''}: "
        f"{fmt_s(cold_engine)} engine seconds, {fmt_s(cold_wall)} whole process; floor on 2 "
        f"processes {fmt_s(floor2)})",
        "≤ 4x",
        r is not None and r <= 4,
    )

    private = f("cold.ray2", "driver_peak_private")
    driver = f("cold.ray2", "driver_peak_rss")
    add(
        ISSUE_15,
        "driver peak RSS less shared pages, cold Ray build (2 workers)",
        private or None,
        _mb(private) + (f" (RSS with shared pages: {_mb(driver)})" if driver else ""),
        "≤ 600 MB",
        private is not None and private <= 600 * MB,
    )

    small, large = f("pack.explicit.500"), f("pack.explicit.5000")
    r = _ratio(large, small)
    paths = f("pack.explicit.5000", "paths")
    asked = f("pack.explicit.5000", "asked")
    short = (
        f"; the project cooks {paths:,} assets: all of them listed"
        if paths and asked and paths < asked
        else ""
    )
    add(
        ISSUE_15,
        "`pack` with 5,000 explicit include paths / with 500",
        r,
        f"{_x(r)} ({fmt_s(large)} for {paths or 0:,} paths in "
        f"{f('pack.explicit.5000', 'rules') or 0} rules vs {fmt_s(small)}{short})",
        "≤ 12x",
        r is not None and r <= 12,
    )

    for name, how in (
        ("fresh.disk", "the shared cache folder, same path"),
        ("fresh.disk_elsewhere", "the shared cache folder, another path"),
        ("fresh.http", "the cache server (HTTP), same path"),
    ):
        fresh = f(name)
        r = _ratio(fresh, noop)
        add(
            ISSUE_28,
            f"fresh checkout, warm cache: {how} / no-op",
            r,
            f"{_x(r)} ({fmt_s(fresh)} vs {fmt_s(noop)}, whole processes)",
            "≤ 3x",
            r is not None and r <= 3,
        )
    share = f("scale.ray2", "driver_share")
    add(
        ISSUE_28,
        "driver CPU / all CPU, cold Ray build (2 workers)",
        share,
        _pct(share) + _ceilings(figures),
        "≤ 15 %",
        share is not None and share <= 0.15,
    )
    one, two = f("scale.ray1"), f("scale.ray2")
    r = _ratio(two, one)
    add(
        ISSUE_28,
        "cold Ray build, 2 workers / 1 worker",
        r,
        f"{_x(r)} ({fmt_s(two)} vs {fmt_s(one)}, engine seconds)",
        "≤ 0.6",
        r is not None and r <= 0.6,
    )

    v1, v2 = f("validate.ray1"), f("validate.ray2")
    r = _ratio(v1, v2)
    add(
        EARLIER,
        "validate stage speed-up, Ray 2 workers / 1 worker",
        r,
        f"{_x(r)} ({fmt_s(v1)} → {fmt_s(v2)})",
        "≥ 1.8x",
        r is not None and r >= 1.8,
    )
    r = _ratio(per_rule, v2)
    add(
        EARLIER,
        "validate stage alone (Ray, 2 workers) vs parse-per-rule",
        r,
        f"{_faster(r)} ({fmt_s(v2)} vs {fmt_s(per_rule)}"
        + (", per-rule extrapolated from a sample" if extrapolated else "")
        + ")",
        "≥ 20x faster",
        r is not None and r >= 20,
    )

    opened = f("report.open")
    assets = f("report.page_bytes", "assets")
    add(
        EARLIER,
        "build report: opens in a browser (navigation to drawn)",
        opened,
        f"{fmt_s(opened)}" + (f" ({assets:,} assets)" if assets else ""),
        "< 3 s",
        opened is not None and opened < 3,
    )
    page = f("report.page_bytes")
    add(
        EARLIER,
        "build report: page size",
        page,
        "n/a" if page is None else f"{page / MB:.2f} MB",
        "≤ 5 MB",
        page is not None and page <= 5 * MB,
    )
    latency, idle = f("watch.save_to_manifest"), f("watch.idle_cpu")
    add(
        ISSUE_29,
        "one attribute file with `orchestrate watch`: save → manifest published",
        latency,
        f"{fmt_s(latency)} (from the save until manifest.json changed, polled every 2 ms)",
        "≤ 0.5 s",
        latency is not None and latency <= 0.5,
    )
    for kind, what in (
        ("rename", "rename one Item"),
        ("add_asset", "add one asset"),
        ("delete_asset", "delete one asset"),
    ):
        latency = f(f"watch.{kind}_to_manifest")
        add(
            ISSUE_29,
            f"{what} with `orchestrate watch`: save → manifest published",
            latency,
            f"{fmt_s(latency)} (from the edit until manifest.json changed)",
            "≤ 1 s",
            latency is not None and latency <= 1.0,
        )
    seconds = f("watch.idle_cpu", "seconds")
    add(
        ISSUE_29,
        "`orchestrate watch` idle: CPU with nothing changing",
        idle,
        f"{_pct(idle)} of a core over {seconds or '?'} s",
        "< 1 % of a core",
        idle is not None and idle < 0.01,
    )
    return rows


def _ceilings(figures: dict) -> str:
    """The speed-ups over one process the driver's share allows (farm.amdahl)."""
    workers = _f(figures, "scale.ceiling", "workers") or {}
    if not workers:
        return ""
    shown = ", ".join(f"{_x(v)} with {n} workers" for n, v in workers.items())
    return f"; it bounds the build at {shown}"


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
    cold_auto, cold_ray = f("cold.auto"), f("cold.ray2")
    cold_wall = f("cold.auto", "wall_median")
    where = _units_where(figures, "cold.auto")
    add(
        "cold build, executor auto (`orchestrate run`"
        + (f"; {where}" if where else "")
        + "), engine seconds",
        cold_auto,
        _ratio(cold_auto, floor2),
        "read+parse floor, 2 processes",
    )
    add("", "", _ratio(cold_auto, floor1), "read+parse floor, 1 process")
    add("cold build, executor auto, whole process", cold_wall)
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
        ("edit.add_asset", "one asset added (its folder and its Item)"),
        ("edit.delete_asset", "one asset deleted (its folder and its Item)"),
        ("edit.cosmetic", "cosmetic XML edit (re-indent a texture.xml)"),
        ("edit.level", "one Entity moved in a used level (its Position)"),
    ):
        value = f(name)
        if value is None:
            continue
        rows.append(
            (
                label + ", whole process",
                fmt_s(value),
                _pct(_ratio(value, cold_wall)),
                "cold build, executor auto, whole process",
            )
        )
        over = f(name, "over_noop")
        if over is not None:
            rows.append(("  over the no-op measured beside it", f"+ {fmt_s(over)}", "", ""))
        built = f(name, "built") or {}
        engine = f(name, "engine_median")
        rows.append(
            (
                "  engine seconds; units rebuilt",
                fmt_s(engine),
                _pct(_ratio(engine, cold_auto)),
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
    validate = f("validate.command")
    add(
        "cold `orchestrate validate` (executor auto), whole process",
        validate,
        _ratio(validate, floor2),
        "read+parse floor, 2 processes",
    )
    stages = f("validate.command", "stages") or {}
    add(
        "  its validate stage; its engine seconds",
        "n/a"
        if validate is None
        else f"{fmt_s(stages.get('validate'))}; {fmt_s(f('validate.command', 'engine_median'))}",
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
    add("", "", _ratio(per, validate), "slower than cold `orchestrate validate`")
    add("", "", _ratio(per, v2), "slower than the validate stage, Ray 2 workers")
    small = f("pack.explicit.500")
    for count in (500, 5000):
        name = f"pack.explicit.{count}"
        value = f(name)
        paths, rules = f(name, "paths"), f(name, "rules")
        cooked = f(name, "cooked")
        add(
            f"pack, {paths or count:,} explicit include paths"
            + (f" ({rules} rules" if rules else "")
            + (f", {cooked:,} cooked assets" if rules and cooked else "")
            + (")" if rules else ""),
            value,
            None if count == 500 else _ratio(value, small),
            "" if count == 500 else "pack with 500 explicit paths",
        )
    payload = f("output.payloads", "bytes")
    zstd = f("output.zstd")
    for name, label in (("cold.auto", "executor auto"), ("cold.ray2", "Ray 2 workers")):
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
    for name, label in (("cold.ray2", "Ray 2 workers"), ("cold.auto", "executor auto")):
        # "all" (driver and workers together) comes from the per-stage peaks, when the engine
        # records them (StageReport.peak_rss).
        total = f(name, "peak_rss_total")
        rows.append(
            (
                f"peak RSS, cold build {label}: driver / workers" + (" / all" if total else ""),
                f"{_mb(f(name, 'driver_peak_rss'))} / {_mb(f(name, 'workers_peak_rss'))}"
                + (f" / {_mb(total)}" if total else ""),
                "",
                "sampled during the run (ResourceSampler); each its own peak",
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
    for name in ("fresh.disk", "fresh.disk_elsewhere", "fresh.http"):
        add(
            f"fresh checkout, warm cache ({f(name, 'what') or name}), whole process",
            f(name),
            _ratio(f(name), f("noop")),
            "no-op rerun",
        )
    for name, label in (
        ("scale.local1", "local (the driver alone)"),
        ("scale.local2", "auto (below 4 cores: the driver and forked helpers)"),
    ):
        add(
            f"cold build, executor {label}, engine seconds",
            f(name),
            _ratio(f(name), f("scale.local1")),
            "executor local",
        )
    for name, label in (
        ("scale.ray1", "Ray 1 worker"),
        ("scale.ray2", "Ray 2 workers"),
        ("scale.two_nodes", "two-node cluster (`ray start` head + node, 1 CPU each)"),
    ):
        share = f(name, "driver_share")
        add(
            f"cold build, {label}, engine seconds",
            f(name),
            _ratio(f(name), f("scale.ray1")),
            "Ray 1 worker" + ("" if share is None else f"; driver's CPU share {_pct(share)}"),
        )
    for workers, speedup in (_f(figures, "scale.ceiling", "workers") or {}).items():
        add(
            f"ceiling the driver's share implies, {workers} workers (Amdahl)",
            f"{_x(speedup)}",
            None,
            "speed-up over one process: 1 / (s + (1 - s) / n)",
            ratio_text="",
        )
    return rows


def stage_table(figures: dict) -> list[str]:
    auto = _f(figures, "cold.auto", "stages") or {}
    ray = _f(figures, "cold.ray2", "stages") or {}
    names = list(dict.fromkeys([*auto, *ray]))
    if not names:
        return []
    lines = [
        "| stage | executor auto | Ray, 2 workers | auto / Ray |",
        "|---|---:|---:|---:|",
    ]
    scan_auto, scan_ray = (
        _f(figures, "cold.auto", "scan_median"),
        _f(figures, "cold.ray2", "scan_median"),
    )
    rows = [("scan (file table, before the stages)", scan_auto, scan_ray)]
    rows += [(name, auto.get(name), ray.get(name)) for name in names]
    for name, a, b in rows:
        lines.append(f"| {name} | {fmt_s(a)} | {fmt_s(b)} | {_x(_ratio(a, b))} |")
    total_auto = sum(a for _, a, _ in rows if a is not None) if auto else None
    total_ray = sum(b for _, _, b in rows if b is not None) if ray else None
    lines.append(f"| **total** | {fmt_s(total_auto)} | {fmt_s(total_ray)} | |")
    return lines


def targets_markdown(figures: dict) -> list[str]:
    """Issue 15's targets, then the earlier ones still measured (each table only when it has
    rows)."""
    out = []
    titles = {
        ISSUE_15: "Targets (issue 15)",
        ISSUE_28: "Targets (issue 28: the farm)",
        ISSUE_29: "Targets (issue 29: the developer loop)",
        EARLIER: "Earlier targets, still measured",
    }
    rows = targets(figures)
    for group, title in titles.items():
        mine = [row for row in rows if row["group"] == group]
        if not mine:
            continue
        out += ["", f"### {title}", "", "| target | measured | limit | |", "|---|---|---|---|"]
        for row in mine:
            verdict = {True: "**met**", False: "**missed**", None: "not measured"}[row["met"]]
            out.append(f"| {row['target']} | {row['shown']} | {row['limit']} | {verdict} |")
    return out


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
    out += targets_markdown(figures)
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
python benchmarks/run_all.py --sizes 10000                      # quick mode (~6 minutes)
```

How the figures are taken:

- Every `orchestrate` run is a fresh process (`benchmarks/runner.py` runs the console script's
  `main` and `leave`, and keeps `run_build`'s result). *Engine seconds* are `run_build`'s, with
  Ray's startup (`RunResult.ray_startup`, reported apart) taken out; *whole process* is what a
  user waits for (interpreter start, imports, reports, exit handlers included). The suite
  byte-compiles `orchestrator/` and `stages/` first, as `pip install .` does
  (`common.compile_bytecode`): the suite's editable install under PYTHONDONTWRITEBYTECODE
  compiled every imported module again in every run.
- *The cold build* is the one users get: `orchestrate run build.yaml` with the build file's
  executor `auto` (on a 2-core machine `auto` runs the units in the driver:
  `orchestrator/executors/pool.py`), from an empty cache and output folder, on a copy of the
  generated build file (`benchmarks/work/.../bench-*.yaml`) with `executor.shared_paths: true`
  (see the note below). The cold build on Ray with 2 workers is measured beside it (its driver's
  memory is a target). Rebuilds (no-op, edits) run as a user would, `orchestrate run build.yaml`,
  on the warm cache of the last cold build; each edit is undone after its run. The edit target
  compares whole processes (the edit against the cold build and against the no-op).
- Floors (shared/spec/pipeline.md, "Benchmark terms"): walk + stat every file; walk + read every
  file once + lxml-parse every XML file once, on 1 and on 2 processes (a fork pool; its start is
  counted); ninja's no-op over a `build.ninja` with one edge per asset (a resource folder's files;
  each repository, world and level) and one stamp per edge.
- Validation: cold `orchestrate validate build.yaml --format json --output FILE` as a new user
  runs it (whole process, empty cache, executor `auto`; its validate stage's seconds are shown
  too), and the `validate` stage's own seconds from `--stages validate` cold runs on Ray with 1
  and 2 workers. The ArtEase 1.x baseline `validate_per_rule` (one parse per rule and file) and
  the engine's `validate_project` run in one process on the same files.
- Packing (`benchmarks/layouts.py`): `pack` in one process on the project's cook list, with a
  layout that lists 500 or 5,000 cooked assets by literal path (a resource's virtual path, a
  map's own path), spread evenly over the assets sorted by path, in rules of 250 paths each (one
  bundle per rule, as Unity Addressables groups list their assets); the cook list is computed
  with that layout, as a build with it would cook. Medians of at least three runs.
- Output throughput: MB = uncompressed cooked payload bytes of the bundles; write+archive+hash
  seconds come from the cold builds; `zstd -3 -T1` compresses the same payloads, concatenated per
  bundle, in one process.
- A fresh checkout with a warm cache (`benchmarks/farm.py`, section `fresh`): a first agent
  builds the commit cold (untimed); each timed agent has no build state of its own (a new
  output folder: a new build state) and builds the same files from what the first one left:
  through the cache folder they share, checked out at the same path (a farm's agents use one
  workspace path) or at another path (the project's files hard-linked under
  `runs/fresh-other-N/checkout`); and through a cache server (nginx with its WebDAV methods on
  a loopback port, started as `tests/remotekit.py` does, entries signed with a farm key) with
  an empty cache folder of its own. Each is judged against the no-op rerun.
- Scaling (section `scaling`): cold builds on a local Ray with 1 and 2 workers, with the CPU
  seconds of the driver and of every process of the build (the driver's descendants: Ray's
  head processes and workers, custom-code workers) sampled with psutil every 0.2 s while
  `run_build` runs (`benchmarks/runner.py --cpu`). The driver's share `s` bounds the speed-up
  over one process at `1 / (s + (1 - s) / n)` with `n` workers (Amdahl), shown for 16 and 64.
  Then a cold build on a two-node cluster on this machine: `ray start --head` and `ray start
  --address` on loopback, one CPU each, as docs/cluster.md's steps say (`tests/raystart.py`),
  the build file's `executor.address` naming the head; its CPU counts the nodes' processes too.
  On a 2-core machine the driver and two workers share the cores: the 2-worker figure shows
  the machine's bound as much as the engine's; the driver's share is what carries to a farm.
- Profiles (py-spy) of the cold build, the no-op, the one-edit run and a fresh checkout at
  another path: `python benchmarks/profile_runs.py --size N` writes
  `benchmarks/results/profiles/<date>-<size>-<run>.txt` (top functions, time by stage).
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
