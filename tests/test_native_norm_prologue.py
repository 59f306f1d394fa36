"""The RMSNorm prologue of the decode GEMVs (q4_gemv_int8x_glu_q8_norm, q4_gemv_int8x_qkv_rope_norm) through
the native backend: each must write what the unfused pair writes, rms_norm_int8x into Int8Activations then
the same GEMV variant reading them, bit for bit. The prologue repeats rms_norm_int8x's arithmetic (its 256
per-invocation sums in the same order, its tree, y = x * scale * w, the same int8 rounding) and the GEMV
that follows is the plain variant's, so equality is the expected result, not a tolerance; the unfused
pair itself is judged against float64 numpy by test_native_q4.py. Shapes: Llama's hidden size (2048),
Qwen3's (1024), an awkward one (K 352 in groups of 32: 44 octets, fewer than the norm's 256 lanes) and a
long one (K 3200 in groups of 128: 400 octets, more than the norm's 256 lanes), each with a zero group in
the residual row (group scale 0). Where the prologue cannot run the routes fall back to the unfused GEMV
and say why."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from py_runtime.checks.q4_linear import ACT_RANGE, WEIGHT_RANGE
from py_runtime.kernels import kernel as kernel_of
from py_runtime.oneshot import run_op, tensor
from py_runtime.ops.attention import KVCache
from py_runtime.ops.int8_activations import Int8Activations, rms_norm_int8x
from py_runtime.ops.q4 import Q4Weight, q4_quantize, q4_scales_rows
from py_runtime.ops.q4_linear import NormPrologue, QKVRope, gemv_shapes, q4_linear_glu, q4_linear_qkv
from py_runtime.ops.rope import cos_sin_table_gpu, inverse_frequencies
from py_runtime.ops.synth import fill_uniform
from py_runtime.runtime import Runtime

SHAPES = [(2048, 64), (1024, 64), (352, 32), (3200, 128)]   # (K, group size): Llama, Qwen3, awkward, long
EPS = 1e-5
HEAD_DIM, POS, CAPACITY = 64, 3, 8


async def _residual(runtime, k: int, gs: int, seed: int):
    """The residual row h [1, K] (its second group zero), the norm's weight [K] and int8 activations of h."""
    h = await tensor(runtime, "h", (1, k))
    norm_weight = await tensor(runtime, "norm_w", (k,))
    act = await Int8Activations.allocate(runtime, await tensor(runtime, "xn", (1, k)), gs)
    await run_op(runtime, fill_uniform(target=h, value_range=ACT_RANGE, seed=seed, stream=50),
                 fill_uniform(target=norm_weight, value_range=ACT_RANGE, seed=seed, stream=51))
    runtime.device.write_buffer(h.buffer, bytes(4 * gs), 4 * gs)
    return h, norm_weight, act


