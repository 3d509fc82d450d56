"""Output throughput: the write + archive + hash stages of cold builds (local; Ray with 2
workers) in MB/s of uncompressed cooked payload, against the `zstd -3 -T1` command-line tool
compressing the same payloads (concatenated per bundle).

    python benchmarks/bench_output.py [--assets 10000] [--seed 1] [--repeat 3] [--json]
"""

import sys

import figures as F
from _script import run_sections

if __name__ == "__main__":
    sys.exit(run_sections(__doc__.split("\n\n")[0], [F.output], needs_tools=("zstd",)))
