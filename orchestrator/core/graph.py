"""The stage graph, derived from the stages' declarations and checked when it is built."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, OrchestrateError
from ..typing import PROJECT, StageSpec


class GraphError(OrchestrateError):
    """The stage declarations do not form a valid graph (a bug in a stage, not user input)."""

    exit_code = 3


@dataclass(frozen=True)
class Stage:
    """A stage's declaration and the module (or object) that implements it."""

    spec: StageSpec
    module: Any

    @property
    def name(self) -> str:
        return self.spec.name


def order(stages: list[Stage]) -> list[Stage]:
    """Topological order; checks one producer per value and no cycles; among the stages ready to
    run, the one that lets the most values go first, then by name."""
    producer: dict[str, str] = {}
    for stage in stages:
        for value in stage.spec.outputs:
            if value in producer:
                raise GraphError(
                    f"value {value!r} is produced by both {producer[value]!r} and {stage.name!r}"
                )
            producer[value] = stage.name
    by_name = {s.name: s for s in stages}
    if len(by_name) != len(stages):
        raise GraphError("two stages share a name")
    needs: dict[str, set[str]] = {}
    for stage in stages:
        wanted = [v for v in stage.spec.inputs if v != PROJECT]  # the engine provides `project`
        missing = [v for v in wanted if v not in producer]
        if missing:
            raise GraphError(f"stage {stage.name!r} needs {missing} which no stage produces")
        needs[stage.name] = {producer[v] for v in wanted}
    readers: dict[str, set[str]] = {}
    for stage in stages:
        for value in stage.spec.inputs:
            readers.setdefault(value, set()).add(stage.name)

    def frees(name: str) -> int:
        """How many values no stage still to come reads once `name` has run: the driver lets
        a value go after its last reader (scheduler.py), so such a stage goes first and less
        is held while the others run (the index of every repository, before the cook)."""
        return sum(1 for value in by_name[name].spec.inputs if readers[value] - placed <= {name})

    done: list[Stage] = []
    placed: set[str] = set()
    while len(done) < len(stages):
        ready = [n for n in by_name if n not in placed and needs[n] <= placed]
        if not ready:
            cycle = sorted(n for n in by_name if n not in placed)
            raise GraphError(f"the stages {cycle} depend on each other in a cycle")
        name = min(ready, key=lambda n: (-frees(n), n))  # one at a time: a stable order
        done.append(by_name[name])
        placed.add(name)
    return done


def select(stages: list[Stage], wanted: list[str] | None) -> list[Stage]:
    """The stages named in `wanted` and every stage they depend on, in graph order."""
    ordered = order(stages)
    if not wanted:
        return ordered
    by_name = {s.name: s for s in ordered}
    unknown = [w for w in wanted if w not in by_name]
    if unknown:
        raise ConfigError(
            f"unknown stage(s) {unknown}; the stages are {list(by_name)}", key="--stages"
        )
    producer = {v: s.name for s in ordered for v in s.spec.outputs}
    keep: set[str] = set()
    todo = list(wanted)
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep.add(name)
        todo.extend(producer[v] for v in by_name[name].spec.inputs if v != PROJECT)
    return [s for s in ordered if s.name in keep]
