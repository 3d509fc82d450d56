"""Toy stage: one unit per .txt file; counts its lines, reading included files as it goes."""

from orchestrator.typing import Plan, StageSpec, Unit

SPEC = StageSpec(name="lines", version=1, inputs=(), outputs=("counts",), config_keys=("platform",))


def plan(ctx, inputs):
    paths = [e.path for e in ctx.walk() if e.path.endswith(".txt")]
    return Plan([Unit(id=p, payload=p, key={"path": p}, files=(p,)) for p in paths])


def run(payload, shared, reader):
    total = 0
    seen = set()
    todo = [payload]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        if not reader.exists(path):
            continue
        for line in reader.read_bytes(path).decode("utf-8").splitlines():
            if line.startswith("include "):
                todo.append(line.split(" ", 1)[1].strip())
            else:
                total += 1
    return total


def finish(ctx, inputs, results):
    return {"counts": {unit_id: results[unit_id] for unit_id in sorted(results)}}
