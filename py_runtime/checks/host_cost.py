"""Host cost per dispatch: naive Python encoding vs plan replay, on a decode-sized plan.

A decode step of a 16-layer model is ~230 dispatches. The naive path encodes each dispatch from
Python (setPipeline, setBindGroup, dispatchWorkgroups: three FFI crossings each in the browser,
three wgpu-py calls natively); replay encodes the recorded plan in one call (natively: a loop of
direct wgpu-native calls). Each timed step is encode + submit without waiting; the GPU is drained
between steps, untimed. Three ways are timed:

  naive          every dispatch encoded from Python
  replay         plan.replay(wait=False), params unchanged (no upload)
  replay_upload  the same after writing one 16-byte params slot through the arena, as a decode
                 writes its position every step: every step then uploads. The headline figure.

Per way: the mean per step (the headline, amortized per dispatch), the median and the 90th
percentile (host CPUs are noisy), and where the backend measures it, the replay breakdown
(upload, encode, finish, submit; the rest is Python and the FFI crossing). The outputs of one
naive step and one replayed step, from the same input, must be bit-identical, and so must the
replay path's checks (resizes, heap growth, idle dispatches: checks/replay_path.py).
"""

from __future__ import annotations

import itertools
import math
import statistics
import struct
import time

from ..ops.synth import UniformRange, fill_uniform
from ..ops.unary import unary
from ..plan import Plan
from ..runtime import Runtime
from .outcome import verdict
from .replay_path import run_replay_path_checks

__all__ = ["run_host_cost"]

# A chain that keeps values bounded whatever its length: each op reads the previous output.
_CHAIN = ("tanh", "neg", "sigmoid", "abs", "silu", "round", "hardswish", "sin")
_RANGE = UniformRange(scale_log2=-22, offset=-2.0)
# The per-step params write of replay_upload: a position and a length, padded to a uniform's 16 bytes.
_POSITION = struct.Struct("<IIII")
HEADLINE = "replay_upload"


async def _step_times(device, steps: int, step) -> list[int]:
    """ns spent in each of `steps` calls of `step` (encode + submit, no wait), draining the GPU
    between steps untimed, so GPU work never overlaps the host work measured (it would on CPU adapters)."""
    samples = []
    clock = time.perf_counter_ns
    for _ in range(steps):
        started = clock()
        await step()
        samples.append(clock() - started)
        await device.on_submitted_work_done()
    return samples


def _summary(samples: list[int], dispatches: int) -> dict:
    ordered = sorted(samples)
    mean_us = sum(samples) / len(samples) / 1e3
    return {"steps": len(samples), "host_us_per_step": mean_us, "host_us_per_dispatch": mean_us / dispatches,
            "median_us_per_step": statistics.median(ordered) / 1e3,
            "p90_us_per_step": ordered[math.ceil(0.9 * len(ordered)) - 1] / 1e3}


def _breakdown(stats: dict | None, mean_us: float) -> dict | None:
    """Mean us per step in each phase the backend timed; `rest` is everything else in the step
    (Python, the FFI crossing, the call's own bookkeeping)."""
    if not stats or not stats["steps"]:
        return None
    phases = {f"{name}_us_per_step": 1e3 * stats[f"{name}_ms"] / stats["steps"]
              for name in ("upload", "encode", "finish", "submit")}
    return {**phases, "rest_us_per_step": mean_us - sum(phases.values()),
            "timer_step_us": stats["timer_step_us"], "steps": stats["steps"]}


async def run_host_cost(runtime: Runtime, *, dispatches: int = 230, steps: int = 50, length: int = 256,
                        warmup: int = 3) -> dict:
    if dispatches < 1 or steps < 1:
        raise ValueError(f"host_cost needs dispatches >= 1 and steps >= 1, got {dispatches}, {steps}")
    device = runtime.device
    replay_path = await run_replay_path_checks(runtime)
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
    arena = runtime.params
    position = arena.slot(_POSITION.size)       # bound by no dispatch: it moves bytes, not results
    counter = itertools.count()

    async def naive():
        await device.submit(listed, wait=False)

    async def replay():
        await chain.replay(wait=False)

    async def replay_upload():
        n = next(counter)
        arena.write(position, _POSITION.pack(n, n + 1, 0, 0))
        await chain.replay(wait=False)

    # Bit-identity: one step each from the same input.
    await seed.replay()
    await device.submit(listed)
    naive_out = await device.read_buffer(last.buffer)
    await seed.replay()
    await chain.replay()
    replay_out = await device.read_buffer(last.buffer)

    results = {}
    for name, step in (("naive", naive), ("replay", replay), ("replay_upload", replay_upload)):
        await _step_times(device, warmup, step)
        device.take_replay_stats()
        result = _summary(await _step_times(device, steps, step), dispatches)
        result["breakdown"] = None if name == "naive" else _breakdown(device.take_replay_stats(),
                                                                       result["host_us_per_step"])
        results[name] = result
    started = time.perf_counter_ns()
    for _ in range(steps):
        await chain.replay()
    waited = time.perf_counter_ns() - started
    gpu_ns = None
    if "timestamp-query" in device.adapter.device_features:
        profiled = await chain.replay(profile=True)
        gpu_ns = sum(row.ns for row in profiled.rows)
    arena.release(position)
    chain.release()
    seed.release()
    runtime.tensors.release(a.name)
    runtime.tensors.release(b.name)
    identical = naive_out == replay_out
    return {
        "suite": "host_cost",
        "adapter": device.adapter.to_json(),
        "dispatches": dispatches,
        "length": length,
        **results,
        "headline": HEADLINE,
        "upload_bytes_per_step": _POSITION.size,
        "speedup": results["naive"]["host_us_per_step"] / results["replay"]["host_us_per_step"],
        "replay_waited_us_per_step": waited / steps / 1e3,
        "gpu_us_per_step_profiled": gpu_ns / 1e3 if gpu_ns is not None else None,
        "replay_path": replay_path,
        "bit_identical": identical,
        "result": verdict(identical and replay_path["passed"]),
    }
