"""Attention benchmark, per route: decode (one live token) at contexts 128 to 8192, as GB/s of KV
cache read beside a streaming read of the same bytes done the same way in the same run; prefill (a
prompt of S tokens from position 0) as GFLOP/s. Part of `bench kernels` (presets ATTENTION_PRESETS).

Decode is timed the way a decoder runs it: the op over one cache per layer, back to back in one pass
(as many layers as make the caches several times any L2, at most MAX_LAYERS), by two timestamps,
divided by the layers. The streaming read covers the same bytes in the same number of dispatches.
Beside it, the floor of a two-pass route: two dependent near-empty dispatches per layer (a 256-byte
streaming read each), what FlashDecoding's split and reduce passes cost before they read anything.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from ..kernels import kernel, kernel_names
from ..models.config import LLAMA_3_2_1B, QWEN3_0_6B, ModelConfig
from ..ops.attention import AttentionScratch, KVCache, kv_cache_write, sdpa
from ..ops.synth import fill_uniform
from ..oneshot import run_op
from ..plan import Plan
from ..routing import RouteUnavailable
from ..runtime import Runtime
from .attention import GQA3, QKV_RANGE

__all__ = ["AttentionBenchCase", "ATTENTION_PRESETS", "run_attention_bench"]

MAX_LAYERS = 32
CHAIN_BYTES = 256 << 20         # KV bytes per decode chain: several times the H200's 50 MB L2


@dataclass(frozen=True)
class AttentionBenchCase:
    config: ModelConfig
    tokens: int             # 1: a decode at position context - 1; more: a prefill from 0
    context: int
    route: str
    flash_split: tuple[str, int] | None = None     # a sweep's split-pass kernel and workgroups (sdpa(flash_split=))
    prefill_kernel: str | None = None               # a sweep's subgroup prefill variant (sdpa(prefill_kernel=))
    decode_kernel: str | None = None                # a sweep's one-pass decode variant (sdpa(decode_kernel=))
    kv_f16: bool = False                            # the caches' kernels in shader-f16 types (KVCache(f16=))

    @property
    def name(self) -> str:
        what = f"decode.ctx{self.context}" if self.tokens == 1 else f"prefill.s{self.tokens}"
        swept = f"[{self.flash_split[0].removeprefix('sdpa_flash_split_sg_')}@{self.flash_split[1]}]" \
            if self.flash_split else f"[{self.prefill_kernel.removeprefix('sdpa_prefill_sg_').removeprefix('sdpa_prefill_')}]" \
            if self.prefill_kernel else f"[{self.decode_kernel.removeprefix('sdpa_decode_sg_')}]" \
            if self.decode_kernel else ""
        return f"{self.config.key}.{what}.{self.route.removeprefix('sdpa_')}{swept}{'.kvf16' if self.kv_f16 else ''}"

    @property
    def half(self) -> bool:
        """The subgroup-matrix prefill rounds q and the probabilities to f16: asked for where it is the route."""
        return self.route == "sdpa_prefill_sgmat_f16"

    @property
    def kv_bytes(self) -> int:
        """One layer's K and V cache over the context, f16."""
        return 2 * self.context * self.config.kv_heads * self.config.head_dim * 2


_MODELS = (LLAMA_3_2_1B, QWEN3_0_6B)
# Workgroups wanted by the split pass: session 6 measured 256..2048 (fewer won everywhere); 64 and 128
# (fewer than the H200's 132 SMs) ask whether fewer, longer splits and a smaller reduce win again.
_SWEEP_WORKGROUPS = (64, 128, 256, 512, 1024)
FLOOR_BYTES = 256               # each dispatch of the two-pass floor reads this much


def _flash_sweep(config: ModelConfig, context: int) -> list[AttentionBenchCase]:
    """Every subgroup split-pass variant of the geometry (shipped and sweep) at several workgroup targets."""
    group = config.heads // config.kv_heads
    names = [name for name in kernel_names() if name.startswith("sdpa_flash_split_sg_")
             and kernel(name).template_values["G"] == group and 32 * kernel(name).template_values["W"] >= config.head_dim]
    return [AttentionBenchCase(config, 1, context, "sdpa_flash_subgroup", (name, workgroups))
            for name in names for workgroups in _SWEEP_WORKGROUPS]


