"""The engine end to end: a generated project, cold builds (the one users get, `orchestrate run`
with executor `auto`; Ray with 2 workers, startup reported apart), the no-op rerun as a user runs
it (fresh process; Ray must not be imported), and the floors it is judged against (stat of every
input file, ninja's no-op, read + parse).

    python benchmarks/bench_engine.py [--assets 10000] [--seed 1] [--repeat 3] [--json]

Part of the suite (benchmarks/run_all.py), which also records the results and the docs table.
"""

import sys

import figures as F
from _script import run_sections

if __name__ == "__main__":
    sys.exit(
        run_sections(
            __doc__.split("\n\n")[0],
            [lambda p, r, o: F.floors(p, r, o, which=("stat", "p1", "p2")), F.cold_builds, F.noop],
            needs_tools=("ninja",),
        )
    )
