"""What a stage hands its units is typed: every unit's payload, and a plan's shared data, is a
record (a NamedTuple or dataclass) or a tuple of records, read by field name — never a
positional tuple or a dict of fixed keys — and a payload is storable (`@record`): the engine
keeps the payload of a unit that read files, to run it again when they change."""

from __future__ import annotations

import dataclasses
import json

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


#: Stored values that are a published document, not a record carried between modules: the
#: validate stage keeps validate.json's document (patched on the next run, rendered by publish).
DOCUMENTS = {("validate", "validation")}


def untyped_state(state) -> bool:
    """A plan's state is nothing, a digest, or a record the store gives back as it is."""
    if state is None or isinstance(state, str):
        return False
    return not (is_record(state) and stored_as_it_is(state))


def untyped_output(stage, name: str, value) -> bool:
    """A stored value is a record, bytes or text, a mapping of entries by key (the stage
    declares it `keyed`), or a published document; never a dict of fixed keys or a positional
    tuple."""
    from orchestrator import UNCHANGED, KeyedPatch

    if value is UNCHANGED or isinstance(value, (bytes, str, KeyedPatch)) or is_record(value):
        return False
    if isinstance(value, dict):
        return name not in stage.spec.keyed and (stage.name, name) not in DOCUMENTS
    return True


def test_every_stage_stores_typed_values_and_plan_states(tmp_path, monkeypatch):
    """A cold build of a generated project and a rebuild after a payload edit (which cooks one
    asset again and patches the last manifest), every stage's plans and outputs watched: a
    plan's state and a stored value are records, never a dict of fixed keys or a positional
    tuple (what a hook or the next run reads of them, it reads by field name)."""
    build = make_project(tmp_path, 100, 3, executor={"kind": "local"})
    states: list[tuple[str, object]] = []
    outputs: list[tuple[object, str, object]] = []
    for stage in registered_stages():
        module = stage.module

        def planned(ctx, inputs, _plan=module.plan, _name=stage.name):
            plan = _plan(ctx, inputs)
            states.append((_name, plan.state))
            return plan

        monkeypatch.setattr(module, "plan", planned)
        if hasattr(module, "update"):

            def updated(ctx, inputs, changes, _update=module.update, _name=stage.name):
                plan = _update(ctx, inputs, changes)
                if plan is not None:
                    states.append((_name, plan.state))
                return plan

            monkeypatch.setattr(module, "update", updated)

        def finished(ctx, inputs, results, _finish=module.finish, _stage=stage):
            made = _finish(ctx, inputs, results)
            outputs.extend((_stage, name, value) for name, value in made.items())
            return made

        monkeypatch.setattr(module, "finish", finished)
    assert run_inprocess("run", str(build)) in (0, 1)
    (cooklist,) = build.parent.glob("*/out/reports/cooklist.json")
    cooked = set(json.loads(cooklist.read_bytes())["cooked"])
    payloads = sorted(build.parent.glob("project/**/resource.data"))
    data = next(path for path in payloads if path.parent.name in cooked)
    data.write_bytes(data.read_bytes() + b" edited")
    assert run_inprocess("run", str(build)) in (0, 1)
    # (manifest's plan has a state only when its update patched the last manifest)
    assert {"validate", "manifest", "cook"} <= {name for name, state in states if state is not None}
    found = [f"{name}: plan state {type(s).__name__}" for name, s in states if untyped_state(s)]
    found += [
        f"{stage.name}: {name} is a {type(value).__name__}"
        for stage, name, value in outputs
        if untyped_output(stage, name, value)
    ]
    assert not found, "\n".join(sorted(set(found)))
