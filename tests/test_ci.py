"""CI's rules: `.ci/run` needs ../shared, and in CI a skip fails unless its reason is allowed."""

from __future__ import annotations

import shutil
import subprocess

from buildkit import REPO

pytest_plugins = ["pytester"]

SKIPPING = """
import pytest

def test_allowed():
    pytest.skip("cannot mount a tmpfs here: permission denied")

def test_not_allowed():
    pytest.skip("../shared is absent; conformance data unavailable")

@pytest.mark.skipif(True, reason="ninja is not installed")
def test_allowed_by_marker():
    pass

@pytest.mark.skipif(True, reason="some dependency is missing")
def test_not_allowed_by_marker():
    pass
"""


def test_outside_ci_skips_stay_skips(pytester, monkeypatch):
    """A plain pytest run skips with reasons."""
    monkeypatch.delenv("ORCHESTRATE_CI", raising=False)
    pytester.makepyfile(SKIPPING)
    result = pytester.runpytest("-p", "ci_policy", "-rs")
    result.assert_outcomes(skipped=4)
    result.stdout.fnmatch_lines(["*../shared is absent*"])


def test_in_ci_only_named_skips_are_allowed(pytester, monkeypatch):
    """With ORCHESTRATE_CI=1 a skip whose reason is not in CI_ALLOWED_SKIPS fails, naming it."""
    monkeypatch.setenv("ORCHESTRATE_CI", "1")
    pytester.makepyfile(SKIPPING)
    result = pytester.runpytest("-p", "ci_policy")
    result.assert_outcomes(skipped=2, failed=1, errors=1)  # a skipif marker fails in setup
    result.stdout.fnmatch_lines(["*not in CI_ALLOWED_SKIPS*../shared is absent*"])


def test_shared_dir_fails_in_ci_when_shared_is_absent(pytester, monkeypatch):
    """The shared_dir fixture skips outside CI and fails in CI when ../shared is absent."""
    pytester.makeconftest(
        "import importlib.util\n"
        "from pathlib import Path\n"
        f"spec = importlib.util.spec_from_file_location('real', {str(REPO / 'tests' / 'conftest.py')!r})\n"
        "real = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(real)\n"
        "real.SHARED = Path('/nonexistent/shared')\n"
        "shared_dir = real.shared_dir\n"
    )
    pytester.makepyfile("def test_needs_shared(shared_dir):\n    pass\n")
    monkeypatch.delenv("ORCHESTRATE_CI", raising=False)
    pytester.runpytest("-p", "ci_policy").assert_outcomes(skipped=1)
    monkeypatch.setenv("ORCHESTRATE_CI", "1")
    pytester.runpytest("-p", "ci_policy").assert_outcomes(errors=1)


def test_ci_run_fails_without_shared_and_keeps_the_readme_command(tmp_path):
    """`.ci/run` stops with a message when ../shared is missing; it runs the README's command."""
    script = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    command = "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' && python -m pytest -q"
    assert command in readme and command in script
    repo = tmp_path / "checkout" / "repo"
    (repo / ".ci").mkdir(parents=True)
    shutil.copy(REPO / ".ci" / "run", repo / ".ci" / "run")
    proc = subprocess.run(["bash", str(repo / ".ci" / "run")], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "../shared is missing" in proc.stderr
    assert not (repo / ".venv").exists()
