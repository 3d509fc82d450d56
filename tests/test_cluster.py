"""Many machines: builds on a multi-node Ray cluster (head + worker nodes) started inside the test.

The cluster runs in a subprocess (tests/cluster_job.py) so that it never meets the session's
local Ray (`ray_local`) in this process.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from buildkit import TESTS, cli_env

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster_results(tmp_path_factory):
    """Run every cluster build once; the tests below check its parts."""
    work = tmp_path_factory.mktemp("cluster")
    env = cli_env()
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run(
        [sys.executable, str(TESTS / "cluster_job.py"), str(work)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    line = next((out for out in proc.stdout.splitlines() if out.startswith("RESULTS ")), None)
    assert proc.returncode == 0 and line, proc.stdout[-3000:] + proc.stderr[-5000:]
    return json.loads(line[len("RESULTS ") :])


def test_a_build_through_executor_address_equals_a_local_build(cluster_results):
    """`executor.address` names the cluster; the code ships with the job; outputs are identical."""
    assert cluster_results["nodes_seen"] == 3
    assert cluster_results["codes"]["by_address"] == cluster_results["codes"]["reference"]
    assert cluster_results["builds"]["by_address"] == cluster_results["builds"]["reference"]


def test_workers_that_cannot_see_the_project_get_its_bytes_shipped(cluster_results):
    """With the project unreadable on every worker, the default (shipped inputs) gives identical outputs."""
    assert cluster_results["codes"]["hidden_shipped"] == cluster_results["codes"]["reference"]
    assert cluster_results["builds"]["hidden_shipped"] == cluster_results["builds"]["reference"]


def test_hiding_the_project_really_hides_it(cluster_results):
    """Control: the same hidden project with `shared_paths: true` fails to read, with exit 2."""
    assert cluster_results["codes"]["hidden_shared_paths"] == 2


def test_shared_paths_reads_the_project_directly(cluster_results):
    """`executor.shared_paths: true` on a project every node sees gives identical outputs."""
    assert cluster_results["codes"]["shared_paths"] == cluster_results["codes"]["reference"]
    assert cluster_results["builds"]["shared_paths"] == cluster_results["builds"]["reference"]


def test_a_worker_node_removed_mid_build(cluster_results):
    """A worker node removed while tasks run: the build completes with identical outputs."""
    assert cluster_results["node_removed_mid_build"]
    assert cluster_results["nodes_alive_after"] == 2
    assert cluster_results["codes"]["node_removed"] == cluster_results["codes"]["reference"]
    assert cluster_results["builds"]["node_removed"] == cluster_results["builds"]["reference"]
