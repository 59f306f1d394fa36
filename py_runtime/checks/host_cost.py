"""Host cost per dispatch: naive Python encoding vs plan replay, on a decode-sized plan.

A decode step of a 16-layer model is ~230 dispatches. The naive path encodes each dispatch from
Python (setPipeline, setBindGroup, dispatchWorkgroups: three FFI crossings each in the browser,
three wgpu-py calls natively); replay encodes the recorded plan in one call (natively: a loop of
direct wgpu-native calls). Each timed step is encode + submit without waiting; the GPU is drained
between steps, untimed. The outputs of one naive step and one replayed
step, from the same input, must be bit-identical.
"""

from __future__ import annotations

import time

from ..ops.synth import UniformRange, fill_uniform
from ..ops.unary import unary
from ..plan import Plan
from ..runtime import Runtime

__all__ = ["run_host_cost"]

# A chain that keeps values bounded whatever its length: each op reads the previous output.
_CHAIN = ("tanh", "neg", "sigmoid", "abs", "silu", "round", "hardswish", "sin")
_RANGE = UniformRange(scale_log2=-22, offset=-2.0)


async def _host_time(device, steps: int, step) -> int:
    """ns spent in `step` (encode + submit, no wait) over `steps` steps, draining the GPU between
    steps untimed, so GPU work never overlaps the host work measured (it would on CPU adapters)."""
    total = 0
    for _ in range(steps):
        started = time.perf_counter_ns()
        await step()
        total += time.perf_counter_ns() - started
        await device.on_submitted_work_done()
    return total


async def run_host_cost(runtime: Runtime, *, dispatches: int = 230, steps: int = 50, length: int = 256,
                        warmup: int = 3) -> dict:
    if dispatches < 1 or steps < 1:
        raise ValueError(f"host_cost needs dispatches >= 1 and steps >= 1, got {dispatches}, {steps}")
    device = runtime.device
    a = await runtime.tensors.allocate("host_cost.a", (length,))
    b = await runtime.tensors.allocate("host_cost.b", (length,))
    seed = Plan(runtime, "host_cost.seed")
    await seed.add(fill_uniform(target=a, value_range=_RANGE, seed=3, stream=1))
    seed.record()
    chain = Plan(runtime, "host_cost.chain")
    for i in range(dispatches):
        src, dst = (a, b) if i % 2 == 0 else (b, a)
        await chain.add(unary(_CHAIN[i % len(_CHAIN)], src=src, dst=dst))
    chain.record()
    last = b if dispatches % 2 else a
    listed = chain.dispatches()

    async def naive():
        await device.submit(listed, wait=False)

    async def replay():
        await chain.replay(wait=False)

    # Bit-identity: one step each from the same input.
    await seed.replay()
    await device.submit(listed)
    naive_out = await device.read_buffer(last.buffer)
    await seed.replay()
    await chain.replay()
    replay_out = await device.read_buffer(last.buffer)

    results = {}
    for name, step in (("naive", naive), ("replay", replay)):
        await _host_time(device, warmup, step)
        device.take_replay_stats()
        host_ns = await _host_time(device, steps, step)
        results[name] = {"steps": steps, "host_us_per_step": host_ns / steps / 1e3,
                         "host_us_per_dispatch": host_ns / steps / dispatches / 1e3}
    # Where a replayed step's host time goes, where the backend can tell (the browser's JS half).
    stats = device.take_replay_stats()
    breakdown = None
    if stats and stats["steps"]:
        encode_us = 1e3 * stats["encode_ms"] / stats["steps"]
        submit_us = 1e3 * stats["submit_ms"] / stats["steps"]
        breakdown = {"encode_us_per_step": encode_us, "submit_us_per_step": submit_us,
                     "rest_us_per_step": results["replay"]["host_us_per_step"] - encode_us - submit_us,
                     "timer_step_us": stats["timer_step_us"], "steps": stats["steps"]}
    started = time.perf_counter_ns()
    for _ in range(steps):
        await chain.replay()
    waited = time.perf_counter_ns() - started
    gpu_ns = None
    if "timestamp-query" in device.adapter.device_features:
        profiled = await chain.replay(profile=True)
        gpu_ns = sum(row.ns for row in profiled.rows)
    chain.release()
    seed.release()
    runtime.tensors.release(a.name)
    runtime.tensors.release(b.name)
    return {
        "suite": "host_cost",
        "adapter": device.adapter.to_json(),
        "dispatches": dispatches,
        "length": length,
        "naive": results["naive"],
        "replay": results["replay"],
        "speedup": results["naive"]["host_us_per_step"] / results["replay"]["host_us_per_step"],
        "replay_waited_us_per_step": waited / steps / 1e3,
        "gpu_us_per_step_profiled": gpu_ns / 1e3 if gpu_ns is not None else None,
        "replay_breakdown": breakdown,
        "bit_identical": naive_out == replay_out,
        "passed": naive_out == replay_out,
    }
