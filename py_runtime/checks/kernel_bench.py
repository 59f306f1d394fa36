"""Kernel benchmark: GPU time per kernel and shape from timestamp queries, as GB/s and GFLOP/s and
as a fraction of a streaming read measured in the same run (of the same byte count, and of a
large buffer). Runs unchanged in the page and natively; prints nothing itself.

Each measured plan repeats its dispatch `repeats` times in one replay (one pass per dispatch when
profiling), and a row reports the median duration over `trials` replays.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ..gpu.device import GpuOutOfMemory
from ..ops.q4 import GEMV_SHAPES, Q4Weight, q4_linear, q4_quantize, stream_read
from ..ops.synth import fill_uniform
from ..plan import Plan, runs_at
from ..runtime import Runtime
from .q4_linear import ACT_RANGE, WEIGHT_RANGE

__all__ = ["BenchCase", "BENCH_PRESETS", "run_kernel_bench"]

_STREAM_BIG = 1 << 30
_STREAM_MIN = 64 << 20


@dataclass(frozen=True)
class BenchCase:
    name: str
    k: int
    n: int
    rows: int
    route: str | None = None            # None: whatever the guards choose
    gemv_shape: str | None = None        # None: the route's choice
    group_size: int = 64


def _decode(prefix: str, shapes, routes=(None,), gemv_shapes=(None,)) -> list[BenchCase]:
    return [BenchCase(f"{prefix}.{name}", k, n, 1, route, g) for name, k, n in shapes for route in routes
            for g in gemv_shapes]


_LLAMA = [("q_o", 2048, 2048), ("kv", 2048, 512), ("qkv_as_one", 2048, 3072), ("gate_up", 2048, 8192),
          ("down", 8192, 2048), ("lm_head", 2048, 128256)]
_QWEN = [("q", 1024, 2048), ("kv", 1024, 1024), ("o", 2048, 1024), ("gate_up", 1024, 3072), ("down", 3072, 1024),
         ("lm_head", 1024, 151936)]
BENCH_PRESETS = {
    "tiny": [BenchCase("tiny.gemv", 256, 96, 1), BenchCase("tiny.gemm", 256, 96, 9)],
    "decode": _decode("llama", _LLAMA) + _decode("qwen", _QWEN),
    "gemv_variants": _decode("llama", _LLAMA, gemv_shapes=GEMV_SHAPES) + _decode("qwen", _QWEN, gemv_shapes=GEMV_SHAPES),
    "gemv_vocab": [BenchCase(f"{prefix}.lm_head", k, n, 1, None, g) for prefix, k, n in
                   (("llama", 2048, 128256), ("qwen", 1024, 151936))
                   for g in ("r8", "w8u4", "w4u8", "w16u2", "w16u4", "w8u8")],
    "prefill": [BenchCase(f"llama.{name}.m{m}", k, n, m) for name, k, n in _LLAMA[:5] for m in (128, 512)],
}


async def _active_call(runtime: Runtime, calls, live):
    """The one of a linear's alternative dispatches that runs at this row count, and its sizing."""
    for call in calls:
        spec, _ = await runtime.pipelines.get(call.kernel)
        sizing = call.sizing(spec, live)
        if runs_at(sizing.workgroups):
            return call, sizing
    raise ValueError(f"no active dispatch among {[c.route for c in calls]}")


async def _measure(runtime: Runtime, plan: Plan, trials: int) -> int:
    samples = []
    for _ in range(trials):
        execution = await plan.replay(profile=True)
        samples.append(statistics.median(row.ns for row in execution.rows))
    return int(statistics.median(samples))


