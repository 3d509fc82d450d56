"""Toy stage: sums the counts into one number and publishes it."""

from orchestrator.hashing import digest_value
from orchestrator.typing import Plan, StageSpec, Unit

SPEC = StageSpec(name="total", version=1, inputs=("counts",), outputs=("total",))


def plan(ctx, inputs):
    counts = inputs["counts"]
    return Plan([Unit(id="total", payload=counts, key={"counts": digest_value(counts)})])


def run(payload, shared, reader):
    return sum(payload.values())


def finish(ctx, inputs, results):
    return {"total": results["total"]}


def publish(ctx, outputs):
    ctx.publish_bytes("total.txt", f"{outputs['total']}\n".encode("ascii"))
