"""The stage graph: derived from declarations, checked at load."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from orchestrator.core.graph import GraphError, Stage, order, select
from orchestrator.typing import StageSpec


def stage(name, inputs=(), outputs=()):
    return Stage(StageSpec(name, 1, tuple(inputs), tuple(outputs)), SimpleNamespace())


def test_order_follows_values_not_list_order():
    """Stages are ordered by what they consume, whatever order they are listed in."""
    stages = [stage("c", ["b"], ["c"]), stage("a", [], ["a"]), stage("b", ["a"], ["b"])]
    assert [s.name for s in order(stages)] == ["a", "b", "c"]


def test_two_producers_are_rejected():
    """A value produced by two stages is an error naming both."""
    with pytest.raises(GraphError, match="'x' is produced by both 'a' and 'b'"):
        order([stage("a", [], ["x"]), stage("b", [], ["x"])])


def test_unproduced_input_is_rejected():
    """An input no stage produces is an error."""
    with pytest.raises(GraphError, match="needs \\['nothing'\\]"):
        order([stage("a", ["nothing"], ["x"])])


def test_cycle_is_rejected():
    """Stages that consume each other's outputs form a cycle and are rejected."""
    with pytest.raises(GraphError, match="cycle"):
        order([stage("a", ["y"], ["x"]), stage("b", ["x"], ["y"])])


def test_select_keeps_what_the_named_stages_need():
    """--stages keeps the named stages and their upstream, not the others."""
    stages = [stage("a", [], ["a"]), stage("b", ["a"], ["b"]), stage("c", ["a"], ["c"])]
    assert [s.name for s in select(stages, ["b"])] == ["a", "b"]


def test_real_pipeline_graph_is_valid():
    """The shipped stages form a valid graph."""
    from orchestrator.core.registry import registered_stages

    names = [s.name for s in order(list(registered_stages()))]
    assert names[0] == "collect"


def test_a_stage_that_lets_a_value_go_runs_before_its_siblings():
    """Among ready stages, the last reader of a value goes first (the driver can drop it
    sooner); otherwise the order is by name."""
    stages = [
        stage("a", [], ["big", "small"]),
        stage("b", ["small"], ["b"]),
        stage("z", ["big", "small"], ["z"]),
        stage("c", ["small"], ["c"]),
    ]
    assert [s.name for s in order(stages)] == ["a", "z", "b", "c"]
