"""Kernel benchmark: GPU time per kernel and shape from timestamp queries, as GB/s and GFLOP/s and
as a fraction of a streaming read measured in the same run (of the same byte count, and of a
large buffer). Runs unchanged in the page and natively; prints nothing itself.

Prefill (M > 1) cases are timed per profiled pass on the f32 GEMMs and on the DP4A GEMM (int8
activations of every row, quantized once; that quantization is timed on its own as `quantize_ns`),
beside two arithmetic probes measured in the same run (chains of dot4I8Packed and of f32 fma with no
memory traffic, ops/probe.py): the ceilings the GEMMs' TOPS and TFLOP/s are read against.

Two measurements per decode (M = 1) case:
- pass: the dispatch repeated `repeats` times on one weight, one profiled pass each, median over
  `trials` replays. Small weights stay in L2 across repeats, and each pass carries a fixed cost.
- chain (decode-like): one pass of back-to-back dispatches over enough distinct copies of the weight
  (`chain_bytes` in all, several times any L2) that every dispatch reads from memory, timed by one
  pair of timestamps around the pass, divided by the dispatch count. The same for a streaming read of
  the same byte count per dispatch: the ratio of the two is what the GEMV leaves on the table.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from ..gpu.device import GpuOutOfMemory
from ..kernels import kernel
from ..ops.attention import KVCache
from ..ops.int8_activations import Int8Activations, quantize_activations, rms_norm_int8x
from ..ops.norm import rms_norm
from ..ops.probe import arith_probe, PROBE_KINDS, probe_for, probe_unavailable
from ..ops.q4 import Q4Weight, q4_quantize, q4_scales_rows, q4_weight_bytes, stream_read
from ..ops.q4_linear import (NormPrologue, QKVRope, gemm_dp4a_shapes, gemm_sgmat_f16_shapes, gemm_sgmat_shapes,
                             gemv_group_size, gemv_int8_max_k, gemv_shapes, rows_fit, split_k_room, q4_linear,
                             q4_linear_glu, q4_linear_qkv)
from ..ops.swiglu import swiglu
from ..ops.synth import fill_uniform
from ..models.config import LLAMA_3_2_1B, QWEN3_0_6B, TINY, ModelConfig
from ..models.decoder import DOWN_DECODE_GROUP
from ..plan import Plan
from ..routing import RouteUnavailable
from ..runtime import Runtime
from .outcome import NOT_CHECKED, no_progress
from .q4_linear import ACT_RANGE, NORM_EPS, NORM_RANGE, WEIGHT_RANGE

__all__ = ["BenchCase", "BENCH_PRESETS", "run_kernel_bench", "stream_chain_ns"]

_STREAM_BIG = 1 << 30
_STREAM_MIN = 64 << 20
CHAIN_BYTES = 384 << 20         # weight bytes per chain: over 7x the H200's 50 MB L2
_CHAIN_MAX = 256                # dispatches per chain
WARM_UP_SECONDS = 0.05          # of untimed replays before each measurement
TRIAL_LEAD_SECONDS = 0.005      # queued ahead of each timed replay


@dataclass(frozen=True)
class BenchCase:
    name: str
    k: int
    n: int
    rows: int
    route: str | None = None            # None: whatever the guards choose
    gemv_shape: str | None = None        # None: the route's choice
    group_size: int = 64
    int8: bool = False                  # int8 activations (q4_gemv_int8)
    int8x: bool = False                 # pre-quantized int8 activations (q4_gemv_int8x; quantized once, untimed)
    glu: bool = False                   # int8x: the fused gate/up + SwiGLU over a [2N, K] weight
    glu_q8: bool = False                # glu: writing its output quantized too (q4_gemv_int8x_glu_q8)
    norm: bool = False                  # glu_q8: making its activations too, the RMSNorm as a prologue (_norm)
    scales_rows: bool = False           # int8x: the weight carries a row-major scale copy (the _sr variants)
    dp4a: bool = False                  # int8 activations of every row (quantized once, timed apart): an int8 GEMM
    gemm_shape: str | None = None       # dp4a or half: pin the GEMM's tile (None: the route's choice)
    half: bool = False                  # f32 x, the prefill may take the f16 subgroup-matrix GEMM
    split_k: bool = False               # dp4a: a partials scratch, so the int8 GEMM may split K (its reduce timed too)
    rope: ModelConfig | None = None     # int8x: this model's decode QKV applying RoPE and writing a KV cache
                                        # (q4_gemv_int8x_qkv_rope, its q/k norm too where the model has one)

    @property
    def weight_rows(self) -> int:
        return 2 * self.n if self.glu else self.n

    @property
    def weight_bytes(self) -> int:
        return q4_weight_bytes(self.k, self.weight_rows, self.group_size)


def _fits(gemv_shape: str | None, k: int) -> bool:
    """An int8 variant holds at most its MAXK activations in its workgroup memory."""
    return gemv_shape not in gemv_shapes("int8") or k <= gemv_int8_max_k(gemv_shape)


def _decode(prefix: str, shapes, routes=(None,), gemv_shapes=(None,), int8=False, int8x=False,
            scales_rows=False) -> list[BenchCase]:
    suffix = (".int8x" if int8x else ".int8" if int8 else "") + (".rows" if scales_rows else "")
    return [BenchCase(f"{prefix}.{name}{suffix}", k, n, 1, route, g, int8=int8, int8x=int8x, scales_rows=scales_rows)
            for name, k, n in shapes for route in routes for g in gemv_shapes if _fits(g, k)]


# One case per distinct projection shape of each model ("q_o" where q and o are both square), plus
# Llama's QKV as one weight; the bench's case names keep the short model prefixes.
_LLAMA = LLAMA_3_2_1B.linear_shapes()
_LLAMA.insert(2, ("qkv_as_one", LLAMA_3_2_1B.hidden, LLAMA_3_2_1B.q_dim + 2 * LLAMA_3_2_1B.kv_dim))
_QWEN = QWEN3_0_6B.linear_shapes()
_LLAMA_GATE_UP = LLAMA_3_2_1B.linears()["gate_up"]
_QWEN_GATE_UP = QWEN3_0_6B.linears()["gate_up"]


def _rope_shapes_for(config: ModelConfig) -> list[str]:
    """The RoPE QKV variants (_norm_sr, as the decoders run them) whose workgroups fit this model's heads:
    whole heads, or without a q/k norm an equal part of one."""
    kind = f"_qkv_rope_{config.rope_layout}{'_qknorm' * config.qk_norm}_norm_sr"
    def rows(shape: str) -> int:
        values = kernel(f"q4gsw_gemv_i8x{kind}_sg_{shape}").template_values
        return values["R"] * values["RG"]
    return [shape for shape in gemv_shapes("int8x" + kind)
            if rows_fit(rows(shape), config.head_dim, parts=not config.qk_norm)]


_F32_NEXT = ("r4s2", "w8u4", "r4s2m", "r2s2m", "w4u4s2m", "w8u2m")      # the first session's picks and the masked ones
_INT8_G64 = tuple(s for s in gemv_shapes("int8") if gemv_group_size(s) == 64)
BENCH_PRESETS = {
    "tiny": [BenchCase("tiny.gemv", 256, 96, 1), BenchCase("tiny.gemv.int8", 256, 96, 1, int8=True),
             BenchCase("tiny.gemv.int8x", 256, 96, 1, int8x=True),
             BenchCase("tiny.gemm", 256, 96, 9), BenchCase("tiny.gemm.dp4a", 256, 96, 9, dp4a=True)],
    "decode": _decode("llama", _LLAMA) + _decode("qwen", _QWEN),
    "decode_int8": _decode("llama", _LLAMA, int8=True) + _decode("qwen", _QWEN, int8=True),
    # The Llama shapes under the f32 variants the route picks today, the masked ones, and the int8 ones.
    "gemv_next": (_decode("llama", _LLAMA, gemv_shapes=_F32_NEXT)
                  + _decode("llama", _LLAMA, gemv_shapes=_INT8_G64, int8=True)),
    # The pre-quantized int8 route as the guards choose it, and its fused gate/up + SwiGLU.
    "decode_int8x": (_decode("llama", _LLAMA, int8x=True) + _decode("qwen", _QWEN, int8x=True)
                     + [BenchCase(f"{prefix}.gate_up_glu.int8x", k, n, 1, int8x=True, glu=True)
                        for prefix, (k, n) in (("llama", _LLAMA_GATE_UP), ("qwen", _QWEN_GATE_UP))]
                     + _decode("llama", _LLAMA, int8x=True, scales_rows=True)
                     + [BenchCase("llama.gate_up_glu.int8x.rows", *_LLAMA_GATE_UP, 1, int8x=True, glu=True, scales_rows=True)]
                     + [BenchCase(f"{prefix}.gate_up_glu_q8.int8x.rows", k, n, 1, int8x=True, glu=True, glu_q8=True,
                                  scales_rows=True)
                        for prefix, (k, n) in (("llama", _LLAMA_GATE_UP), ("qwen", _QWEN_GATE_UP))]),
    # The pre-quantized int8 GEMV's variants at the Llama shapes, beside the fused int8 route's picks.
    "gemv_int8x": (_decode("llama", _LLAMA, gemv_shapes=gemv_shapes("int8x"), int8x=True)
                   + _decode("llama", _LLAMA, gemv_shapes=gemv_shapes("int8x_sr"), int8x=True, scales_rows=True)
                   + [BenchCase("llama.gate_up_glu.int8x", *_LLAMA_GATE_UP, 1, gemv_shape=g, int8x=True, glu=True)
                      for g in gemv_shapes("int8x_glu")]
                   + [BenchCase("llama.gate_up_glu.int8x.rows", *_LLAMA_GATE_UP, 1, gemv_shape=g, int8x=True, glu=True,
                                scales_rows=True) for g in gemv_shapes("int8x_glu_sr")]
                   + [BenchCase("llama.gate_up_glu_q8.int8x.rows", *_LLAMA_GATE_UP, 1, gemv_shape=g, int8x=True, glu=True,
                                glu_q8=True, scales_rows=True) for g in gemv_shapes("int8x_glu_q8_sr")]
                   + [BenchCase("llama.gate_up_glu_q8_norm.int8x.rows", *_LLAMA_GATE_UP, 1, gemv_shape=g, int8x=True,
                                glu=True, glu_q8=True, norm=True, scales_rows=True)
                      for g in gemv_shapes("int8x_glu_q8_norm_sr")]
                   + _decode("llama", _LLAMA, int8=True)),
    # The latency-bound Qwen3 shapes (K 1024 to 3072) and its fused gate/up under the row-major copy's variants.
    "gemv_int8x_qwen": (_decode("qwen", [s for s in _QWEN if s[0] in ("q", "kv", "o", "down")],
                                gemv_shapes=gemv_shapes("int8x_sr"), int8x=True, scales_rows=True)
                        + [BenchCase("qwen.gate_up_glu.int8x.rows", *_QWEN_GATE_UP, 1, gemv_shape=g, int8x=True, glu=True,
                                     scales_rows=True) for g in gemv_shapes("int8x_glu_sr")]
                        + [BenchCase("qwen.gate_up_glu_q8.int8x.rows", *_QWEN_GATE_UP, 1, gemv_shape=g, int8x=True,
                                     glu=True, glu_q8=True, scales_rows=True) for g in gemv_shapes("int8x_glu_q8_sr")]
                        + [BenchCase("qwen.gate_up_glu_q8_norm.int8x.rows", *_QWEN_GATE_UP, 1, gemv_shape=g, int8x=True,
                                     glu=True, glu_q8=True, norm=True, scales_rows=True)
                           for g in gemv_shapes("int8x_glu_q8_norm_sr")]),
    # The decode QKV applying RoPE and writing the KV cache as the decoders run it (the RMSNorm as its
    # prologue, the row-major scale copy; Qwen3's q/k norm), every variant, beside the plain QKV GEMV.
    "qkv_rope": ([BenchCase(f"{prefix}.qkv_rope", config.hidden, config.q_dim + 2 * config.kv_dim, 1, gemv_shape=g,
                            int8x=True, norm=True, scales_rows=True, rope=config)
                  for prefix, config in (("llama", LLAMA_3_2_1B), ("qwen", QWEN3_0_6B))
                  for g in _rope_shapes_for(config)]
                 + [BenchCase(f"{prefix}.qkv_as_one.int8x.rows", config.hidden, config.q_dim + 2 * config.kv_dim, 1,
                              int8x=True, scales_rows=True)
                    for prefix, config in (("llama", LLAMA_3_2_1B), ("qwen", QWEN3_0_6B))]),
    "gemv_variants": (_decode("llama", _LLAMA, gemv_shapes=gemv_shapes("f32"))
                      + _decode("qwen", _QWEN, gemv_shapes=gemv_shapes("f32"))),
    "gemv_vocab": [BenchCase(f"{prefix}.lm_head", k, n, 1, None, g) for prefix, k, n in
                   (("llama", *LLAMA_3_2_1B.linears()["lm_head"]), ("qwen", *QWEN3_0_6B.linears()["lm_head"]))
                   for g in ("r8", "w8u4", "w4u8", "w16u2", "w16u4", "w8u8")],
    # Llama's projections at 128 and 512 rows on the route the guards choose for f32 activations, and on
    # the DP4A GEMM (int8 activations of every row).
    "prefill": [BenchCase(f"llama.{name}.m{m}{suffix}", k, n, m, route=route,
                          dp4a=route in ("q4_gemm_dp4a", "q4_gemm_sgmat_i8"), half=route == "q4_gemm_sgmat_f16")
                for name, k, n in _LLAMA if name != "lm_head" for m in (128, 512)
                for suffix, route in (("", None), (".dp4a", "q4_gemm_dp4a"), (".sgmat", "q4_gemm_sgmat_i8"),
                                      (".f16", "q4_gemm_sgmat_f16"))]
               # the int8 GEMMs splitting K where their grid is small, the reduce pass included
               + [BenchCase(f"llama.{name}.m{m}.{gemm}.split_k", k, n, m, route=route, dp4a=True, split_k=True)
                  for name, k, n in _LLAMA if name != "lm_head" for m in (128, 512)
                  for gemm, route in (("dp4a", "q4_gemm_dp4a"), ("sgmat", "q4_gemm_sgmat_i8"))],
    # The DP4A GEMM's tiles at the same shapes.
    "prefill_dp4a": [BenchCase(f"llama.{name}.m{m}.dp4a", k, n, m, dp4a=True, gemm_shape=tile)
                     for name, k, n in _LLAMA if name != "lm_head" for m in (128, 512) for tile in gemm_dp4a_shapes()],
    # The subgroup-matrix GEMM's tiles at the same shapes.
    "prefill_sgmat": [BenchCase(f"llama.{name}.m{m}.sgmat", k, n, m, route="q4_gemm_sgmat_i8", dp4a=True,
                                gemm_shape=tile)
                      for name, k, n in _LLAMA if name != "lm_head" for m in (128, 512) for tile in gemm_sgmat_shapes()],
    # The f16 subgroup-matrix GEMM's tiles at the same shapes (shader-f16 and the f16 config: the f16 flag).
    "prefill_sgmat_f16": [BenchCase(f"llama.{name}.m{m}.f16", k, n, m, route="q4_gemm_sgmat_f16", half=True,
                                    gemm_shape=tile)
                          for name, k, n in _LLAMA if name != "lm_head" for m in (128, 512)
                          for tile in gemm_sgmat_f16_shapes()],
}


def _linear(case: BenchCase, x, weight: Q4Weight, out, adapter, rows: int, int8, int8_out=None, partials=None,
            norm: NormPrologue | None = None, rope: "_RopeTarget | None" = None):
    if rope is not None:
        return q4_linear_qkv(x=x, weight=weight, outs=rope.outs, adapter=adapter, tokens=rows, int8=int8,
                             gemv_shape=case.gemv_shape, rope=rope.rope, norm=norm)
    if case.glu:
        return q4_linear_glu(act=int8, weight=weight, out=out, adapter=adapter, tokens=rows, gemv_shape=case.gemv_shape,
                             int8_out=int8_out, norm=norm)
    return q4_linear(x=x, weight=weight, out=out, adapter=adapter, tokens=rows, gemv_shape=case.gemv_shape,
                     gemm_shape=case.gemm_shape, force=case.route, int8=int8, half=case.half, partials=partials)


@dataclass(frozen=True)
class _RopeTarget:
    """What a RoPE QKV case writes: q, k and v (the plain route's), the rotated q and a KV cache."""
    outs: tuple
    rope: QKVRope
    owned: tuple


_ROPE_POSITION, _ROPE_CAPACITY = 3, 8          # one token at a small position (the time does not depend on it)


async def _rope_target(runtime: Runtime, config: ModelConfig, seed: int, stream: int) -> tuple[_RopeTarget, list]:
    """The outputs, table, cache and q/k norm weights of a RoPE QKV case, and the calls that fill them."""
    tensors, dim = runtime.tensors, config.head_dim
    outs = (await tensors.allocate("bench.q", (1, config.q_dim)), await tensors.allocate("bench.k", (1, config.kv_dim)),
            await tensors.allocate("bench.v", (1, config.kv_dim)))
    q_out = await tensors.allocate("bench.q_rotated", (1, config.heads, dim))
    table = await tensors.allocate("bench.rope_table", (_ROPE_CAPACITY, dim // 2, 2))
    cache = await KVCache.allocate(runtime, "bench.cache", capacity=_ROPE_CAPACITY, kv_heads=config.kv_heads,
                                   head_dim=dim)
    fills = [fill_uniform(target=table, value_range=ACT_RANGE, seed=seed, stream=stream)]     # (any finite rotation)
    qk_norm = None
    if config.qk_norm:
        qk_norm = (await tensors.allocate("bench.q_norm", (dim,)), await tensors.allocate("bench.k_norm", (dim,)))
        fills += [fill_uniform(target=w, value_range=NORM_RANGE, seed=seed, stream=stream + 1 + i)
                  for i, w in enumerate(qk_norm)]
    rope = QKVRope(q_out=q_out, table=table, cache=cache, layout=config.rope_layout, pos=_ROPE_POSITION,
                   qk_norm=qk_norm, eps=config.norm_eps)
    owned = (*outs, q_out, table, cache.k, cache.v, cache.offset, *(qk_norm or ()))
    return _RopeTarget(outs, rope, owned), fills


def _label(case: BenchCase) -> str:
    pinned = case.gemv_shape or case.gemm_shape
    return case.name + (f"[{pinned}]" if pinned else "")


async def _active_calls(runtime: Runtime, op, tokens: int, live):
    """The dispatches of an op that run at this token count (a split-K GEMM and its reduce), and the first's
    sizing (for the bytes it moves)."""
    calls = op.at(tokens)
    spec, _ = await runtime.pipelines.get(calls[0].kernel)
    return calls, calls[0].sizing(spec, live)


async def _active_call(runtime: Runtime, op, tokens: int, live):
    """The one dispatch of an op that runs at this token count, and its sizing (for the bytes it moves)."""
    (call,) = op.at(tokens)
    spec, _ = await runtime.pipelines.get(call.kernel)
    return call, call.sizing(spec, live)


async def _run_once(runtime: Runtime, label: str, calls) -> None:
    """Record and run a one-off plan (weights, inputs: what a measurement reads), then free it."""
    plan = Plan(runtime, label)
    for call in calls:
        await plan.add(call)
    plan.record()
    await plan.replay()
    plan.release()


async def _queue(plan: Plan, seconds: float, per_replay: float) -> None:
    """About `seconds` of back-to-back replays, submitted without waiting, so the GPU has no idle gap
    (at most 2,000: short plans are then bound by the host's submissions)."""
    for _ in range(max(1, min(2000, int(seconds / per_replay)))):
        await plan.replay(wait=False)


async def _warm_up(plan: Plan) -> float:
    """Keep the GPU busy before measuring: it drops its clocks whenever the host sets up the next case
    (logged on the H200: SM clocks fall from 1980 to 345-900 MHz between measurements, and short
    kernels then run 2-4x slower). Returns one replay's GPU time (its span, where the adapter has
    timestamps), by which the queues are counted: the host's wall time of a replay, used before, grows
    over a long browser run, and the queues it counted kept the GPU busy for ever less of their time."""
    started = time.perf_counter()
    timestamps = "timestamp-query" in plan.runtime.device.adapter.device_features
    span_ns = (await plan.replay(profile="span")).span_ns if timestamps else None
    per_replay = max(span_ns / 1e9 if span_ns else time.perf_counter() - started, 1e-6)
    await _queue(plan, WARM_UP_SECONDS, per_replay)
    return per_replay


async def _measure(plan: Plan, trials: int) -> int:
    """Median ns of a plan's dispatches (one kernel repeated): over a replay's profiled passes, then
    over `trials` replays, each queued behind a few ms of untimed replays (sustained load, as in a
    decode loop)."""
    per_replay = await _warm_up(plan)
    samples = []
    for _ in range(trials):
        await _queue(plan, TRIAL_LEAD_SECONDS, per_replay)
        execution = await plan.replay(profile=True)
        samples.append(statistics.median(row.ns for row in execution.rows))
    return int(statistics.median(samples))


async def _measure_span(plan: Plan, trials: int) -> float:
    """Median over `trials` replays of the whole plan's GPU time in one pass, per dispatch (each queued
    behind a few ms of untimed replays, like _measure)."""
    per_replay = await _warm_up(plan)
    spans = []
    for _ in range(trials):
        await _queue(plan, TRIAL_LEAD_SECONDS, per_replay)
        spans.append((await plan.replay(profile="span")).span_ns)
    return statistics.median(spans) / len(plan)


async def _stream_ns(runtime: Runtime, pool, ranges, trials: int, sink_tensor, *, span: bool, store: bool = False) -> float:
    """A streaming read of each (offset, nbytes) range of the pool buffer, in one plan: per dispatch,
    the median profiled pass (span=False) or the one-pass chain time per dispatch (span=True);
    `store`: each workgroup also writes back (stream_read_store)."""
    plan = Plan(runtime, "bench.stream")
    for offset, nbytes in ranges:
        await plan.add(stream_read(data=pool, sink=sink_tensor, nbytes=nbytes // 16 * 16, offset=offset, store=store))
    plan.record()
    ns = await _measure_span(plan, trials) if span else await _measure(plan, trials)
    plan.release()
    return ns


async def _stream_pool(tensors, name: str, size: int):
    """A u32 pool of `size` bytes (a multiple of 16) for streaming reads, halved until the adapter gives it
    (CPU adapters, SwiftShader, can refuse 1 GiB), down to _STREAM_MIN."""
    while True:
        try:
            return await tensors.allocate(name, (size // 4,), "u32")
        except GpuOutOfMemory:
            if size <= _STREAM_MIN:
                raise
            size //= 2


_CHAIN_POOL = 256 << 20          # stream_chain_ns's regions: past the largest L2, as a step's weights are


async def stream_chain_ns(runtime: Runtime, byte_counts, trials: int) -> float:
    """A chain of dependent dispatches' floor: one streaming read per count (at least 16 bytes), back to back
    in one pass, over consecutive regions of a pool (wrapping at _CHAIN_POOL, or less where the adapter
    refuses it), so each reads memory the one before did not: the whole chain's median GPU ns."""
    counts = [max(16, count // 16 * 16) for count in byte_counts]
    limit = runtime.device.adapter.limits.get("maxStorageBufferBindingSize", _CHAIN_POOL)
    size = min(_CHAIN_POOL, sum(counts), limit // 16 * 16)
    tensors = runtime.tensors
    sink = await tensors.allocate("bench.chain_sink", (65535,), "u32")
    try:
        pool = await _stream_pool(tensors, "bench.chain_pool", size)
        try:
            ranges = _chain_ranges(counts, pool.nbytes)
            return len(ranges) * await _stream_ns(runtime, pool, ranges, trials, sink, span=True)
        finally:
            tensors.release(pool.name)
    finally:
        tensors.release(sink.name)


def _chain_ranges(counts: list[int], size: int) -> list[tuple[int, int]]:
    """(offset, bytes) per count: consecutive regions of a pool of `size` bytes, back to its start where the
    next would pass its end; a count larger than the pool reads all of it."""
    ranges, offset = [], 0
    for count in counts:
        count = min(count, size)
        offset = 0 if offset + count > size else offset
        ranges.append((offset, count))
        offset += count
    return ranges


def _copies(case: BenchCase, chain_bytes: int, pool_bytes: int, limit: int) -> int:
    """Weight copies for a case's decode chain: what chain_bytes asks, within _CHAIN_MAX, the binding
    limit (one stacked matrix) and the stream pool (the streaming chain reads as many bytes)."""
    if case.rows != 1 or chain_bytes <= 0:
        return 1
    packed = case.weight_rows * case.k // 2
    return max(1, min(_CHAIN_MAX, -(-chain_bytes // case.weight_bytes), limit // packed,
                      pool_bytes // case.weight_bytes))


async def run_kernel_bench(runtime: Runtime, *, preset: str = "decode", repeats: int = 10, trials: int = 5,
                           seed: int = 9, chain_bytes: int = CHAIN_BYTES, only: list[str] | None = None,
                           progress=no_progress) -> dict:
    """Buffers are allocated once per run and reused by every case (browsers free destroyed GPU memory
    lazily: allocating hundreds of MB per case made later cases of long runs 2-3x slower in Chromium)."""
    from .attention_bench import ATTENTION_PRESETS, run_attention_bench

    if preset not in BENCH_PRESETS and preset not in STEP_PRESETS and preset not in ATTENTION_PRESETS:
        raise ValueError(f"unknown bench preset {preset!r}; known: "
                         f"{sorted(BENCH_PRESETS) + sorted(STEP_PRESETS) + sorted(ATTENTION_PRESETS)}")
    device, tensors = runtime.device, runtime.tensors
    if "timestamp-query" not in device.adapter.device_features:
        raise RuntimeError("bench kernels needs the 'timestamp-query' feature, which this adapter lacks")
    sink_tensor = await tensors.allocate("bench.sink", (65535,), "u32")
    limit = device.adapter.limits.get("maxStorageBufferBindingSize", _STREAM_BIG)
    pool = await _stream_pool(tensors, "bench.stream_pool", min(_STREAM_BIG, limit // 16 * 16))
    big = pool.nbytes       # the stream pool is also the big streaming read
    big_ns = await _stream_ns(runtime, pool, [(0, big)] * repeats, trials, sink_tensor, span=False)
    stream_big = big / big_ns

    def report(**rest) -> dict:
        return {"suite": "kernel_bench", "adapter": device.adapter.to_json(), "preset": preset, "repeats": repeats,
                "trials": trials, "stream_big_bytes": big, "stream_big_gbps": stream_big, **rest,
                "result": NOT_CHECKED}      # a benchmark measures; it checks nothing

    if preset in STEP_PRESETS:
        progress("kernel bench decode step", 0, 1)
        step = await _decode_step(runtime, STEP_PRESETS[preset], trials, seed, sink_tensor, pool, stream_big)
        progress("kernel bench decode step", 1, 1)
        for tensor in (pool, sink_tensor):
            tensors.release(tensor.name)
        return report(rows=[], step=step)
    if preset in ATTENTION_PRESETS:
        cases = [c for c in ATTENTION_PRESETS[preset] if not only or any(o in c.name for o in only)]
        if not cases:
            raise ValueError(f"no case of preset {preset!r} matches {only}; cases: "
                             f"{[c.name for c in ATTENTION_PRESETS[preset]]}")
        rows = await run_attention_bench(runtime, cases, trials=trials, seed=seed, sink_tensor=sink_tensor, pool=pool,
                                         stream_big=stream_big, progress=progress)
        for tensor in (pool, sink_tensor):
            tensors.release(tensor.name)
        return report(chain_bytes=0, rows=rows)
    cases = [c for c in BENCH_PRESETS[preset] if not only or any(o in _label(c) for o in only)]
    if not cases:
        raise ValueError(f"no case of preset {preset!r} matches {only}; cases: {[_label(c) for c in BENCH_PRESETS[preset]]}")
    copies = [_copies(case, chain_bytes, big, limit) for case in cases]
    packed_pool = await tensors.allocate("bench.packed", (max(c * x.weight_rows * x.k // 8 for c, x in zip(copies, cases)),),
                                         "u32")
    scales_count = max(c * x.weight_rows * x.k // x.group_size for c, x in zip(copies, cases))
    scales_pool = await tensors.allocate("bench.scales", (scales_count,))
    rows_pool = await tensors.allocate("bench.scales_rows", (scales_count,)) if any(c.scales_rows for c in cases) \
        else None
    rows = []
    for index, (case, count) in enumerate(zip(cases, copies)):
        progress("kernel bench cases", index, len(cases))
        weight_bytes = case.weight_bytes
        weight = Q4Weight(packed_pool, scales_pool, case.k, case.weight_rows * count, case.group_size,
                          scales_rows=rows_pool if case.scales_rows else None)
        x = await tensors.allocate("bench.x", (case.rows, case.k))
        out = await tensors.allocate("bench.out", (case.rows, case.n))
        setup = [q4_quantize(weight=weight, synth=(WEIGHT_RANGE, seed, index))]
        if case.scales_rows:
            setup.append(q4_scales_rows(weight))
        setup.append(fill_uniform(target=x, value_range=ACT_RANGE, seed=seed, stream=1000 + index))
        norm_weight, norm, rope = None, None, None
        if case.rope is not None:
            rope, fills = await _rope_target(runtime, case.rope, seed, 3000 + 4 * index)
            setup += fills
        if case.norm:           # x is then the residual row the GEMV's prologue normalizes
            norm_weight = await tensors.allocate("bench.norm_weight", (case.k,))
            setup.append(fill_uniform(target=norm_weight, value_range=NORM_RANGE, seed=seed, stream=2000 + index))
            norm = NormPrologue(x=x, weight=norm_weight, eps=NORM_EPS)
        int8 = case.int8
        if case.int8x or case.dp4a:
            int8 = await Int8Activations.allocate(runtime, x, case.group_size, rows=case.rows if case.dp4a else 1)
            setup.append(quantize_activations(int8, tokens=case.rows))
        await _run_once(runtime, "bench.setup", setup)
        # (in the groups a decode step's down reads: 32-row workgroups then hold whole groups)
        out_q8 = await Int8Activations.allocate(runtime, out, DOWN_DECODE_GROUP) if case.glu_q8 else None
        partials = await tensors.allocate("bench.partials", (split_k_room(),)) if case.split_k else None
        owned = (x, out, *(int8.tensors if case.int8x or case.dp4a else ()), *(out_q8.tensors if out_q8 else ()),
                 *((partials,) if partials else ()), *((norm_weight,) if norm_weight else ()),
                 *(rope.owned if rope else ()))
        try:
            op = _linear(case, x, weight.rows(0, case.weight_rows), out, device.adapter, case.rows, int8, out_q8,
                         partials, norm, rope)
        except RouteUnavailable as error:       # a forced route this adapter lacks: said, not measured
            rows.append({"case": _label(case), "route": case.route, "k": case.k, "n": case.n, "rows": case.rows,
                         "skipped": str(error)})
            for tensor in owned:
                tensors.release(tensor.name)
            continue
        plan = Plan(runtime, f"bench.{case.name}")
        calls, moved = await _active_calls(runtime, op, case.rows, plan.live)
        main = calls[0]
        for _ in range(repeats):
            for call in calls:
                await plan.add(call)
        plan.record()
        ns = await _measure(plan, trials)
        plan.release()
        # (a CPU adapter's smaller pool may hold less than a vocab-sized weight: stream what it holds)
        stream_bytes = min(weight_bytes, pool.nbytes) // 16 * 16
        stream_same = stream_bytes / await _stream_ns(runtime, pool, [(0, stream_bytes)] * repeats, trials,
                                                      sink_tensor, span=False)
        gbps = moved.bytes_moved / ns if ns else float("nan")
        row = {"case": _label(case),
               "kernel": main.kernel, "route": main.route, "k": case.k,
               "n": case.n, "rows": case.rows, "bytes": moved.bytes_moved, "flops": moved.flops, "ns": ns,
               "gbps": gbps, "gflops": moved.flops / ns if ns else float("nan"),
               "stream_gbps_same_bytes": stream_same, "ratio_same_bytes": gbps / stream_same,
               "ratio_big_stream": gbps / stream_big}
        if case.rows == 1 and chain_bytes > 0:
            row.update(await _chain_row(runtime, case, weight, x, out, (int8, out_q8, partials, norm, rope), count,
                                        trials, sink_tensor, pool, moved.bytes_moved, stream_big))
        if case.dp4a:
            row["quantize_ns"] = await _measure_op(runtime, quantize_activations(int8, tokens=case.rows), repeats, trials)
        rows.append(row)
        for tensor in owned:
            tensors.release(tensor.name)
    progress("kernel bench cases", len(cases), len(cases))
    probes = await _probes(runtime, sink_tensor, repeats, trials) if any(c.rows > 1 for c in cases) else None
    for row in rows:
        if probes and row["rows"] > 1 and "skipped" not in row:
            row["probe"] = probe_for(row["route"], probes)
    for tensor in (packed_pool, scales_pool, rows_pool, pool, sink_tensor):
        if tensor is not None:
            tensors.release(tensor.name)
    return report(chain_bytes=chain_bytes, rows=rows, **({"probes": probes} if probes else {}))


async def _measure_op(runtime: Runtime, op, repeats: int, trials: int) -> int:
    """Median ns of a one-dispatch op's profiled pass (as the cases are timed)."""
    plan = Plan(runtime, f"bench.{op.name}")
    for _ in range(repeats):
        await plan.add(op.call)
    plan.record()
    ns = await _measure(plan, trials)
    plan.release()
    return ns


_PROBE_MIN_NS = 500_000         # a probe grows until one dispatch takes this long (or reaches its largest size)


async def _probes(runtime: Runtime, sink_tensor, repeats: int, trials: int) -> dict:
    """The arithmetic ceilings: per probe kind, its ops per ns (= T ops per s) at a size grown from a
    small one (64 workgroups, 16 iterations: quick on a CPU adapter) by doubling the workgroups to 4096
    (enough to fill any GPU), then the iterations, until a dispatch takes _PROBE_MIN_NS."""
    probes = {}
    for kind in PROBE_KINDS:
        if probe_unavailable(kind, runtime.device.adapter):
            continue
        workgroups, iters = 64, 16
        while True:
            op = arith_probe(kind=kind, sink=sink_tensor, workgroups=workgroups, iters=iters)
            ns = await _measure_op(runtime, op, repeats, trials)
            if ns >= _PROBE_MIN_NS or iters >= 4096:
                break
            if workgroups < 4096:
                workgroups *= 2
            else:
                iters *= 2
        spec, _ = await runtime.pipelines.get(op.call.kernel)
        ops = op.call.sizing(spec, {}).flops
        probes[kind] = {"workgroups": workgroups, "iters": iters, "ops": ops, "ns": ns, "tops": ops / ns / 1e3}
    return probes


async def _chain_row(runtime, case, weight, x, out, int8, copies, trials, sink_tensor, pool, moved, stream_big) -> dict:
    """The decode-like figures: the linear over each weight copy in turn, one pass; the same for a
    streaming read of the same bytes (consecutive regions of the pool). `int8`: _linear's arguments
    after `rows` (the activations, the output's int8 form or None, partials, the norm prologue, the RoPE
    target)."""
    device = runtime.device
    plan = Plan(runtime, f"bench.chain.{case.name}")
    for copy in range(copies):
        op = _linear(case, x, weight.rows(copy * case.weight_rows, case.weight_rows), out, device.adapter, 1, *int8)
        await plan.add(op.at(1)[0])
    plan.record()
    chain_ns = await _measure_span(plan, trials)
    plan.release()
    weight_bytes = min(case.weight_bytes, pool.nbytes) // 16 * 16       # (CPU adapters: see run_kernel_bench)
    ranges = [(i * weight_bytes, weight_bytes) for i in range(copies)]
    stream_ns = await _stream_ns(runtime, pool, ranges, trials, sink_tensor, span=True)
    # The same read where every workgroup also writes back, as any GEMV does: what a store costs a chain.
    stream_store_ns = await _stream_ns(runtime, pool, ranges, trials, sink_tensor, span=True, store=True)
    chain_gbps = moved / chain_ns if chain_ns else float("nan")
    stream_gbps = weight_bytes / stream_ns if stream_ns else float("nan")
    return {"chain_copies": copies, "chain_ns": chain_ns, "chain_gbps": chain_gbps, "chain_stream_ns": stream_ns,
            "chain_stream_store_ns": stream_store_ns, "chain_ratio_stream_store": chain_gbps * stream_store_ns / weight_bytes,
            "chain_stream_gbps": stream_gbps, "chain_ratio_same_bytes": chain_gbps / stream_gbps,
            "chain_ratio_big_stream": chain_gbps / stream_big}


# The routes a decode step is timed under: (label, activations, the row-major scale copy, the RMSNorm
# emitting the int8 row itself); "unfused" is int8x+rows with RMSNorm, then quantization.
_STEP_ROUTES = (("f32", "f32", False, False), ("int8", "int8", False, False), ("int8x", "int8x", False, True),
                ("int8x+rows", "int8x", True, True), ("int8x+rows unfused", "int8x", True, False))

# A decode token of each model at full depth; tiny_step is the same structure at toy sizes (tests, CPU adapters).
STEP_PRESETS = {"llama_step": LLAMA_3_2_1B, "qwen_step": QWEN3_0_6B, "tiny_step": TINY}


async def _decode_step(runtime: Runtime, config: ModelConfig, trials: int, seed: int, sink_tensor, pool,
                       stream_big: float) -> dict:
    """Every linear of one decode token (all layers, then lm_head) and the RMSNorm before each of qkv,
    gate_up and lm_head, back to back in one pass, each linear over its own weight (no L2 reuse between
    them, as in a real step), under the f32 route and under the int8 routes; and a streaming read of
    each projection's bytes in the same order. gs 64, M = 1.

    Per layer "qkv" is one packed [n_q + 2 n_kv, K] weight and "gate_up" a packed [2 F, K] one: on the f32
    and int8 routes three and two GEMVs (plus the swiglu of gate and up), on the pre-quantized int8 route one
    fused dispatch each (the fused QKV; gate/up + SwiGLU). That route quantizes each layer input once:
    before qkv, o, gate_up and down. The RMSNorms before qkv, gate_up and lm_head run on every route; the
    int8x ones emit the quantized row themselves (rms_norm_int8x), and the gate/up + SwiGLU down's input
    (q4_gemv_int8x_glu_q8, where its guard passes), but for the "unfused" control."""
    tensors, adapter = runtime.tensors, runtime.device.adapter
    hidden, n_q, n_kv, ffn = config.hidden, config.q_dim, config.kv_dim, config.intermediate
    per_layer = (("qkv", hidden, n_q + 2 * n_kv), ("o", n_q, hidden), ("gate_up", hidden, 2 * ffn), ("down", ffn, hidden))
    linears = [(f"l{layer}.{name}", k, n) for layer in range(config.layers) for name, k, n in per_layer]
    linears.append(("lm_head", hidden, config.vocab))
    owned, weights, weights_rows = [], {}, {}
    by_shape: dict[tuple[int, int], list[str]] = {}
    for name, k, n in linears:
        by_shape.setdefault((k, n), []).append(name)
    limit = adapter.limits.get("maxStorageBufferBindingSize", 1 << 27)
    stacks = []     # stacked matrices of one shape, each within the binding limit
    for (k, n), names in by_shape.items():
        per_stack = max(1, limit // (n * k // 2))
        stacks += [(k, n, names[i:i + per_stack]) for i in range(0, len(names), per_stack)]
    for index, (k, n, names) in enumerate(stacks):
        packed = await tensors.allocate(f"step.packed.{index}", (len(names) * n * k // 8,), "u32")
        scales = await tensors.allocate(f"step.scales.{index}", (k // 64 * len(names) * n,))
        rows_copy = await tensors.allocate(f"step.scales_rows.{index}", (k // 64 * len(names) * n,))
        stacked = Q4Weight(packed, scales, k, len(names) * n, 64)
        with_rows = Q4Weight(packed, scales, k, len(names) * n, 64, scales_rows=rows_copy)
        owned += [packed, scales, rows_copy]
        await _run_once(runtime, "step.setup", [q4_quantize(weight=stacked, synth=(WEIGHT_RANGE, seed, 50 + index)),
                                                q4_scales_rows(with_rows)])
        for i, name in enumerate(names):
            weights[name] = stacked.rows(i * n, n)
            weights_rows[name] = with_rows.rows(i * n, n)
    inputs, outputs = {}, {}
    for k in sorted({k for _, k, _ in linears}):
        inputs[k] = await tensors.allocate(f"step.x.{k}", (1, k))
    raw = await tensors.allocate("step.raw", (1, hidden))              # the residual stream a norm reads
    norm_weight = await tensors.allocate("step.norm_weight", (hidden,))
    owned += [*inputs.values(), raw, norm_weight]
    await _run_once(runtime, "step.fill",
                    [fill_uniform(target=x, value_range=ACT_RANGE, seed=seed, stream=70 + k) for k, x in inputs.items()]
                    + [fill_uniform(target=raw, value_range=ACT_RANGE, seed=seed, stream=60),
                       fill_uniform(target=norm_weight, value_range=NORM_RANGE, seed=seed, stream=61)])
    for n in sorted({n for name, _, n in linears if not name.endswith(("qkv", "gate_up"))}):
        outputs[n] = await tensors.allocate(f"step.out.{n}", (1, n))
        owned.append(outputs[n])

    def parts(name: str, n: int) -> tuple[tuple[str, int], ...]:
        """The projections a packed weight holds, in row order: (part, rows)."""
        if name.endswith("qkv"):
            return ("q", n_q), ("k", n_kv), ("v", n_kv)
        return (("gate", ffn), ("up", ffn)) if name.endswith("gate_up") else (("", n),)

    part_outs = {part: await tensors.allocate(f"step.out.{part}", (1, size))
                 for part, size in parts("qkv", 0) + parts("gate_up", 0)}
    act_out = await tensors.allocate("step.out.act", (1, ffn))
    owned += [*part_outs.values(), act_out]
    activations = {}
    for k, x in inputs.items():
        activations[k] = await Int8Activations.allocate(runtime, x, 64)
        owned += activations[k].tensors

    projections = [(f"{name}.{part}", k, size) for name, k, n in linears for part, size in parts(name, n)]
    result = {"geometry": config.name, "linears": len(projections), "weight_bytes": 0, "routes": {}}
    for label, activation, rows_copy, fused_norm in _STEP_ROUTES:
        plan = Plan(runtime, f"step.{label}")
        moved, quantized_by_glu = 0, False
        for name, k, n in linears:
            weight = (weights_rows if rows_copy else weights)[name]
            outs = [part_outs[part] if part else outputs[n] for part, _ in parts(name, n)]
            normed = name.endswith(("qkv", "gate_up")) or name == "lm_head"
            if normed and fused_norm:
                await plan.add(rms_norm_int8x(x=raw, weight=norm_weight, act=activations[k], eps=NORM_EPS, tokens=1))
            elif normed:
                await plan.add(rms_norm(x=raw, weight=norm_weight, out=inputs[k], tokens=1, eps=NORM_EPS,
                                        adapter=adapter))
            if activation == "int8x":
                act = activations[k]
                if not (normed and fused_norm) and not (name.endswith("down") and quantized_by_glu):
                    await plan.add(quantize_activations(act, tokens=1))
                if name.endswith("qkv"):
                    ops = [q4_linear_qkv(x=inputs[k], weight=weight, outs=tuple(outs), adapter=adapter, tokens=1,
                                         int8=act)]
                elif name.endswith("gate_up") and fused_norm:     # down's input written and quantized by the GLU
                    ops = [q4_linear_glu(act=act, weight=weight, out=inputs[ffn], adapter=adapter, tokens=1,
                                         int8_out=activations[ffn])]
                    quantized_by_glu = ops[0].calls[0].route == "q4_gemv_int8x_glu_q8"
                elif name.endswith("gate_up"):
                    ops = [q4_linear_glu(act=act, weight=weight, out=act_out, adapter=adapter, tokens=1)]
                else:
                    ops = [q4_linear(x=inputs[k], weight=weight, out=outs[0], adapter=adapter, tokens=1, int8=act)]
            else:           # each projection its own GEMV over its rows of the packed weight
                ops, first = [], weight.n_offset
                for out, (_, size) in zip(outs, parts(name, n)):
                    ops.append(q4_linear(x=inputs[k], weight=weight.rows(first, size), out=out, adapter=adapter,
                                         tokens=1, int8=activation == "int8"))
                    first += size
                if name.endswith("gate_up"):
                    ops.append(swiglu(gate=outs[0], up=outs[1], out=act_out, tokens=1))
            for op in ops:
                call, sizing = await _active_call(runtime, op, 1, plan.live)
                await plan.add(call)
                moved += sizing.bytes_moved if call.route != "swiglu_fused" else 0
        plan.record()
        span = await _measure_span(plan, trials) * len(plan)
        result["routes"][label] = {"dispatches": len(plan), "routes": list(plan.routes), "us": span / 1e3,
                                   "bytes": moved, "gbps": moved / span, "ratio_big_stream": moved / span / stream_big}
        plan.release()
    weight_sizes = [q4_weight_bytes(k, n, 64) for _, k, n in projections]
    result["weight_bytes"] = sum(weight_sizes)
    # Consecutive regions of the pool (1 GiB on a GPU: the whole step fits, so no region is re-read;
    # a smaller pool on CPU adapters wraps around, and a weight larger than it is read in pieces).
    ranges, offset = [], 0
    for size in weight_sizes:
        for start in range(0, size, pool.nbytes):
            piece = min(pool.nbytes, size - start) // 16 * 16
            offset = offset if offset + piece <= pool.nbytes else 0
            ranges.append((offset, piece))
            offset += piece
    stream_ns = await _stream_ns(runtime, pool, ranges, trials, sink_tensor, span=True) * len(ranges)
    for tensor in owned:
        tensors.release(tensor.name)
    result["stream_us"] = stream_ns / 1e3
    result["stream_gbps"] = result["weight_bytes"] / stream_ns
    for route in result["routes"].values():
        route["ratio_same_stream"] = route["gbps"] / result["stream_gbps"]
    return result
