"""The fused decode QKV with Qwen3's per-head q/k RMSNorm before RoPE (q4_gemv_int8x_qkv_rope_qknorm, and
_qknorm_norm with the RMSNorm prologue) through the native backend: each must write what today's unfused
chain writes, rms_norm_int8x, the plain QKV GEMV (q4_gemv_int8x_qkv) and rope_kv_cache_write_norm, bit for
bit. The epilogue repeats rope_kv_cache_write_norm's arithmetic on the GEMV's own rows (32 lanes per head
summing dot(x, x) of its quarters in the same order, the same 32-wide tree, inverseSqrt(sum / D + eps),
x * scale * w, the same rotation and f16 packing) and the rows are the plain GEMV's (one lane per chunk in
the same order, the same reduction), so equality is the expected result, not a tolerance; the unfused
chain itself is judged against float64 numpy by test_native_q4.py (the q4 checks) and test_native_model.py.
Geometries: Qwen3-0.6B's (K 1024, 16 q heads and 8 KV heads of 128), heads of 64, and an awkward one (K 352
in groups of 32, 3 q heads and 1 KV head of 32: the last workgroup's rows partly past N). Where the fused
route cannot run, the plain QKV and rope_kv_cache_write_norm run, and the decision says why."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from py_runtime.checks.q4_linear import NORM_RANGE
from py_runtime.kernels import kernel
from py_runtime.models.config import QWEN3_0_6B
from py_runtime.oneshot import run_op, tensor
from py_runtime.ops.attention import KVCache, rope_kv_cache_write
from py_runtime.ops.int8_activations import rms_norm_int8x
from py_runtime.ops.q4_linear import NormPrologue, QKVRope, gemv_shapes, q4_linear_qkv
from py_runtime.ops.rope import cos_sin_table_gpu, inverse_frequencies
from py_runtime.ops.synth import fill_uniform
from py_runtime.runtime import Runtime
from py_runtime.tensors import Tensor
from tests.test_native_norm_prologue import _residual, _variants, _weight

# (K, group size, q heads, KV heads, head_dim)
GEOMETRIES = [(QWEN3_0_6B.hidden, 64, QWEN3_0_6B.heads, QWEN3_0_6B.kv_heads, QWEN3_0_6B.head_dim),
              (1024, 64, 4, 2, 64), (352, 32, 3, 1, 32)]
EPS, QK_EPS = 1e-5, QWEN3_0_6B.norm_eps
POS, OFFSET, CAPACITY = 3, 2, 8         # the token lands at cache row POS + OFFSET


def _heads_view(t: Tensor, dim: int) -> Tensor:
    """[1, heads * dim] as [1, heads, dim] (rope_kv_cache_write's shape), the same buffer."""
    return Tensor(t.name, (t.shape[0], t.shape[1] // dim, dim), "f32", t.usage, t.buffer)


def _whole_head_shapes(dim: int) -> list[str]:
    """The shipped RoPE shapes whose workgroup rows (RG x R: 64 for r8u1w8, 128 for r16u1w8) hold whole heads."""
    def rows(shape: str) -> int:
        values = kernel(f"q4gsw_gemv_i8x_qkv_rope_half_qknorm_sg_{shape}").template_values
        return values["RG"] * values["R"]

    shapes = [shape for shape in gemv_shapes("int8x_qkv_rope_half_qknorm", "shipped") if rows(shape) % dim == 0]
    assert shapes, f"no shipped shape holds heads of {dim}"
    return shapes


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("k, gs, heads, kv_heads, dim", GEOMETRIES)
def test_the_qk_norm_rope_gemv_writes_what_the_plain_qkv_then_rope_kv_cache_write_norm_write_bit_for_bit(
        k, gs, heads, kv_heads, dim, layout):
    n_q, n_kv = heads * dim, kv_heads * dim

    async def main():
        runtime = await Runtime.create("native")
        h, norm_weight, act = await _residual(runtime, k, gs, seed=11)
        weight = await _weight(runtime, k, n_q + 2 * n_kv, gs, seed=12)
        qk_norm = (await tensor(runtime, "q_norm", (dim,)), await tensor(runtime, "k_norm", (dim,)))
        table = await tensor(runtime, "table", (CAPACITY, dim // 2, 2))
        await cos_sin_table_gpu(runtime, table, inverse_frequencies(dim, QWEN3_0_6B.rope_theta))
        outs = (await tensor(runtime, "q", (1, n_q)), await tensor(runtime, "k", (1, n_kv)),
                await tensor(runtime, "v", (1, n_kv)))
        norm = NormPrologue(x=h, weight=norm_weight, eps=EPS)
        await run_op(runtime, *[fill_uniform(target=w, value_range=NORM_RANGE, seed=13, stream=60 + i)
                                for i, w in enumerate(qk_norm)])

        async def sides(label):
            cache = await KVCache.allocate(runtime, f"{label}.cache", capacity=CAPACITY, kv_heads=kv_heads,
                                           head_dim=dim)
            q_out = await tensor(runtime, f"{label}.q_rot", (1, heads, dim))
            runtime.device.write_buffer(cache.offset.buffer, OFFSET.to_bytes(4, "little"))
            return q_out, cache

        results = {}
        for suffix, device, w in _variants(runtime.device.adapter, weight):
            # today's chain: the norm, the plain QKV GEMV, the q/k norm + RoPE + cache write
            q_out, cache = await sides(f"plain{suffix}")
            plain = q4_linear_qkv(x=act.x, weight=w, outs=outs, adapter=device, int8=act)
            assert plain.calls[0].route == "q4_gemv_int8x_qkv", plain.explain()
            chain = [rms_norm_int8x(x=h, weight=norm_weight, act=act, eps=EPS), plain,
                     rope_kv_cache_write(q=_heads_view(outs[0], dim), k=_heads_view(outs[1], dim),
                                         v=_heads_view(outs[2], dim), q_out=q_out, table=table, cache=cache,
                                         heads=heads, layout=layout, pos=POS, qk_norm=qk_norm, eps=QK_EPS)]
            plain_reads = [q_out, cache.k, cache.v]
            got = await run_op(runtime, *chain, tokens=1, read=plain_reads)
            expected = [got[t.name] for t in plain_reads]
            for shape in _whole_head_shapes(dim):
                for prologue in (False, True):
                    q_out, cache = await sides(f"fused{suffix}.{shape}.{prologue}")
                    rope = QKVRope(q_out=q_out, table=table, cache=cache, layout=layout, pos=POS, qk_norm=qk_norm,
                                   eps=QK_EPS)
                    fused = q4_linear_qkv(x=act.x, weight=w, outs=outs, adapter=device, int8=act, rope=rope,
                                          gemv_shape=shape, norm=norm if prologue else None)
                    kernel = fused.calls[0].kernel
                    assert kernel == (f"q4gsw_gemv_i8x_qkv_rope_{layout}_qknorm{'_norm' * prologue}{suffix}_{shape}"), \
                        (kernel, fused.explain())
                    assert fused.calls[0].route == "q4_gemv_int8x_qkv_rope_qknorm" + "_norm" * prologue
                    # (without the prologue, act must hold the norm's row: rms_norm_int8x runs first either way)
                    fused_reads = [q_out, cache.k, cache.v]
                    got = await run_op(runtime, rms_norm_int8x(x=h, weight=norm_weight, act=act, eps=EPS), fused,
                                       tokens=1, read=fused_reads)
                    results[kernel] = ([got[t.name] for t in fused_reads], expected)
                    for t in fused_reads + [cache.offset]:
                        runtime.tensors.release(t.name)
        return results

    results = asyncio.run(main())
    assert len(results) == 4 * 2 * len(_whole_head_shapes(dim))
    row_words = kv_heads * dim // 2
    for kernel, (fused, plain) in results.items():
        for what, a, b in zip(("rotated q", "K cache", "V cache"), fused, plain):
            assert any(a), f"{kernel}: {what}: nothing written"
            assert a == b, f"{kernel}: {what} differs from the plain QKV + rope_kv_cache_write_norm's"
        for what, cache in (("K", fused[1]), ("V", fused[2])):     # the token's row and no other
            words = [cache[i:i + 4 * row_words] for i in range(0, len(cache), 4 * row_words)]
            written = [i for i, row in enumerate(words) if any(row)]
            assert written == [POS + OFFSET], f"{kernel}: {what} cache rows {written} written, not {POS + OFFSET}"


def test_the_qk_norm_rope_routes_fall_back_to_the_plain_qkv_and_say_why():
    """Heads of 80 (no shipped workgroup holds whole ones), an adapter with 10 storage buffers per stage
    (the q/k norm's weights make 11 bindings), no q/k norm asked for; bad weights refused early."""

    async def main():
        runtime = await Runtime.create("native")
        adapter = runtime.device.adapter
        explained = {}
        for label, dim, device in (("heads of 80", 80, adapter),
                                   ("10 storage buffers", 128, replace(adapter, limits={
                                       **adapter.limits, "maxStorageBuffersPerShaderStage": 10}))):
            h, norm_weight, act = await _residual(runtime, 1024, 64, seed=1)
            weight = await _weight(runtime, 1024, 4 * dim, 64, seed=2)
            table = await tensor(runtime, "table", (CAPACITY, dim // 2, 2))
            cache = await KVCache.allocate(runtime, "cache", capacity=CAPACITY, kv_heads=1, head_dim=dim)
            q_out = await tensor(runtime, "q_rot", (1, 2, dim))
            outs = (await tensor(runtime, "q", (1, 2 * dim)), await tensor(runtime, "k", (1, dim)),
                    await tensor(runtime, "v", (1, dim)))
            qk_norm = (await tensor(runtime, "q_norm", (dim,)), await tensor(runtime, "k_norm", (dim,)))
            rope = QKVRope(q_out=q_out, table=table, cache=cache, layout="half", pos=POS, qk_norm=qk_norm)
            op = q4_linear_qkv(x=act.x, weight=weight, outs=outs, adapter=device, int8=act, rope=rope,
                               norm=NormPrologue(x=h, weight=norm_weight, eps=EPS))
            explained[label] = (op.calls[0].route, op.decisions[0].passed_over)
            if label == "10 storage buffers":
                op = q4_linear_qkv(x=act.x, weight=weight, outs=outs, adapter=device, int8=act,
                                   rope=replace(rope, qk_norm=None),
                                   norm=NormPrologue(x=h, weight=norm_weight, eps=EPS))
                explained["no q/k norm"] = (op.calls[0].route, op.decisions[0].passed_over)
                with pytest.raises(ValueError, match=r"rope: the k norm weight .* must be f32 \[128\]"):
                    q4_linear_qkv(x=act.x, weight=weight, outs=outs, adapter=device, int8=act,
                                  rope=replace(rope, qk_norm=(qk_norm[0], table)))
            for t in (h, norm_weight, act.x, *act.tensors, weight.packed, weight.scales, weight.scales_rows, table,
                      cache.k, cache.v, cache.offset, q_out, *outs, *qk_norm):
                runtime.tensors.release(t.name)
        return explained

    explained = asyncio.run(main())
    route, passed = explained["heads of 80"]
    assert route == "q4_gemv_int8x_qkv"
    assert [name for name, _ in passed[:2]] == ["q4_gemv_int8x_qkv_rope_qknorm_norm", "q4_gemv_int8x_qkv_rope_qknorm"]
    assert all("r16u1w8's workgroups hold 128 rows, not whole heads of 80" in why for _, why in passed[:2])
    assert all("a q/k norm goes before RoPE (Qwen3's): the _qknorm routes apply it" in why for _, why in passed[2:])
    route, passed = explained["10 storage buffers"]
    assert route == "q4_gemv_int8x_qkv"
    assert all("needs 11 storage buffers per shader stage" in why for _, why in passed[:2])
    route, passed = explained["no q/k norm"]        # Llama's RoPE routes still run there (9 buffers)
    assert route == "q4_gemv_int8x_qkv_rope_norm"
    assert passed[0] == ("q4_gemv_int8x_qkv_rope_qknorm_norm", "no q/k norm before RoPE asked for (QKVRope(qk_norm=))")
