"""Toy stage: one unit measures every .txt file, each size a part stored apart (`Parts`)."""

from orchestrator.typing import Parts, Plan, StageSpec, Unit

SPEC = StageSpec(name="sizes", version=1, inputs=(), outputs=("sizes",), keyed=("sizes",))


def plan(ctx, inputs):
    paths = tuple(e.path for e in ctx.walk() if e.path.endswith(".txt"))
    return Plan([Unit(id="all", payload=paths, key={"paths": paths}, files=paths)])


def run(payload, shared, reader):
    return Parts({path: f"{path}: {len(reader.read_bytes(path))} bytes" for path in payload})


def finish(ctx, inputs, results):
    """Each file → the digest of its part, as a consumer reads it with `reader.blob`."""
    return {"sizes": dict(results["all"].digests)}
