"""Shared fixtures: the ../shared folder (skipped with a reason when absent, a failure in CI) and
the CI skip policy (ci_policy.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))
SHARED = TESTS.parents[1] / "shared"

pytest_plugins = ["ci_policy"]


@pytest.fixture
def shared_dir() -> Path:
    """../shared (the specs, the demo, real projects): skipped with a reason when absent, except
    in CI, which always has it."""
    if not (SHARED / "spec").is_dir():
        from ci_policy import in_ci

        reason = f"../shared is absent ({SHARED}); conformance data unavailable"
        if in_ci():
            pytest.fail(reason)
        pytest.skip(reason)
    return SHARED


@pytest.fixture(scope="session")
def ray_local(tmp_path_factory):
    """A local Ray with two workers for the whole session (started once: it costs seconds), as
    a build starts one: on the loopback address only, its output in a log of its own."""
    import os

    import ray

    from orchestrator.executors.raysession import RayLog, start_local

    if not ray.is_initialized():
        path = os.pathsep.join([str(TESTS), str(TESTS.parent), os.environ.get("PYTHONPATH", "")])
        start_local(2, path, RayLog(tmp_path_factory.mktemp("ray-local")))
    yield ray
