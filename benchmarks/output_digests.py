"""The sha256 of every file a build publishes, for projects and executors: what a refactor that
must not change behaviour is held to ("outputs byte-identical before and after").

    python benchmarks/output_digests.py --out before.json            # on the old commit
    python benchmarks/output_digests.py --out after.json             # on the new one
    python benchmarks/output_digests.py --compare before.json after.json

Projects: the demo (`../shared/examples/demo`), a generated 3,000-asset Messiah project, and the
real Unity and Cocos projects of `../shared/realdata` (those needing `../shared` are left out
when it is absent, and say so). Each is built cold, once per executor (`local`, and `ray` with
2 workers), into its own cache and output folder. Files that record the run itself (timings,
dates: the run record and the HTML page's data) are left out; everything else published is
compared, reports included.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from common import orchestrate_command

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
EXECUTORS = (("local", []), ("ray", ["--workers", "2"]))
#: Files that describe the run (when, how long), not the build's content.
RUN_RECORDS = ("reports/run.json", "reports/run.previous.json", "reports/index.html")
RUN_RECORD_SUFFIXES = (".cache",)


def published_digests(out: Path) -> dict[str, str]:
    found = {}
    for path in sorted(out.rglob("*")):
        relpath = path.relative_to(out).as_posix()
        if not path.is_file() or relpath in RUN_RECORDS or relpath.startswith("reports/."):
            continue
        if relpath.endswith(RUN_RECORD_SUFFIXES) or relpath == "reports/build-state.json":
            continue
        found[relpath] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def orchestrate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*orchestrate_command(), *args],
        capture_output=True,
        text=True,
        check=False,
    )


def demo(work: Path) -> Path:
    project = work / "demo"
    shutil.copytree(SHARED / "examples" / "demo", project)
    return project / "build.yaml"


def generated(work: Path) -> Path:
    project = work / "generated"
    proc = orchestrate("generate", str(project), "--assets", "3000", "--seed", "1")
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    return project / "build.yaml"


def _real(work: Path, name: str, settings: dict) -> Path:
    folder = work / name
    shutil.copytree(SHARED / "realdata" / name, folder / "project")
    build = folder / "build.yaml"
    document = {"project": "project", "output": "out", "cache": "cache", **settings}
    build.write_text(yaml.safe_dump(document, allow_unicode=True), encoding="utf-8")
    return build


def unity(work: Path) -> Path:
    return _real(work, "unity-slg-warriors", {"source": "unity"})


def cocos(work: Path) -> Path:
    configs = SHARED / "realdata/cocos-room-of-death/build/web-mobile/assets/main/config.json"
    scenes = sorted(json.loads(configs.read_text(encoding="utf-8"))["scenes"])
    settings = {
        "source": "cocos",
        "cocos": {"engine": str(SHARED / "realdata" / "cocos-engine-3.8.5"), "scenes": scenes},
        "bundles": {"from_meta": True, "shared_dependencies": "priority"},
    }
    return _real(work, "cocos-room-of-death", settings)


PROJECTS = {"demo": demo, "generated-3000": generated, "unity": unity, "cocos": cocos}
NEEDS_SHARED = {"demo", "unity", "cocos"}


def collect(projects: list[str]) -> dict:
    results: dict[str, dict] = {}
    for name in projects:
        if name in NEEDS_SHARED and not (SHARED / "spec").is_dir():
            print(f"{name}: left out, ../shared is absent ({SHARED})", file=sys.stderr)
            continue
        for executor, extra in EXECUTORS:
            with tempfile.TemporaryDirectory(prefix="orchestrate-digests-") as tmp:
                build = PROJECTS[name](Path(tmp))
                proc = orchestrate("run", str(build), "--executor", executor, *extra)
                if proc.returncode not in (0, 1):
                    raise SystemExit(f"{name} on {executor}: exit {proc.returncode}\n{proc.stderr}")
                document = yaml.safe_load(build.read_text(encoding="utf-8"))
                out = (build.parent / document.get("output", "out")).resolve()
                results[f"{name}/{executor}"] = {
                    "exit": proc.returncode,
                    "files": published_digests(out),
                }
                print(f"{name}/{executor}: {len(results[f'{name}/{executor}']['files'])} files")
    return results


def compare(before: dict, after: dict) -> int:
    differences = 0
    for run in sorted(set(before) | set(after)):
        old, new = before.get(run), after.get(run)
        if old is None or new is None:
            print(f"{run}: only in {'after' if old is None else 'before'}")
            differences += 1
            continue
        changed = sorted(
            path
            for path in set(old["files"]) | set(new["files"])
            if old["files"].get(path) != new["files"].get(path)
        )
        if old["exit"] != new["exit"]:
            print(f"{run}: exit {old['exit']} → {new['exit']}")
            differences += 1
        for path in changed:
            print(f"{run}: {path} differs")
        differences += len(changed)
        if not changed and old["exit"] == new["exit"]:
            print(f"{run}: {len(new['files'])} files identical")
    return 1 if differences else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the digests here (JSON)")
    parser.add_argument("--projects", default=",".join(PROJECTS), help="comma-separated")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        before, after = (json.loads(p.read_text(encoding="utf-8")) for p in args.compare)
        return compare(before, after)
    results = collect([name for name in args.projects.split(",") if name])
    text = json.dumps(results, indent=1, sort_keys=True) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