async def _weight(runtime, k: int, n: int, gs: int, seed: int) -> Q4Weight:
    packed = await tensor(runtime, "w.packed", (n * k // 8,), dtype="u32")
    scales = await tensor(runtime, "w.scales", (k // gs * n,))
    rows = await tensor(runtime, "w.rows", (k // gs * n,))
    weight = Q4Weight(packed, scales, k, n, gs, scales_rows=rows)
    await run_op(runtime, q4_quantize(weight=weight, synth=(WEIGHT_RANGE, seed, 52)), q4_scales_rows(weight), tokens=1)
    return weight


def _variants(adapter, weight: Q4Weight):
    """(label, adapter, weight) with and without subgroups and the row-major scale copy."""
    without = replace(adapter, device_features=tuple(f for f in adapter.device_features if f != "subgroups"))
    plain_scales = Q4Weight(weight.packed, weight.scales, weight.k, weight.n, weight.group_size)
    for rows_copy, w in ((False, plain_scales), (True, weight)):
        for reduction, device in (("sg", adapter), ("wg", without)):
            yield f"{'_sr' if rows_copy else ''}_{reduction}", device, w


@pytest.mark.parametrize("k, gs", SHAPES)
def test_the_glu_norm_prologue_writes_what_rms_norm_int8x_then_the_glu_write_bit_for_bit(k, gs):
    n = 320           # output rows: five groups of 64 (or ten of 32), the last 64-row workgroup whole

    async def main():
        runtime = await Runtime.create("native")
        h, norm_weight, act = await _residual(runtime, k, gs, seed=5)
        weight = await _weight(runtime, k, 2 * n, gs, seed=6)
        norm = NormPrologue(x=h, weight=norm_weight, eps=EPS)
        results = {}
        for suffix, device, w in _variants(runtime.device.adapter, weight):
            for shape in gemv_shapes("int8x_glu_q8_norm"):
                outs = [await tensor(runtime, f"{side}", (1, n)) for side in ("fused", "plain")]
                values = kernel_of(f"q4gsw_gemv_i8x_glu_q8_norm{suffix}_{shape}").template_values
                group = min(64, values["R"] * values["RG"])     # whole groups per workgroup (32-row shapes: 32)
                quantized = [await Int8Activations.allocate(runtime, out, group) for out in outs]
                fused = q4_linear_glu(act=act, weight=w, out=outs[0], adapter=device, gemv_shape=shape,
                                      int8_out=quantized[0], norm=norm)
                kernel = fused.calls[0].kernel
                assert kernel == f"q4gsw_gemv_i8x_glu_q8_norm{suffix}_{shape}", (kernel, fused.explain())
                plain = q4_linear_glu(act=act, weight=w, out=outs[1], adapter=device, gemv_shape=shape,
                                      int8_out=quantized[1])
                assert plain.calls[0].route == "q4_gemv_int8x_glu_q8"
                got = await run_op(runtime, fused, rms_norm_int8x(x=h, weight=norm_weight, act=act, eps=EPS), plain,
                                   tokens=1, read=[*outs, *quantized[0].tensors, *quantized[1].tensors])
                results[kernel] = [got[t.name] for t in (outs[0], outs[1], *quantized[0].tensors, *quantized[1].tensors)]
                for t in (*outs, *quantized[0].tensors, *quantized[1].tensors):
                    runtime.tensors.release(t.name)
        return results

    results = asyncio.run(main())
    assert len(results) == 4 * len(gemv_shapes("int8x_glu_q8_norm"))
    for kernel, (fused_out, plain_out, fused_words, fused_stats, plain_words, plain_stats) in results.items():
        assert any(fused_out), f"{kernel}: nothing written"
        assert fused_out == plain_out, f"{kernel}: the f32 output differs from rms_norm_int8x + the GLU's"
        assert fused_words == plain_words, f"{kernel}: the quantized output's words differ"
        assert fused_stats == plain_stats, f"{kernel}: the quantized output's stats differ"


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("k, gs", SHAPES)
def test_the_qkv_rope_norm_prologue_writes_what_rms_norm_int8x_then_the_qkv_rope_write_bit_for_bit(k, gs, layout):
    heads, kv_heads = 2, 1
    n_q, n_kv = heads * HEAD_DIM, kv_heads * HEAD_DIM

    async def main():
        runtime = await Runtime.create("native")
        h, norm_weight, act = await _residual(runtime, k, gs, seed=8)
        weight = await _weight(runtime, k, n_q + 2 * n_kv, gs, seed=9)
        table = await tensor(runtime, "table", (CAPACITY, HEAD_DIM // 2, 2))
        await cos_sin_table_gpu(runtime, table, inverse_frequencies(HEAD_DIM, 500000.0))
        outs = (await tensor(runtime, "q", (1, n_q)), await tensor(runtime, "k", (1, n_kv)),
                await tensor(runtime, "v", (1, n_kv)))
        norm = NormPrologue(x=h, weight=norm_weight, eps=EPS)
        results = {}
        for suffix, device, w in _variants(runtime.device.adapter, weight):
            sides = []
            for side in ("fused", "plain"):
                cache = await KVCache.allocate(runtime, f"{side}{suffix}.cache", capacity=CAPACITY, kv_heads=kv_heads,
                                               head_dim=HEAD_DIM)
                q_out = await tensor(runtime, f"{side}.q_rot", (1, heads, HEAD_DIM))
                rope = QKVRope(q_out=q_out, table=table, cache=cache, layout=layout, pos=POS)
                op = q4_linear_qkv(x=act.x, weight=w, outs=outs, adapter=device, int8=act, rope=rope,
                                   norm=norm if side == "fused" else None)
                sides.append((op, [q_out, cache.k, cache.v]))
            (fused, fused_reads), (plain, plain_reads) = sides
            kernel = fused.calls[0].kernel
            assert kernel == f"q4gsw_gemv_i8x_qkv_rope_{layout}_norm{suffix}_r8u1w8", (kernel, fused.explain())
            assert plain.calls[0].route == "q4_gemv_int8x_qkv_rope"
            got = await run_op(runtime, fused, rms_norm_int8x(x=h, weight=norm_weight, act=act, eps=EPS), plain,
                               tokens=1, read=fused_reads + plain_reads)
            results[kernel] = ([got[t.name] for t in fused_reads], [got[t.name] for t in plain_reads])
            for t in fused_reads + plain_reads:
                runtime.tensors.release(t.name)
        return results

    results = asyncio.run(main())
    assert len(results) == 4
    for kernel, (fused, plain) in results.items():
        for what, a, b in zip(("rotated q", "K cache", "V cache"), fused, plain):
            assert any(a), f"{kernel}: {what}: nothing written"
            assert a == b, f"{kernel}: {what} differs from rms_norm_int8x + the QKV RoPE GEMV's"


def test_the_norm_routes_fall_back_to_the_unfused_gemv_and_say_why():
    """A row past the prologue's workgroup row (K > MAXK), an adapter with too little workgroup memory,
    and no norm asked for: the plain epilogue route runs, and the decision says why (Qwen3's q/k norm:
    tests/test_native_qk_norm_rope.py)."""

    async def main():
        runtime = await Runtime.create("native")
        adapter = runtime.device.adapter
        explained = {}
        for label, k, device in (("long row", 4160, adapter),
                                 ("small memory", 1024, replace(adapter, limits={
                                     **adapter.limits, "maxComputeWorkgroupStorageSize": 8192}))):
            h, norm_weight, act = await _residual(runtime, k, 64, seed=1)
            weight = await _weight(runtime, k, 128, 64, seed=2)
            out = await tensor(runtime, "out", (1, 64))
            out_q = await Int8Activations.allocate(runtime, out, 64)
            op = q4_linear_glu(act=act, weight=weight, out=out, adapter=device, int8_out=out_q,
                               norm=NormPrologue(x=h, weight=norm_weight, eps=EPS))
            explained[label] = (op.calls[0].route, op.decisions[0].passed_over)
            for t in (h, norm_weight, act.x, *act.tensors, weight.packed, weight.scales, weight.scales_rows, out,
                      *out_q.tensors):
                runtime.tensors.release(t.name)
        h, norm_weight, act = await _residual(runtime, 1024, 64, seed=3)
        weight = await _weight(runtime, 1024, 3 * HEAD_DIM, 64, seed=4)
        table = await tensor(runtime, "table", (CAPACITY, HEAD_DIM // 2, 2))
        cache = await KVCache.allocate(runtime, "cache", capacity=CAPACITY, kv_heads=1, head_dim=HEAD_DIM)
        q_out = await tensor(runtime, "q_rot", (1, 1, HEAD_DIM))
        outs = tuple([await tensor(runtime, name, (1, HEAD_DIM)) for name in ("q", "k", "v")])
        rope = QKVRope(q_out=q_out, table=table, cache=cache, layout="half", pos=POS)
        op = q4_linear_qkv(x=act.x, weight=weight, outs=outs, adapter=adapter, int8=act, rope=rope)
        explained["no norm"] = (op.calls[0].route, op.decisions[0].passed_over)
        with pytest.raises(ValueError, match=r"norm: x .* and weight .* must be f32 rows of K = 1024"):
            q4_linear_qkv(x=act.x, weight=weight, outs=outs, adapter=adapter, int8=act, rope=rope,
                          norm=NormPrologue(x=outs[0], weight=norm_weight, eps=EPS))
        return explained

    explained = asyncio.run(main())
    route, passed = explained["long row"]
    assert route == "q4_gemv_int8x_glu_q8"
    assert passed == (("q4_gemv_int8x_glu_q8_norm", "K 4160 exceeds the prologue's workgroup row (K <= 4096)"),)
    route, passed = explained["small memory"]
    assert route == "q4_gemv_int8x_glu_q8" and passed[0][0] == "q4_gemv_int8x_glu_q8_norm"
    assert "bytes of workgroup memory; the adapter allows 8192" in passed[0][1]
    route, passed = explained["no norm"]
    assert route == "q4_gemv_int8x_qkv_rope"
    assert passed == (("q4_gemv_int8x_qkv_rope_qknorm_norm", "no RMSNorm prologue asked for (norm=NormPrologue)"),
                      ("q4_gemv_int8x_qkv_rope_qknorm", "no q/k norm before RoPE asked for (QKVRope(qk_norm=))"),
                      ("q4_gemv_int8x_qkv_rope_norm", "no RMSNorm prologue asked for (norm=NormPrologue)"))
