"""Attention checks: the KV cache write and every SDPA route at the models' geometries and at one that
misses every shape-specific route, for prefills of several lengths at several start positions, each
followed by a decode step in the same recorded plan (resized to one token at the next position).

Inputs are synthetic (fill_uniform on the GPU); the host oracle (host/oracle/attention.py) rebuilds
them, checks the cache's f16 contents, and computes attention in float64 from the cache the GPU wrote.
A `rope` case writes the step's K and V with RoPE fused into the write (rope_kv_cache_write, which also
rotates q): the oracle checks the rotated q and keys against float64 RoPE, then attention over them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..dispatch import POS, TOKENS
from ..kernels import kernel, kernel_names
from ..models.config import AWKWARD, LLAMA_3_2_1B, QWEN3_0_6B, ModelConfig
from ..ops.attention import AttentionScratch, KVCache, kv_cache_write, rope_kv_cache_write, sdpa
from ..ops.rope import cos_sin_table_gpu, inverse_frequencies
from ..ops.synth import UniformRange, fill_uniform
from ..oneshot import run_op
from ..plan import Plan
from ..runtime import Runtime
from .outcome import NOT_CHECKED, no_progress
from .unary import POISON

__all__ = ["AttentionCase", "PRESETS", "GEOMETRIES", "QKV_RANGE", "run_attention_checks"]

QKV_RANGE = UniformRange(scale_log2=-23, offset=-1.0)          # [-1, 1): q, k and v
# SmolLM2-135M's attention (9 heads, 3 KV heads, 64 dims; the rest of the config is Llama's, unused here)
GQA3 = replace(LLAMA_3_2_1B, key="gqa3", name="SmolLM2-135M attention", heads=9, kv_heads=3)
GEOMETRIES = {config.key: config for config in (LLAMA_3_2_1B, QWEN3_0_6B, AWKWARD, GQA3)}


@dataclass(frozen=True)
class AttentionCase:
    geometry: str           # a GEOMETRIES key: heads, KV heads, head_dim
    tokens: int             # the prefill's length (1: the case is two decode steps)
    pos: int                # the prefill's start position
    force: str | None = None
    q32: bool = False       # opt Qwen3's geometry into the 32-row prefill schedule
    rope: bool = False      # the step's q and k rotated by rope_kv_cache_write (the model's RoPE layout)
    prefill: str | None = None  # the prefill's route forced (the decode's stays the table's)
    prefill_kernel: str | None = None   # an sdpa_prefill_sg(mat) variant in place of the table's
    kv_f16: bool = False    # the cache's kernels in shader-f16 types where the device has it (KVCache(f16=))
    half: bool = False      # the prefill may round q and the probabilities to f16 (sdpa(half=): the sgmat route)
    short_prompts: bool = True  # False: the sgmat route at every length (sdpa(short_prefill=False))

    @property
    def name(self) -> str:
        return (f"{self.geometry}.s{self.tokens}.p{self.pos}" + (f".{self.force}" if self.force else "")
                + (".q32" if self.q32 else "") + (".rope" if self.rope else "")
                + (f".{self.prefill}" if self.prefill else "")
                + (f".{self.prefill_kernel.removeprefix('sdpa_prefill_sg_').removeprefix('sdpa_prefill_')}" if self.prefill_kernel else "")
                + (".kvf16" if self.kv_f16 else "") + (".half" if self.half else "")
                + ("" if self.short_prompts else ".sgmat_only"))

    @property
    def config(self) -> ModelConfig:
        return GEOMETRIES[self.geometry]

    @property
    def capacity(self) -> int:
        return self.pos + self.tokens + 1           # the prefill, then one decode step


def _matrix(lengths, positions, geometries=tuple(GEOMETRIES), half: bool = False,
            short_prompts: bool = True) -> list[AttentionCase]:
    return [AttentionCase(g, s, p, half=half, short_prompts=short_prompts)
            for g in geometries for s in lengths for p in positions]


PRESETS = {
    # CI: every geometry at a decode, a short and an odd prefill, from the start, one in and deep in the
    # context; a decode past the one pass's reach (FlashDecoding) and the one pass forced there; the
    # materialized route forced at Llama's geometry for a decode and for a prefill, and the
    # workgroup-memory FlashDecoding for a decode (where subgroups are, only the awkward geometry takes it);
    # Qwen3's opt-in 32-row prefill (Q16 where the device lacks its workgroup memory); the K16 and Q16
    # prefills forced where the subgroup prefill would run; RoPE fused into the cache write in both pair
    # layouts; the cache in shader-f16 types (packed where the device lacks it): each writer, the subgroup
    # prefill, the one pass and FlashDecoding's split pass in it, and routes without an f16 spelling reading it.
    "ci": _matrix((1, 7, 129), (0, 1, 300), ("llama", "qwen3", "awkward")) + [
                                               AttentionCase("gqa3", 1, 300), AttentionCase("gqa3", 7, 1),
                                               AttentionCase("llama", 1, 1000, force="sdpa_materialized"),
                                               AttentionCase("llama", 1, 1000, force="sdpa_flash_decode"),
                                               AttentionCase("llama", 1, 1000), AttentionCase("qwen3", 1, 1000),
                                               AttentionCase("gqa3", 1, 1000, force="sdpa_decode_subgroup"),
                                               AttentionCase("llama", 129, 1, force="sdpa_materialized"),
                                               AttentionCase("qwen3", 129, 1, q32=True),
                                               AttentionCase("qwen3", 7, 300, q32=True),
                                               AttentionCase("llama", 129, 1, prefill="sdpa_k16"),
                                               AttentionCase("qwen3", 7, 300, prefill="sdpa_q16"),
                                               AttentionCase("llama", 7, 300, rope=True),
                                               AttentionCase("qwen3", 7, 1, rope=True),
                                               AttentionCase("llama", 7, 300, rope=True, kv_f16=True),
                                               AttentionCase("qwen3", 129, 1, kv_f16=True),
                                               AttentionCase("llama", 1, 1500, kv_f16=True),
                                               AttentionCase("qwen3", 1, 1500, rope=True, kv_f16=True),
                                               AttentionCase("awkward", 7, 1, kv_f16=True),
                                               AttentionCase("llama", 129, 300, half=True),
                                               AttentionCase("qwen3", 129, 1, half=True)],
    # Every subgroup prefill variant (shipped and sweep) at the three geometries of D 64 and 128, short and
    # long: for adapters whose smallest subgroup holds 16 invocations (the H200's 32, natively and in
    # Chromium); elsewhere the route refuses the wider variants by name.
    "subgroup_prefill": [AttentionCase(geometry, s, p, prefill="sdpa_prefill_subgroup", prefill_kernel=name)
                         for name in kernel_names() if name.startswith("sdpa_prefill_sg_")
                         for geometry in ("llama", "gqa3", "qwen3")
                         if 8 * kernel(name).template_values["SUB"] * kernel(name).template_values["W"]
                         == GEOMETRIES[geometry].head_dim
                         for s, p in ((7, 1), (129, 300))],
    # The f16 subgroup-matrix prefill (half=True; where the device lacks it, the route it falls back to):
    # Llama's and Qwen3's geometries over the issue's lengths and starts at every length (the table may hand
    # short prompts to the subgroup route: that too, on either side of the H200's lengths), SmolLM2's G 3,
    # each variant pinned short and long, with RoPE and with the cache in shader-f16 types.
    "sgmat_f16": _matrix((2, 7, 16, 31, 127, 129, 512), (0, 1, 1500), ("llama", "qwen3"), half=True,
                         short_prompts=False) + [
        AttentionCase(g, s, 0, half=True) for g, s in (("llama", 160), ("llama", 161), ("qwen3", 192), ("qwen3", 193))] + [
        AttentionCase("gqa3", s, 1, half=True) for s in (7, 129)] + [
        AttentionCase(geometry, s, p, prefill_kernel=name, half=True)
        for name in kernel_names() if name.startswith("sdpa_prefill_sgmat_")
        for geometry in ("llama", "qwen3") if kernel(name).template_values["D"] == GEOMETRIES[geometry].head_dim
        for s, p in ((129, 300), (512, 0))] + [
        AttentionCase("llama", 129, 1, rope=True, half=True), AttentionCase("qwen3", 127, 300, kv_f16=True, half=True)],
    # The matrix (opt-in: long on a CPU adapter).
    "full": _matrix((1, 2, 7, 16, 31, 127, 128, 129, 508, 512), (0, 1, 1500)) + [
        AttentionCase(geometry, s, p, prefill=route) for geometry, route in (("llama", "sdpa_k16"), ("qwen3", "sdpa_q16"))
        for s in (2, 7, 16, 31, 127, 128, 129, 508, 512) for p in (0, 1, 1500)],
}

# Synthetic streams per role; the decode step refills q, k and v from the next streams.
_STREAMS = {"q": 10, "k": 20, "v": 30, "history_k": 40, "history_v": 50}


def streams(case_index: int, role: str, step: int) -> int:
    return 1000 * case_index + _STREAMS[role] + step


async def _run_case(runtime: Runtime, case: AttentionCase, index: int, seed: int, sink) -> dict:
    config, tensors, device = case.config, runtime.tensors, runtime.device
    heads, kv_heads, dim = config.heads, config.kv_heads, config.head_dim
    prefix = f"attn.{case.name}"
    cache = await KVCache.allocate(runtime, f"{prefix}.cache", capacity=case.capacity, kv_heads=kv_heads, head_dim=dim,
                                   f16=case.kv_f16)
    scratch = await AttentionScratch.allocate(runtime, f"{prefix}.scratch", heads=heads, head_dim=dim,
                                              max_tokens=case.tokens, capacity=case.capacity)
    q = await tensors.allocate(f"{prefix}.q", (case.tokens, heads, dim))
    k = await tensors.allocate(f"{prefix}.k", (case.tokens, kv_heads, dim))
    v = await tensors.allocate(f"{prefix}.v", (case.tokens, kv_heads, dim))
    out = await tensors.allocate(f"{prefix}.out", (case.tokens, heads, dim))
    owned = [cache.k, cache.v, scratch.scores, scratch.part_ml, scratch.part_o, q, k, v, out]
    if case.pos:                # the context before the prefill, written by a step of its own
        history = [await tensors.allocate(f"{prefix}.{role}", (case.pos, kv_heads, dim)) for role in ("hk", "hv")]
        owned += history
        await run_op(runtime, *(fill_uniform(target=t, value_range=QKV_RANGE, seed=seed, stream=streams(index, role, 0))
                                for t, role in zip(history, ("history_k", "history_v"))),
                     kv_cache_write(k=history[0], v=history[1], cache=cache, tokens=case.pos, pos=0))
    plan = Plan(runtime, prefix, live={TOKENS: case.tokens, POS: case.pos})
    if case.rope:
        table = await tensors.allocate(f"{prefix}.rope_table", (case.capacity, dim // 2, 2))
        q_rot = await tensors.allocate(f"{prefix}.q_rot", (case.tokens, heads, dim))
        owned += [table, q_rot]
        await cos_sin_table_gpu(runtime, table, inverse_frequencies(dim, config.rope_theta, config.rope_scaling))
        await plan.add(rope_kv_cache_write(q=q, k=k, v=v, q_out=q_rot, table=table, cache=cache, heads=heads,
                                           layout=config.rope_layout))
    else:
        q_rot = q
        await plan.add(kv_cache_write(k=k, v=v, cache=cache))
    attention = sdpa(q=q_rot, cache=cache, out=out, scratch=scratch, heads=heads, adapter=device.adapter,
                     force=case.force, q32=case.q32, prefill_route=case.prefill, prefill_kernel=case.prefill_kernel,
                     half=case.half, short_prefill=case.short_prompts)
    await plan.add(attention)
    plan.record()
    steps = []
    for step, (tokens, pos) in enumerate(((case.tokens, case.pos), (1, case.pos + case.tokens))):
        await run_op(runtime, *(fill_uniform(target=t, value_range=QKV_RANGE, seed=seed, stream=streams(index, role, step))
                                for t, role in ((q, "q"), (k, "k"), (v, "v"))))
        plan.resize(tokens=tokens, pos=pos)
        device.write_buffer(out.buffer, POISON * out.numel)
        execution = await plan.replay()
        name = f"{prefix}.out.step{step}.f32"
        rotated = f"{prefix}.q_rot.step{step}.f32" if case.rope else None
        if sink:
            await sink(name, await device.read_buffer(out.buffer, 4 * tokens * heads * dim))
            if rotated:
                await sink(rotated, await device.read_buffer(q_rot.buffer, 4 * tokens * heads * dim))
        steps.append({"tokens": tokens, "pos": pos, "routes": list(execution.routes), "artifact": name,
                      "q_rot_artifact": rotated, "attention_conflicts": execution.attention_conflicts})
    cache_artifacts = []
    for tensor in (cache.k, cache.v):
        name = f"{prefix}.{tensor.name.rsplit('.', 1)[1]}_cache.u32"
        if sink:
            await sink(name, await device.read_buffer(tensor.buffer))
        cache_artifacts.append(name)
    plan.release()
    for tensor in owned:
        tensors.release(tensor.name)
    return {"name": case.name, "geometry": case.geometry, "heads": heads, "kv_heads": kv_heads, "head_dim": dim,
            "tokens": case.tokens, "pos": case.pos, "capacity": case.capacity, "force": case.force, "q32": case.q32,
            "prefill": case.prefill, "prefill_kernel": case.prefill_kernel, "kv_f16": case.kv_f16, "half": case.half,
            "short_prompts": case.short_prompts, "kv_f16_refused": cache.f16_refused,
            "rope": case.rope, "rope_layout": config.rope_layout, "rope_theta": config.rope_theta,
            "llama3_scaling": config.rope_scaling is not None, "index": index,
            "scale": 1.0 / dim ** 0.5, "why": [d.to_json() for d in attention.decisions],
            "kernels": [call.kernel for call in attention], "steps": steps, "cache_artifacts": cache_artifacts}


async def run_attention_checks(runtime: Runtime, *, preset: str = "ci", only: list[str] | None = None,
                               seed: int = 9, sink=None, progress=no_progress) -> dict:
    if preset not in PRESETS:
        raise ValueError(f"unknown attention preset {preset!r}; known: {sorted(PRESETS)}")
    cases = [c for c in PRESETS[preset] if not only or c.name in only]
    if only and len(cases) != len(only):
        raise ValueError(f"unknown attention case(s) {sorted(set(only) - {c.name for c in cases})}; "
                         f"known: {[c.name for c in PRESETS[preset]]}")
    results = []
    for index, case in enumerate(cases):
        progress("attention cases", index, len(cases))
        results.append(await _run_case(runtime, case, index, seed, sink))
    progress("attention cases", len(cases), len(cases))
    return {"suite": "attention", "adapter": runtime.device.adapter.to_json(), "preset": preset, "seed": seed,
            "range": vars(QKV_RANGE), "poison_hex": POISON.hex(), "cases": results,
            "result": NOT_CHECKED}      # judged by the host oracle (verify_attention_report)
