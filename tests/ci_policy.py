"""What CI accepts of the suite (a pytest plugin; conftest.py loads it).

`.ci/run` sets ORCHESTRATE_CI=1. There, a test that skips fails instead, unless its reason
starts with one of CI_ALLOWED_SKIPS: reasons the machine cannot help (privileges, a tool the
benchmarks compare against). Missing conformance data (../shared) is never one of them. Outside
CI, skips stay skips, each with its reason (`-rs` lists them).
"""

from __future__ import annotations

import os

import pytest

CI_ALLOWED_SKIPS = (
    "cannot mount a tmpfs here",  # test_faults: a full disk needs root to mount a small tmpfs
    "cannot make a file unreadable to this user",  # test_faults: root without CAP_SETPCAP
    "a read-only mount namespace needs root and unshare",  # test_outputs
    "cannot make a read-only mount namespace here",  # test_outputs: no CAP_SYS_ADMIN
    "ninja is not installed",  # test_benchmarks: the baseline the benchmarks compare against
)


def in_ci() -> bool:
    return os.environ.get("ORCHESTRATE_CI", "").strip().lower() in ("1", "true", "yes", "on")


def skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return text.removeprefix("Skipped: ")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if not (report.skipped and in_ci()) or hasattr(report, "wasxfail"):
        return
    reason = skip_reason(report)
    if not reason.startswith(CI_ALLOWED_SKIPS):
        report.outcome = "failed"
        report.longrepr = (
            f"skipped in CI for a reason not in CI_ALLOWED_SKIPS (tests/ci_policy.py): {reason}"
        )
