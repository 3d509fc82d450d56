"""The build report at scale: a generated project built with the local executor, then the size
of reports/index.html, the renderer's seconds (content made afresh; content kept from the last
run) and a headless Chromium opening the page (navigation start until drawn), clicking the
largest bundle and searching every asset.

    python benchmarks/bench_report.py [--assets 10000] [--seed 1] [--repeat 3] [--json]
"""

import sys

import figures as F
from _script import run_sections

if __name__ == "__main__":
    sys.exit(
        run_sections(
            __doc__.split("\n\n")[0], [F.report_page], needs_tools=("chromium", "chromedriver")
        )
    )
