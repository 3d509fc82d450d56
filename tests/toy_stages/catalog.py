"""Toy stage: a keyed catalog, one entry per `cat/<name>.txt` file (name → its text)."""

from orchestrator.typing import Plan, StageSpec, Unit

SPEC = StageSpec(name="catalog", version=1, inputs=(), outputs=("catalog",), keyed=("catalog",))


def plan(ctx, inputs):
    paths = [e.path for e in ctx.walk() if e.path.startswith("cat/") and e.path.endswith(".txt")]
    return Plan([Unit(id=p, payload=p, key={"path": p}, files=(p,)) for p in paths])


def run(payload, shared, reader):
    return reader.read_bytes(payload).decode("utf-8").strip()


def finish(ctx, inputs, results):
    """Every entry stored again: an entry whose text did not change is no change."""
    return {"catalog": {unit_id[4:-4]: results[unit_id] for unit_id in sorted(results)}}
