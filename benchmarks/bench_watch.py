"""`orchestrate watch` (issue 29): started on the warm build, the seconds from an edit until the
manifest in the output folder changed, for one texture's Width saved, one Item renamed, one asset
added and one deleted (each repeat a fresh edit), then its CPU over a minute with nothing
changing, as a share of one core.

    python benchmarks/bench_watch.py [--assets 10000] [--seed 1] [--repeat 3] [--json]

Part of the suite (benchmarks/run_all.py, section `watch`).
"""

import sys

import figures as F
from _script import run_sections

if __name__ == "__main__":
    sys.exit(run_sections(__doc__.split("\n\n")[0], [F.watching]))
