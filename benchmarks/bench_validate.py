"""Validation: cold `orchestrate validate` as a new user runs it (whole process, empty cache) and
the `validate` stage's own seconds (`--stages validate`, after collect and dependency) with 1 and
2 Ray workers, against the ArtEase 1.x way (`validate_per_rule`: one parse per rule and file),
the engine's `validate_project` in one process on the same files, and the floors of parsing
every XML file once (1 process) and of reading every file and parsing the XML (2 processes).
Above 10,000 resources the in-process baselines run on a stratified sample (every
repository/world/level file, a fraction of the others) and are extrapolated — labelled so in the
output.

    python benchmarks/bench_validate.py [--assets 10000] [--repeat 3] [--per-rule-fraction F]
"""

import sys

import figures as F
from _script import run_sections

if __name__ == "__main__":
    sys.exit(run_sections(__doc__.split("\n\n")[0], [F.validation]))
