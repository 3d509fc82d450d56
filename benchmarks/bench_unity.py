"""Benchmark the Unity source: a cold collect, and the reference scanner against PyYAML.

    python benchmarks/bench_unity.py [PROJECT] [--repeat N] [--json]

"Cold" collect runs in a fresh interpreter each time (no module, parse or stat state carried
over; the OS page cache stays warm, which needs root to drop). The scanner comparison reads every
text-serialized native asset once, then times extracting the references from the same bytes with
the scanner, with PyYAML on libyaml (CSafeLoader) and with pure-Python PyYAML (SafeLoader).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stages.sources import unity_yaml  # noqa: E402
from stages.sources.unity import walk_project  # noqa: E402
from stages.sources.unity_types import is_native  # noqa: E402

DEFAULT_PROJECT = ROOT.parent / "shared" / "realdata" / "unity-slg-warriors"

_COLD_COLLECT = """
import sys, time
sys.path.insert(0, {root!r})
start = time.perf_counter()
from stages.sources.unity import collect_unity
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
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
        imported, collected, assets = out.stdout.split()
        imports.append(float(imported))
        collects.append(float(collected))
    return {"assets": int(assets), "import_s": statistics.median(imports),
            "collect_s_min": min(collects), "collect_s_median": statistics.median(collects)}


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
        "pyyaml_libyaml": lambda d: unity_yaml.references_in_documents(unity_yaml.load_documents(d)),
        "pyyaml_pure": lambda d: unity_yaml.references_in_documents(
            unity_yaml.load_documents(d, pure_python=True)),
    }
    timings, counts = {}, {}
    for name, extract in methods.items():
        best = float("inf")
        for _ in range(repeat if name != "pyyaml_pure" else 1):  # pure Python is slow: once
            start = time.perf_counter()
            counts[name] = sum(len(extract(data)) for data in files.values())
            best = min(best, time.perf_counter() - start)
        timings[name] = best
    return {"files": len(files), "bytes": sum(map(len, files.values())),
            "references": counts, "seconds": timings,
            "pyyaml_libyaml_over_scanner": timings["pyyaml_libyaml"] / timings["scanner"],
            "pyyaml_pure_over_scanner": timings["pyyaml_pure"] / timings["scanner"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("project", nargs="?", default=str(DEFAULT_PROJECT))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()
    project = Path(args.project)
    report = {"project": project.name, "cold_collect": cold_collect(project, args.repeat),
              "extract": time_extractors(text_assets(project), args.repeat)}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    cold, extract = report["cold_collect"], report["extract"]
    print(f"project {project.name}: {cold['assets']} assets")
    print(f"cold collect (fresh interpreter, x{args.repeat}): min {cold['collect_s_min'] * 1000:.1f} ms, "
          f"median {cold['collect_s_median'] * 1000:.1f} ms (+ import {cold['import_s'] * 1000:.0f} ms)")
    print(f"reference extraction over {extract['files']} files, {extract['bytes'] / 1e6:.2f} MB:")
    for name, seconds in extract["seconds"].items():
        print(f"  {name:<15} {seconds * 1000:9.1f} ms  {extract['references'][name]} references")
    print(f"  PyYAML/libyaml is {extract['pyyaml_libyaml_over_scanner']:.0f}x the scanner's time, "
          f"pure-Python PyYAML {extract['pyyaml_pure_over_scanner']:.0f}x")


if __name__ == "__main__":
    main()
