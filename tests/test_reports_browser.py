"""The demo's build report in a real headless Chromium: it loads with no console error and no
network request, shows the figures the build printed, opens a bundle when its tile is clicked,
and answers the `why` search. Screenshots go to the test's folder; with
ORCHESTRATE_UPDATE_SCREENSHOT=1 the first also replaces docs/report.png (the README's)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from browserkit import chromium, console_errors, open_page, requested_urls
from reportkit import TRIM_TEX, build, copy_demo

SHARED = Path(__file__).resolve().parents[2] / "shared"
DOCS_SCREENSHOT = Path(__file__).resolve().parents[1] / "docs" / "report.png"


@pytest.fixture
def page(tmp_path) -> Path:
    if not (SHARED / "examples" / "demo").is_dir():
        pytest.skip(f"../shared is absent ({SHARED}); the demo is needed")
    output = build(copy_demo(SHARED, tmp_path / "demo"), "build/out")
    return output / "reports" / "index.html"


def test_the_report_in_a_browser(page, tmp_path):
    """Loaded from disk: no console error, no request but the page; figures, a bundle opened
    by a click on its tile, a chain found by the search box."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with chromium() as driver:
        assert open_page(driver, page) == "true"
        assert console_errors(driver) == []
        assert set(requested_urls(driver)) <= {page.resolve().as_uri()}
        assert driver.execute_script("return performance.getEntriesByType('resource').length") == 0
        figure = {
            name: driver.find_element(By.ID, f"fig-{name}").text
            for name in ("assets", "bundles", "failures", "missing")
        }
        assert figure == {"assets": "15", "bundles": "4", "failures": "16", "missing": "3"}
        assert "exit 1" in driver.find_element(By.ID, "outcome").text
        driver.save_screenshot(str(tmp_path / "report.png"))
        if os.environ.get("ORCHESTRATE_UPDATE_SCREENSHOT") == "1":
            shutil.copyfile(tmp_path / "report.png", DOCS_SCREENSHOT)

        names = driver.execute_script(
            "return [...document.querySelectorAll('.treemap .tile')]"
            ".map(t => t.querySelector('title').textContent)"
        )
        town = next(i for i, name in enumerate(names) if name.startswith("maps/Town "))
        driver.find_elements(By.CSS_SELECTOR, ".treemap .tile rect")[town].click()
        detail = driver.find_element(By.ID, "bundle-detail")
        WebDriverWait(driver, 5).until(lambda d: detail.is_displayed())
        assert detail.find_element(By.TAG_NAME, "h3").text == "Bundle maps/Town"
        manifest = json.loads((page.parents[1] / "manifest.json").read_text(encoding="utf-8"))
        assert manifest["bundles"]["maps/Town"]["file"] in detail.text.splitlines()
        rows = detail.find_elements(By.CSS_SELECTOR, "#bundle-assets tbody tr")
        assert len(rows) == 6
        assert "Props/prop_barrel" in {row.find_elements(By.TAG_NAME, "td")[0].text for row in rows}
        assert "selected" in driver.find_elements(By.CSS_SELECTOR, ".treemap .tile")[
            town
        ].get_attribute("class")

        search = driver.find_element(By.ID, "why-search")
        search.send_keys("Trim_tex")
        WebDriverWait(driver, 5).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, "#why-results .chain li")
        )
        steps = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#why-results .chain li")]
        assert [step.split(" · ")[0] for step in steps] == [
            "Town.iworld",
            "Town_Night.ilevel",
            "Effects/fx_fire",
            "Test/Test_Demo/Trim_mat",
            "Test/Test_Demo/Trim_tex",
        ]
        assert TRIM_TEX in steps[-1]
        summary = driver.find_element(By.CSS_SELECTOR, "#rules details summary")
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", summary)
        summary.click()
        WebDriverWait(driver, 5).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, "#rules details tbody tr")
        )
        driver.save_screenshot(str(tmp_path / "report-why.png"))
        assert console_errors(driver) == []
        assert set(requested_urls(driver)) <= {page.resolve().as_uri()}
    assert (tmp_path / "report.png").stat().st_size > 10_000
