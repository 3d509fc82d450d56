"""Executors: local and Ray give identical results; Ray batches and resends missing files."""

from __future__ import annotations

import pytest
from enginekit import build_toy, write_toy

from orchestrator.executors import WorkItem
from orchestrator.executors.ray import plan_batches


def test_batches_cover_every_item_once():
    """Batching keeps every unit exactly once, in order, within the size bounds."""
    items = [WorkItem(str(i), i) for i in range(1000)]
    batches = plan_batches(items, workers=2)
    assert [i.unit_id for b in batches for i in b] == [str(i) for i in range(1000)]
    assert all(16 <= len(b) <= 512 for b in batches[:-1])
    assert len(batches) >= 8


@pytest.mark.ray
def test_local_and_ray_give_identical_outputs(tmp_path, ray_local):
    """The same project built on local and on Ray gives byte-identical published outputs."""
    files = {
        f"d{i}/f{i}.txt": "x\n" * (i % 5 + 1)
        + (f"include d{i + 1}/f{i + 1}.txt\n" if i % 3 == 0 else "")
        for i in range(60)
    }
    local = build_toy(write_toy(tmp_path / "local", files), executor="local")
    remote = build_toy(write_toy(tmp_path / "ray", files), executor="ray")
    assert local.outputs == remote.outputs
    assert (tmp_path / "local/out/total.txt").read_bytes() == (
        tmp_path / "ray/out/total.txt"
    ).read_bytes()
    assert any("driver" not in o.worker for r in remote.reports for o in r.outcomes if not o.cached)
