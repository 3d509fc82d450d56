"""Packing with explicit layouts: `pack` in one process on a generated project's cooked assets,
with layouts listing 500 and 5,000 asset paths (rules of 250 literal paths each, as Unity
Addressables groups list their assets), medians of --repeat runs (at least three).

    python benchmarks/bench_pack.py [--assets 10000] [--seed 1] [--repeat 3] [--json]
"""

import sys

import figures as F
from _script import run_sections

if __name__ == "__main__":
    sys.exit(run_sections(__doc__.split("\n\n")[0], [F.packing]))
