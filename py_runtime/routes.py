"""Route attestation: which kernels really ran in an execution, as names and a stable bitmask.

Bits are assigned by position in ROUTES and never reused: append new routes at the end.
"""

from __future__ import annotations

__all__ = ["ROUTES", "ATTENTION_ROUTES", "route_bit", "route_mask", "attention_conflicts", "routes_from_mask"]

ROUTES = (
    "fill_uniform",         # synthetic data generator
    "unary",                # elementwise unary family
    "linear_f32_naive",     # f32 linear, one invocation per output (reference/fallback)
    "q4_quantize",          # f32 -> Q4 group-wise symmetric, reference layout
    "q4_gemv_subgroup",     # Q4 decode GEMV, subgroupAdd reduction (32-wide subgroups)
    "q4_gemv_workgroup",    # Q4 decode GEMV, workgroup-memory reduction
    "q4_gemm_tiled",        # Q4 prefill GEMM, 64x64 tiles, BK 32
    "q4_gemm_bk64",         # Q4 prefill GEMM, BK 64, exact Llama shapes
    "q4_linear_generic",    # Q4 linear fallback, one invocation per output
    "q4_qkv_fused_bk64",    # fused Q/K/V BK64 GEMM writing three outputs
    "stream_read",          # bandwidth yardstick
    "binary",               # elementwise binary family (f32, broadcasting)
    "logical",              # logical family on byte-packed bools
    "extrema",              # amax / amin over one dim
    "to_copy",              # dtype conversions
    "fill_typed",           # synthetic i32 / bool / f16 generators (fill_uniform family)
    "rms_norm",             # RMSNorm, one workgroup per row, workgroup-memory tree (incl. per-head q/k norm)
    "rms_norm_subgroup",    # RMSNorm, subgroupAdd + atomic-slot combine (needs 'subgroups')
    "rope_interleaved",     # RoPE, Meta interleaved pairs, host float64 cos/sin table
    "rope_half",            # RoPE, HF rotate-half pairs, host float64 cos/sin table
    "swiglu_fused",         # out = g * sigmoid(g) * up in one kernel
    "residual_add",         # out = a + b
    "residual_add_inplace", # a += b
    "embedding_f32",        # f32 table lookup, out-of-range ids -> zeros + status word
    "argmax",               # two-pass argmax (blocks, then one workgroup), lowest index on ties
    "q4_embedding",         # Q4 embedding lookup, both nibble orders and scale layouts
    "q4_gemv_int8",         # Q4 decode GEMV quantizing x to int8 in workgroup memory (dot4I8Packed), opt-in
    "int8_activations",     # an activation row quantized to int8 per group once, for q4_gemv_int8x
    "q4_gemv_int8x",        # Q4 decode GEMV on pre-quantized int8 activations (dot4I8Packed), opt-in
    "q4_gemv_int8x_qkv",    # the same, fused decode QKV: one dispatch writing q, k and v
    "q4_gemv_int8x_glu",    # the same, fused gate/up + SwiGLU: one dispatch, silu(g) * u out
    "q4_scales_rows",       # a Q4 weight's row-major scale copy, made once for the int8x decode
    "rms_norm_int8x",       # RMSNorm of the decode row, written f32 and quantized for the int8x GEMVs
    "kv_cache_write",       # a step's K and V into the layer's f16-packed KV cache at the live position
    "sdpa_materialized",    # attention: scores, softmax, weighted sum (any GQA geometry, any token count)
    "sdpa_flash_decode",    # attention of one live token: split-K FlashDecoding, then a reduce pass
    "sdpa_k16",             # one-pass online-softmax prefill attention, Llama-3.2-1B's geometry (K16)
    "sdpa_q16",             # the same at Qwen3-0.6B's geometry (Q16)
    "sdpa_q32",             # Qwen3's, 32 rows per workgroup (opt-in, larger workgroup memory)
    "sdpa_flash_subgroup",  # attention of one live token: FlashDecoding's split pass on subgroups, then the reduce
    "rope_kv_cache_write",  # RoPE of q and k fused with the KV cache write (one dispatch for three)
    "q4_gemm_dp4a",         # Q4 prefill GEMM on int8 activations of every row (dot4I8Packed), opt-in
    "arith_probe",          # arithmetic ceiling (dot4I8Packed or fma chains, no memory traffic)
    "last_row",             # the last live row of the hidden state, for the model head
    "token_history",        # retired (argmax's and the sampler's second pass store the token): its bit stays taken
    "rope_table",           # the RoPE cos/sin table built on the GPU from two sqrt-sized float64 tables
    "rope_kv_cache_write_norm",  # the same with Qwen3's per-head q/k RMSNorm folded in front
    "q4_gemm_sgmat_i8",     # Q4 prefill GEMM on int8 activations of every row, int8 subgroup matrices (tensor cores)
    "q4_gemv_int8x_glu_q8",  # the fused gate/up + SwiGLU GEMV also writing its output quantized for down
    "q4_gemv_int8x_qkv_rope",  # the fused decode QKV GEMV also applying RoPE and writing the KV cache
    "dequantize",           # a checkpoint's stored tensor (f16, bf16, ggml Q4_0/Q4_1/Q8_0 blocks) to f32
    "q4_gemm_sgmat_f16",    # Q4 prefill GEMM on f16 subgroup matrices (opt-in half=True; shader-f16 and an f16 config)
    "sample",               # seeded temperature / top-k / top-p sampling (blocks' top k, then rank, nucleus, draw)
    "q4_gemv_int8x_glu_q8_norm",    # q4_gemv_int8x_glu_q8 normalizing and quantizing its own input (the RMSNorm before it)
    "q4_gemv_int8x_qkv_rope_norm",  # q4_gemv_int8x_qkv_rope likewise
    "q4_gemv_int8x_qkv_rope_qknorm",    # q4_gemv_int8x_qkv_rope normalizing each q and k head first (Qwen3)
    "q4_gemv_int8x_qkv_rope_qknorm_norm",   # the same normalizing and quantizing its own input too
    "sdpa_prefill_subgroup",    # one-pass online-softmax prefill attention on subgroups, any G, D 64 or 128
    "q4_gemm_split_k",      # a prefill GEMM's K splits added up (with its bias and residual), small grids
    "sdpa_decode_subgroup",  # attention of one live token in one pass on subgroups (short contexts), any G
    "kv_f16",               # the KV cache written or read in shader-f16 types (the same bytes as the u32-packed pairs)
    "q4_qkv_fused_dp4a",    # the prefill's Q/K/V as one DP4A GEMM writing three outputs (large grids)
    "q4_glu_dp4a",          # the prefill's gate/up + SwiGLU as one DP4A GEMM (large grids)
    "sdpa_prefill_sgmat_f16",   # prefill attention on f16 subgroup matrices (opt-in half=True; shader-f16, an f16 config)
)
ATTENTION_ROUTES: frozenset[str] = frozenset({"sdpa_materialized", "sdpa_flash_decode", "sdpa_k16", "sdpa_q16",
                                                 "sdpa_q32", "sdpa_flash_subgroup", "sdpa_prefill_subgroup",
                                                 "sdpa_decode_subgroup", "sdpa_prefill_sgmat_f16"})
_BITS = {name: i for i, name in enumerate(ROUTES)}


def route_bit(route: str) -> int:
    if route not in _BITS:
        raise KeyError(f"unknown route {route!r}: add it to py_runtime/routes.py ROUTES (append only)")
    return 1 << _BITS[route]


def route_mask(routes) -> int:
    mask = 0
    for route in routes:
        mask |= route_bit(route)
    return mask


def routes_from_mask(mask: int) -> list[str]:
    return [name for name, bit in _BITS.items() if mask >> bit & 1]


def attention_conflicts(routes) -> int:
    """Distinct attention routes beyond the first in one execution (0 when consistent)."""
    return max(0, len(set(routes) & ATTENTION_ROUTES) - 1)
