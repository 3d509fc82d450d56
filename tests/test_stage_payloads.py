"""What a stage hands its units is typed: every unit's payload, and a plan's shared data, is a
record (a NamedTuple or dataclass) or a tuple of records, read by field name — never a
positional tuple or a dict of fixed keys — and a payload is storable (`@record`): the engine
keeps the payload of a unit that read files, to run it again when they change."""

from __future__ import annotations

import dataclasses

from buildkit import make_project, run_inprocess

from orchestrator.codec import dumps, loads
from orchestrator.core.registry import registered_stages


def is_record(value) -> bool:
    return hasattr(type(value), "_fields") or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    )


def untyped(value) -> bool:
    """Neither nothing, a record, nor a tuple of records."""
    if value is None or is_record(value):
        return False
    return not (isinstance(value, tuple) and value and all(is_record(v) for v in value))


def stored_as_it_is(value) -> bool:
    """The value comes back from the store as the same types (its records registered)."""
    back = loads(dumps(value))
    if isinstance(value, tuple) and not is_record(value):
        return all(type(a) is type(b) for a, b in zip(value, back, strict=True))
    return type(back) is type(value)


def test_every_stage_plans_typed_storable_payloads(tmp_path, monkeypatch):
    """A build of a generated project, every stage's plan watched: no payload or shared value
    is a positional tuple or a plain dict, and every payload survives the store's round trip."""
    build = make_project(tmp_path, 100, 3, executor={"kind": "local"})
    plans: dict[str, list] = {}
    for stage in registered_stages():

        def watched(ctx, inputs, _plan=stage.module.plan, _name=stage.name):
            plan = _plan(ctx, inputs)
            plans.setdefault(_name, []).append(plan)
            return plan

        monkeypatch.setattr(stage.module, "plan", watched)
    assert run_inprocess("run", str(build)) in (0, 1)
    assert set(plans) == {stage.name for stage in registered_stages()}
    found = []
    for name, made in sorted(plans.items()):
        for plan in made:
            if untyped(plan.shared):
                found.append(f"{name}: shared {type(plan.shared).__name__}")
            for unit in plan.units:
                if untyped(unit.payload):
                    found.append(f"{name}: payload {type(unit.payload).__name__}")
                elif not stored_as_it_is(unit.payload):
                    found.append(
                        f"{name}: payload {type(unit.payload).__name__} not stored as it is"
                    )
    assert not found, "\n".join(sorted(set(found)))
