"""The build report as a person meets it, measured: the page's size, how long the renderer takes,
and how long a headless Chromium takes to open it (navigation start until the page's script has
drawn it: its `report-ready` performance mark) and to answer a click and a search.

Needs Debian's `chromium` and `chromium-driver` (installed by `common.ensure_tools` when run as
root) and the `selenium` package (the test extras).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from common import PY, ROOT, BenchError, median

PAGE = Path("reports") / "index.html"
CONTENT_CACHE = Path("reports") / "report-content.cache"

RENDER_SNIPPET = """
import json, sys, time
from pathlib import Path
from orchestrator.shell.runrecord import read_record
from stages.reports import html
out = Path(sys.argv[1])
record = read_record(out / "reports" / "run.json")
started = time.perf_counter()
html.render(out, record)
print(json.dumps({"seconds": time.perf_counter() - started}))
"""

OPEN_SCRIPT = """
const nav = performance.getEntriesByType("navigation")[0];
const ready = performance.getEntriesByName("report-ready")[0];
return {load: nav.loadEventEnd, ready: ready ? ready.startTime : null,
        resources: performance.getEntriesByType("resource").length};
"""

CLICK_SCRIPT = """
const tiles = [...document.querySelectorAll(".treemap .tile")].filter(t => t.dataset.bundle >= 0);
const started = performance.now();
tiles[0].dispatchEvent(new MouseEvent("click", {bubbles: true}));
return {ms: performance.now() - started,
        rows: document.querySelectorAll("#bundle-assets tbody tr").length};
"""

SEARCH_SCRIPT = """
const box = document.getElementById("why-search");
box.value = arguments[0];
const started = performance.now();
box.dispatchEvent(new KeyboardEvent("keydown", {key: "Enter"}));
return {ms: performance.now() - started,
        results: document.querySelectorAll("#why-results li").length};
"""


def render_seconds(output: Path, fresh: bool) -> float:
    """The renderer's own seconds on a built folder, in a fresh interpreter; `fresh` drops the
    kept content part first (what a run whose content changed pays)."""
    if fresh:
        (output / CONTENT_CACHE).unlink(missing_ok=True)
    done = subprocess.run(
        [PY, "-c", RENDER_SNIPPET, str(output)], capture_output=True, text=True, cwd=ROOT
    )
    if done.returncode != 0:
        raise BenchError(f"rendering the report failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["seconds"]


def find_chromium() -> tuple[str, str]:
    try:
        import selenium  # noqa: F401
    except ImportError:
        raise BenchError("selenium is not installed (pip install -e '.[test]')") from None
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not browser or not driver:
        raise BenchError("no chromium / chromedriver (apt-get install chromium chromium-driver)")
    return browser, driver


def open_page(page: Path, repeat: int, search: str) -> dict:
    """Open the page `repeat` times, each in a new headless Chromium; the medians."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser, driver_path = find_chromium()
    opens, loads, clicks, searches = [], [], [], []
    errors: list[str] = []
    for _ in range(repeat):
        options = webdriver.ChromeOptions()
        options.binary_location = browser
        for argument in (
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--window-size=1400,1800",
        ):
            options.add_argument(argument)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(driver_path), options=options)
        try:
            driver.set_page_load_timeout(120)
            driver.get(page.resolve().as_uri())
            WebDriverWait(driver, 120).until(
                lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready")
            )
            timing = driver.execute_script(OPEN_SCRIPT)
            if timing["ready"] is None:
                raise BenchError("the page did not draw (no report-ready mark)")
            opens.append(timing["ready"] / 1000)
            loads.append(timing["load"] / 1000)
            clicks.append(driver.execute_script(CLICK_SCRIPT)["ms"] / 1000)
            searches.append(driver.execute_script(SEARCH_SCRIPT, search)["ms"] / 1000)
            errors += [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        finally:
            driver.quit()
    if errors:
        raise BenchError(f"the page logged errors: {errors[:3]}")
    return {
        "median": median(opens),
        "values": opens,
        "load_median": median(loads),
        "click_median": median(clicks),
        "search_median": median(searches),
        "search": search,
    }
