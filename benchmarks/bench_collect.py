"""collect + dependency alone (`--stages dependency`): cold with the local executor and with 1 and
2 Ray workers, the no-op, one edited attribute file, against the floor of reading and
lxml-parsing every XML file once in one process.

    python benchmarks/bench_collect.py [--assets 10000] [--seed 1] [--repeat 3] [--json]
"""

import sys

import figures as F
from _script import run_sections

if __name__ == "__main__":
    sys.exit(run_sections(__doc__.split("\n\n")[0], [F.collect]))
