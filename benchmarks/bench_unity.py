"""Benchmark the Unity source: a cold collect, collect+dependency through the engine, and the
reference scanner against PyYAML.

    python benchmarks/bench_unity.py [PROJECT] [--repeat N] [--json]

"Cold" collect runs in a fresh interpreter each time (no module, parse or stat state carried
over; the OS page cache stays warm, which needs root to drop). The engine runs the stages
`collect` and `dependency` (`run_build(stages=["dependency"])`, local executor) on a temporary
copy of the project, each run in a fresh interpreter: cold with an empty cache, no-op with the
cache of a previous run and nothing changed; the time is `run_build`'s, imports excluded. The
scanner comparison reads every text-serialized native asset once, then times extracting the
references from the same bytes with the scanner, with PyYAML on libyaml (CSafeLoader) and with
pure-Python PyYAML (SafeLoader).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stages.sources.unity import documents as unity_yaml  # noqa: E402
from stages.sources.unity.classes import is_native  # noqa: E402
from stages.sources.unity.reader import walk_project  # noqa: E402

DEFAULT_PROJECT = ROOT.parent / "shared" / "realdata" / "unity-slg-warriors"

_COLD_COLLECT = """
import sys, time
sys.path.insert(0, {root!r})
start = time.perf_counter()
from stages.sources.unity.reader import collect_unity
imported = time.perf_counter()
result = collect_unity({project!r})
done = time.perf_counter()
print(imported - start, done - imported, len(result.assets))
"""


def cold_collect(project: Path, repeat: int) -> dict:
    """Seconds to import the source and to collect the project, each in a new interpreter."""
    imports, collects, assets = [], [], 0
    for _ in range(repeat):
        code = _COLD_COLLECT.format(root=str(ROOT), project=str(project))
        out = subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True
        )
        imported, collected, assets = out.stdout.split()
        imports.append(float(imported))
        collects.append(float(collected))
    return {
        "assets": int(assets),
        "import_s": statistics.median(imports),
        "collect_s_min": min(collects),
        "collect_s_median": statistics.median(collects),
    }


_ENGINE_RUN = """
import json, logging, os, sys, time
sys.path.insert(0, {root!r})
import structlog
from orchestrator.core.config import load_build
from orchestrator.core.scheduler import RunOptions, run_build
build = load_build({build!r})
quiet = structlog.wrap_logger(structlog.PrintLogger(open(os.devnull, "w")),
                              wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
start = time.perf_counter()
result = run_build(build, RunOptions(executor="local", stages=["dependency"], progress=False), quiet)
seconds = time.perf_counter() - start
units = {{r.name: [r.units, r.built] for r in result.reports}}
print(json.dumps([seconds, units, len(result.outputs["cooklist"].cooked)]))
"""

ENGINE_BUILD = """project: project
source: unity
output: out
cache: cache
executor:
  kind: local
"""


def engine_runs(project: Path, repeat: int) -> dict:
    """Median seconds of collect+dependency through the engine: cold (empty cache) and no-op."""
    with tempfile.TemporaryDirectory(prefix="bench-unity-") as tmp:
        work = Path(tmp)
        shutil.copytree(project, work / "project")
        build = work / "build.yaml"
        build.write_text(ENGINE_BUILD, encoding="utf-8")

        def one_run() -> tuple[float, dict, int]:
            code = _ENGINE_RUN.format(root=str(ROOT), build=str(build))
            out = subprocess.run(
                [sys.executable, "-c", code], check=True, capture_output=True, text=True
            )
            seconds, units, cooked = json.loads(out.stdout.strip().splitlines()[-1])
            return seconds, units, cooked

        cold, noop = [], []
        for _ in range(repeat):
            shutil.rmtree(work / "cache", ignore_errors=True)
            seconds, cold_units, cooked = one_run()
            cold.append(seconds)
        for _ in range(repeat):
            seconds, noop_units, _cooked = one_run()
            noop.append(seconds)
    return {
        "cooked": cooked,
        "cold_s_median": statistics.median(cold),
        "noop_s_median": statistics.median(noop),
        "cold_units": cold_units,
        "noop_units": noop_units,
    }


def text_assets(project: Path) -> dict[str, bytes]:
    """Every text-serialized native asset of the project (StreamingAssets is build output)."""
    found = {}
    for entry in walk_project(str(project)):
        if not entry.path.startswith(("Assets/", "Packages/")) or not is_native(entry.path):
            continue
        if entry.path.startswith("Assets/StreamingAssets/"):
            continue
        data = (project / entry.path).read_bytes()
        if unity_yaml.is_text_serialized(data):
            found[entry.path] = data
    return found


def time_extractors(files: dict[str, bytes], repeat: int) -> dict:
    """Best-of-`repeat` seconds to extract every reference of every file, per method."""
    methods = {
        "scanner": lambda d: unity_yaml.scan_references(d),
        "pyyaml_libyaml": lambda d: unity_yaml.references_in_documents(
            unity_yaml.load_documents(d)
        ),
        "pyyaml_pure": lambda d: unity_yaml.references_in_documents(
            unity_yaml.load_documents(d, pure_python=True)
        ),
    }
    timings, counts = {}, {}
    for name, extract in methods.items():
        best = float("inf")
        for _ in range(repeat if name != "pyyaml_pure" else 1):  # pure Python is slow: once
            start = time.perf_counter()
            counts[name] = sum(len(extract(data)) for data in files.values())
            best = min(best, time.perf_counter() - start)
        timings[name] = best
    return {
        "files": len(files),
        "bytes": sum(map(len, files.values())),
        "references": counts,
        "seconds": timings,
        "pyyaml_libyaml_over_scanner": timings["pyyaml_libyaml"] / timings["scanner"],
        "pyyaml_pure_over_scanner": timings["pyyaml_pure"] / timings["scanner"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("project", nargs="?", default=str(DEFAULT_PROJECT))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()
    project = Path(args.project)
    report = {
        "project": project.name,
        "cold_collect": cold_collect(project, args.repeat),
        "engine": engine_runs(project, args.repeat),
        "extract": time_extractors(text_assets(project), args.repeat),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    cold, engine, extract = report["cold_collect"], report["engine"], report["extract"]
    print(f"project {project.name}: {cold['assets']} assets")
    print(
        f"cold collect (fresh interpreter, x{args.repeat}): min {cold['collect_s_min'] * 1000:.1f} ms, "
        f"median {cold['collect_s_median'] * 1000:.1f} ms (+ import {cold['import_s'] * 1000:.0f} ms)"
    )
    print(
        f"engine collect+dependency (local executor, median of {args.repeat}, "
        f"{engine['cooked']} cooked):"
    )
    for kind in ("cold", "noop"):
        units = ", ".join(
            f"{stage} {built}/{total} units run"
            for stage, (total, built) in engine[f"{kind}_units"].items()
        )
        print(f"  {kind:<5} {engine[f'{kind}_s_median'] * 1000:9.1f} ms  ({units})")
    print(f"reference extraction over {extract['files']} files, {extract['bytes'] / 1e6:.2f} MB:")
    for name, seconds in extract["seconds"].items():
        print(f"  {name:<15} {seconds * 1000:9.1f} ms  {extract['references'][name]} references")
    print(
        f"  PyYAML/libyaml is {extract['pyyaml_libyaml_over_scanner']:.0f}x the scanner's time, "
        f"pure-Python PyYAML {extract['pyyaml_pure_over_scanner']:.0f}x"
    )


if __name__ == "__main__":
    main()
