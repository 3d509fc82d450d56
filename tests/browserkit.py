"""A real headless Chromium for tests that look at a page as a person would (Selenium with
Debian's `chromium` and `chromium-driver`, which `.ci/run` installs)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
DRIVERS = ("chromedriver",)


def find_browser() -> tuple[str, str]:
    """(browser, driver) paths, or a skip saying what is missing."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.skip("selenium is not installed (pip install -e '.[test]')")
    browser = next((found for name in BROWSERS if (found := shutil.which(name))), None)
    driver = next((found for name in DRIVERS if (found := shutil.which(name))), None)
    if browser is None or driver is None:
        pytest.skip(
            "no headless Chromium here (apt-get install chromium chromium-driver; "
            ".ci/run installs them)"
        )
    return browser, driver


@contextmanager
def chromium(width: int = 1400, height: int = 1800) -> Iterator:
    """A headless Chromium driven by Selenium, with its console and network logged. Any request
    to the network goes to a proxy that is not there, so it fails and shows in the console."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver_path = find_browser()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={width},{height}",
        "--force-device-scale-factor=1",
        "--proxy-server=127.0.0.1:9",
        "--proxy-bypass-list=<-loopback>",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(driver) -> list[str]:
    """Messages the page logged at the level of an error."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def requested_urls(driver) -> list[str]:
    """Every URL the page asked the network stack for (the page itself included)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def open_page(driver, page: Path, timeout: float = 30.0) -> str:
    """Load a page from disk and wait until its script has drawn it; its `data-ready`."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(page.resolve().as_uri())
    WebDriverWait(driver, timeout).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready")
    )
    return driver.find_element(By.TAG_NAME, "body").get_attribute("data-ready")