async def _stream_gbps(runtime: Runtime, nbytes: int, repeats: int, trials: int, sink_tensor) -> float:
    nbytes = max(16, nbytes // 16 * 16)
    data = await runtime.tensors.allocate(f"bench.stream.{nbytes}", (nbytes // 4,), "u32")
    workgroups = max(1, min(65535, -(-nbytes // (16 * 256))))     # one vec4 per invocation until the cap
    plan = Plan(runtime, f"bench.stream.{nbytes}")
    for _ in range(repeats):
        await plan.add(stream_read(data=data, sink=sink_tensor, workgroups=workgroups))
    plan.record()
    ns = await _measure(runtime, plan, trials)
    plan.release()
    runtime.tensors.release(data.name)
    return nbytes / ns if ns else float("nan")


async def run_kernel_bench(runtime: Runtime, *, preset: str = "decode", repeats: int = 10, trials: int = 5,
                           seed: int = 9, progress=None) -> dict:
    if preset not in BENCH_PRESETS:
        raise ValueError(f"unknown bench preset {preset!r}; known: {sorted(BENCH_PRESETS)}")
    device = runtime.device
    if "timestamp-query" not in device.adapter.device_features:
        raise RuntimeError("bench kernels needs the 'timestamp-query' feature, which this adapter lacks")
    sink_tensor = await runtime.tensors.allocate("bench.sink", (65535,), "u32")
    limit = device.adapter.limits.get("maxStorageBufferBindingSize", _STREAM_BIG)
    big = min(_STREAM_BIG, limit // 16 * 16)
    while True:
        try:
            stream_big = await _stream_gbps(runtime, big, repeats, trials, sink_tensor)
            break
        except GpuOutOfMemory:
            if big <= _STREAM_MIN:
                raise
            big //= 2           # CPU adapters (SwiftShader) can refuse 1 GiB: measure a smaller buffer
    rows = []
    for index, case in enumerate(BENCH_PRESETS[preset]):
        if progress:
            progress(f"[{index + 1}/{len(BENCH_PRESETS[preset])}] {case.name}")
        tensors = runtime.tensors
        packed = await tensors.allocate("bench.packed", (case.n * case.k // 8,), "u32")
        scales = await tensors.allocate("bench.scales", (case.k // case.group_size * case.n,))
        weight = Q4Weight(packed, scales, case.k, case.n, case.group_size)
        x = await tensors.allocate("bench.x", (case.rows, case.k))
        out = await tensors.allocate("bench.out", (case.rows, case.n))
        setup = Plan(runtime, "bench.setup")
        await setup.add(q4_quantize(weight=weight, synth=(WEIGHT_RANGE, seed, index)))
        await setup.add(fill_uniform(target=x, value_range=ACT_RANGE, seed=seed, stream=1000 + index))
        setup.record()
        await setup.replay()
        calls = q4_linear(x=x, weight=weight, out=out, adapter=device.adapter, rows=case.rows,
                          gemv_shape=case.gemv_shape, force_route=case.route)
        plan = Plan(runtime, f"bench.{case.name}")
        active, moved = await _active_call(runtime, calls, plan.live)
        for _ in range(repeats):
            await plan.add(active)
        plan.record()
        ns = await _measure(runtime, plan, trials)
        weight_bytes = case.n * case.k // 2 + 4 * case.n * case.k // case.group_size
        stream_same = await _stream_gbps(runtime, weight_bytes, repeats, trials, sink_tensor)
        gbps = moved.bytes_moved / ns if ns else float("nan")
        rows.append({"case": case.name + (f"[{case.gemv_shape}]" if case.gemv_shape else ""),
                     "kernel": active.kernel, "route": active.route, "k": case.k,
                     "n": case.n, "rows": case.rows, "bytes": moved.bytes_moved, "flops": moved.flops, "ns": ns,
                     "gbps": gbps, "gflops": moved.flops / ns if ns else float("nan"),
                     "stream_gbps_same_bytes": stream_same, "ratio_same_bytes": gbps / stream_same,
                     "ratio_big_stream": gbps / stream_big})
        for p in (plan, setup):
            p.release()
        for t in (packed, scales, x, out):
            tensors.release(t.name)
    runtime.tensors.release(sink_tensor.name)
    return {"suite": "kernel_bench", "adapter": device.adapter.to_json(), "preset": preset, "repeats": repeats,
            "trials": trials, "stream_big_bytes": big, "stream_big_gbps": stream_big, "rows": rows, "passed": True}