def _one_pass_sweep(config: ModelConfig, context: int) -> list[AttentionBenchCase]:
    """Every one-pass decode variant of the fewest words per lane covering the head_dim (shipped and sweep,
    f32 output), then the split pass."""
    words = -(-config.head_dim // 32)
    names = [name for name in kernel_names() if name.startswith("sdpa_decode_sg_") and "_i8x_" not in name
             and kernel(name).template_values["W"] == words]
    return [AttentionBenchCase(config, 1, context, "sdpa_decode_subgroup", decode_kernel=name) for name in names] + \
        [AttentionBenchCase(config, 1, context, "sdpa_flash_subgroup")]


def _prefill_sweep(config: ModelConfig) -> list[AttentionBenchCase]:
    """Every subgroup prefill variant of the head_dim (shipped and sweep) at S 512 and 2048."""
    names = [name for name in kernel_names() if name.startswith("sdpa_prefill_sg_")
             and 8 * kernel(name).template_values["SUB"] * kernel(name).template_values["W"] == config.head_dim]
    return [AttentionBenchCase(config, s, s, "sdpa_prefill_subgroup", prefill_kernel=name)
            for s in (512, 2048) for name in names]


def _sgmat_prefill_sweep(config: ModelConfig) -> list[AttentionBenchCase]:
    """Every subgroup-matrix prefill variant of the head_dim (shipped and sweep) at S 128, 512 and 2048."""
    names = [name for name in kernel_names() if name.startswith("sdpa_prefill_sgmat_")
             and kernel(name).template_values["D"] == config.head_dim]
    return [AttentionBenchCase(config, s, s, "sdpa_prefill_sgmat_f16", prefill_kernel=name)
            for s in (128, 512, 2048) for name in names]


ATTENTION_PRESETS = {
    "attention_decode": [AttentionBenchCase(m, 1, ctx, route) for m in _MODELS
                         for ctx in (128, 512, 1024, 2048, 4096, 8192)
                         for route in ("sdpa_decode_subgroup", "sdpa_flash_subgroup", "sdpa_flash_decode",
                                       "sdpa_materialized")],
    # Every one-pass decode variant (f32 output) against FlashDecoding on subgroups, short to long: where
    # the one pass stops paying is its reach (the tuning tables).
    "attention_decode_sweep": [case for m in _MODELS for ctx in (128, 256, 512, 1024, 2048)
                               for case in _one_pass_sweep(m, ctx)],
    # (the f16 subgroup-matrix route's rows are skipped where the device lacks it: Chromium on NVIDIA needs the
    # f16 flag)
    "attention_prefill": [AttentionBenchCase(m, s, s, route)
                          for m, one_pass in ((LLAMA_3_2_1B, ("sdpa_prefill_subgroup", "sdpa_k16")),
                                              (QWEN3_0_6B, ("sdpa_prefill_subgroup", "sdpa_q16", "sdpa_q32")))
                          for s in (128, 512, 2048)
                          for route in ("sdpa_prefill_sgmat_f16", *one_pass, "sdpa_materialized")],
    # Short prompts: where the subgroup prefill (no f16 rounding, no staging) still beats the subgroup-matrix one
    "attention_prefill_short": [AttentionBenchCase(m, s, s, route) for m in _MODELS
                                for s in (16, 32, 64, 96, 128, 160, 192, 256, 384)
                                for route in ("sdpa_prefill_sgmat_f16", "sdpa_prefill_subgroup")],
    "attention_prefill_sweep": [case for m in _MODELS for case in _prefill_sweep(m)],
    "attention_prefill_sgmat_sweep": [case for m in _MODELS for case in _sgmat_prefill_sweep(m)],
    "attention_flash_sweep": [case for m in _MODELS for case in _flash_sweep(m, 4096)],
    # The cache's two spellings side by side, each route's packed u32 then shader-f16 kernels (rows of the
    # latter are skipped where the device lacks the feature: Chromium on NVIDIA needs the f16 flag).
    "attention_kv_f16": [AttentionBenchCase(m, tokens, ctx, route, kv_f16=f16) for m in _MODELS
                         for tokens, ctx, route in ((1, 128, "sdpa_decode_subgroup"), (1, 512, "sdpa_decode_subgroup"),
                                                    (1, 1024, "sdpa_flash_subgroup"), (1, 4096, "sdpa_flash_subgroup"),
                                                    (512, 512, "sdpa_prefill_subgroup"),
                                                    (2048, 2048, "sdpa_prefill_subgroup"))
                         for f16 in (False, True)],
    # SmolLM2-135M's 9/3/64: the G 3 subgroup split pass against the workgroup-memory one it replaced.
    "attention_gqa3": [AttentionBenchCase(GQA3, 1, ctx, route) for ctx in (128, 1024, 4096)
                       for route in ("sdpa_flash_subgroup", "sdpa_flash_decode")],
    # Toy sizes for CPU adapters and tests.
    "attention_tiny": [AttentionBenchCase(LLAMA_3_2_1B, 1, 64, "sdpa_decode_subgroup"),
                       AttentionBenchCase(LLAMA_3_2_1B, 1, 64, "sdpa_flash_subgroup"),
                       AttentionBenchCase(LLAMA_3_2_1B, 1, 64, "sdpa_flash_subgroup", kv_f16=True),
                       AttentionBenchCase(LLAMA_3_2_1B, 1, 64, "sdpa_flash_decode"),
                       AttentionBenchCase(LLAMA_3_2_1B, 1, 64, "sdpa_materialized"),
                       AttentionBenchCase(LLAMA_3_2_1B, 8, 8, "sdpa_materialized"),
                       AttentionBenchCase(LLAMA_3_2_1B, 8, 8, "sdpa_k16"),
                       AttentionBenchCase(LLAMA_3_2_1B, 8, 8, "sdpa_prefill_subgroup")],
}


async def _case_row(runtime: Runtime, case: AttentionBenchCase, index: int, data: int, trials: int, seed: int, sink_tensor,
                    pool, stream_big: float) -> dict:
    from .kernel_bench import _measure_span, _stream_ns         # (kernel_bench calls this module)

    config, tensors = case.config, runtime.tensors
    heads, kv_heads, dim = config.heads, config.kv_heads, config.head_dim
    decode = case.tokens == 1
    layers = max(1, min(MAX_LAYERS, CHAIN_BYTES // case.kv_bytes, pool.nbytes // case.kv_bytes)) if decode else 1
    limit = runtime.device.adapter.limits.get("maxStorageBufferBindingSize", 1 << 27)
    if not decode and 4 * case.tokens * heads * case.context > limit:
        return {"case": case.name, "route": case.route, "rows": case.tokens, "context": case.context,
                "skipped": f"the scores ({4 * case.tokens * heads * case.context} bytes) exceed the binding limit {limit}"}
    prefix = f"abench.{index}"
    owned = []
    k = await tensors.allocate(f"{prefix}.k", (case.context, kv_heads, dim))
    v = await tensors.allocate(f"{prefix}.v", (case.context, kv_heads, dim))
    q = await tensors.allocate(f"{prefix}.q", (case.tokens, heads, dim))
    out = await tensors.allocate(f"{prefix}.out", (case.tokens, heads, dim))
    scratch = await AttentionScratch.allocate(runtime, f"{prefix}.scratch", heads=heads, head_dim=dim,
                                              max_tokens=case.tokens, capacity=case.context)
    owned += [k, v, q, out, scratch.scores, scratch.part_ml, scratch.part_o]
    await run_op(runtime, *(fill_uniform(target=t, value_range=QKV_RANGE, seed=seed, stream=10 * data + i)
                            for i, t in enumerate((k, v, q))))
    plan = Plan(runtime, f"bench.{case.name}", live={"tokens": case.tokens, "pos": case.context - case.tokens})
    for layer in range(layers):
        cache = await KVCache.allocate(runtime, f"{prefix}.cache{layer}", capacity=case.context, kv_heads=kv_heads,
                                       head_dim=dim, f16=case.kv_f16)
        owned += [cache.k, cache.v]
        try:
            if cache.f16_refused:
                raise RouteUnavailable(f"the cache in shader-f16 types: {cache.f16_refused}")
            op = sdpa(q=q, cache=cache, out=out, scratch=scratch, heads=heads, adapter=runtime.device.adapter,
                      force=case.route, q32=case.route == "sdpa_q32", flash_split=case.flash_split,
                      prefill_kernel=case.prefill_kernel, decode_kernel=case.decode_kernel, half=case.half)
        except RouteUnavailable as unavailable:     # at the first layer: e.g. the subgroup route without subgroups
            for tensor in owned:
                tensors.release(tensor.name)
            return {"case": case.name, "route": case.route, "rows": case.tokens, "context": case.context,
                    "skipped": str(unavailable)}
        await run_op(runtime, kv_cache_write(k=k, v=v, cache=cache, tokens=case.context, pos=0))
        await plan.add(op)
    plan.record()
    per_layer = len(plan) // layers
    ns = await _measure_span(plan, trials) * per_layer          # one layer's attention, all its dispatches
    # Where a layer's time goes: each kernel's median over the layers, one profiled pass per dispatch.
    profiled = (await plan.replay(profile=True)).rows
    by_kernel = {row.kernel: statistics.median(r.ns for r in profiled if r.kernel == row.kernel) for row in profiled}
    plan.release()
    sizes = [call.sizing((await runtime.pipelines.get(call.kernel))[0], plan.live) for call in op]
    moved, flops = sum(s.bytes_moved for s in sizes), sum(s.flops for s in sizes)
    row = {"case": case.name, "kernel": "+".join(dict.fromkeys(e for e in op.routes)), "route": case.route,
           "rows": case.tokens, "context": case.context, "layers": layers, "bytes": moved, "flops": flops, "ns": ns,
           "gbps": moved / ns, "gflops": flops / ns, "kv_bytes": case.kv_bytes, "kv_gbps": case.kv_bytes / ns,
           "kernel_ns": by_kernel}
    if decode:
        kv = min(case.kv_bytes, pool.nbytes // layers) // 16 * 16
        stream_ns = await _stream_ns(runtime, pool, [(i * kv, kv) for i in range(layers)], trials, sink_tensor, span=True)
        floor_ns = 2 * await _stream_ns(runtime, pool, [(i * FLOOR_BYTES, FLOOR_BYTES) for i in range(2 * layers)],
                                        trials, sink_tensor, span=True)
        row.update(stream_gbps_same_bytes=kv / stream_ns, ratio_same_bytes=(case.kv_bytes / ns) / (kv / stream_ns),
                   ratio_big_stream=(case.kv_bytes / ns) / stream_big, stream_ns=stream_ns, two_pass_floor_ns=floor_ns)
    else:
        row.update(stream_gbps_same_bytes=None, ratio_same_bytes=None,      # (no KV stream: JSON has no NaN)
                   ratio_big_stream=(moved / ns) / stream_big)
    for tensor in owned:
        tensors.release(tensor.name)
    return row


async def run_attention_bench(runtime: Runtime, cases, *, trials: int, seed: int, sink_tensor, pool, stream_big: float,
                              progress) -> list[dict]:
    rows = []
    # Every route and variant of one geometry and length reads the same q, K and V: how often the online
    # softmax rescales depends on the scores, so a comparison over different draws would not be fair.
    data: dict[tuple, int] = {}
    for index, case in enumerate(cases):
        progress("attention bench cases", index, len(cases))
        draw = data.setdefault((case.config.key, case.tokens, case.context), len(data))
        rows.append(await _case_row(runtime, case, index, draw, trials, seed, sink_tensor, pool, stream_big))
    progress("attention bench cases", len(cases), len(cases))
    return rows
