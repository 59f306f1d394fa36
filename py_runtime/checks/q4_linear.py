"""Q4 checks: the quantizer against its twin, and every linear route at real and awkward shapes.

Weights are generated and quantized on the GPU (q4gsw_quantize_synth), activations by fill_uniform;
the host rebuilds both with the numpy twins and checks each output element in float64. One plan per
case serves every row count through resize, so decode (rows 1) and prefill (rows > 1) routes are
both attested from the same recording.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, replace

from ..dispatch import TOKENS
from ..kernels import kernel
from ..models.config import LLAMA_3_2_1B, QWEN3_0_6B
from ..ops.int8_activations import Int8Activations, quantize_activations, rms_norm_int8x
from ..ops.argmax import argmax, argmax_blocks_needed
from ..ops.q4 import Q4Weight, q4_embedding, q4_quantize, q4_scales_rows
from ..ops.sample import Sampling, sample, sample_candidates_needed
from ..ops.sequence import NextInput, TokenHistory
from ..ops.attention import KVCache, rope_kv_cache_write
from ..ops.q4_linear import (NormPrologue, QKVRope, gemm_dp4a_shapes, gemm_sgmat_f16_shapes, gemm_sgmat_shapes, gemv_group_size, gemv_shapes, q4_linear,
                              split_k_room,
                             q4_linear_glu, q4_linear_qkv)
from ..ops.rope import cos_sin_table_gpu, inverse_frequencies
from ..ops.synth import UniformRange, fill_uniform
from ..plan import Plan
from ..routing import RouteUnavailable
from ..runtime import Runtime
from ..tensors import Tensor
from .outcome import NOT_CHECKED, no_progress
from .unary import POISON

__all__ = ["LinearCase", "EmbeddingCase", "EMBEDDING_CASES", "PRESETS", "WEIGHT_RANGE", "ACT_RANGE", "BIAS_RANGE",
           "NORM_RANGE", "NORM_EPS", "run_q4_checks"]

WEIGHT_RANGE = UniformRange(scale_log2=-28, offset=-(2.0 ** -5))      # [-1/32, 1/32): LLM-like weights
ACT_RANGE = UniformRange(scale_log2=-23, offset=-1.0)                 # [-1, 1)
BIAS_RANGE = UniformRange(scale_log2=-26, offset=-(2.0 ** -3))        # [-1/8, 1/8)
NORM_RANGE = UniformRange(scale_log2=-23, offset=-1.0)                # [-1, 1): RMSNorm weights, either sign
NORM_EPS = 1e-5
_UPLOAD_WEIGHTS_UP_TO = 16 << 20            # packed bytes; larger weights are checked via outputs only
# The RoPE cases' heads, cache and position: the cache's GPU-side offset is set to ROPE_OFFSET, so the
# token lands at row ROPE_POS + ROPE_OFFSET.
ROPE_HEAD_DIM, ROPE_CAPACITY, ROPE_POS, ROPE_OFFSET, ROPE_THETA = 64, 8, 3, 2, 10000.0


@dataclass(frozen=True)
class LinearCase:
    name: str
    k: int
    n: int                                   # for QKV: n_q
    rows: tuple[int, ...] = (1, 7)
    group_size: int = 64
    bias: bool = False
    n_kv: int | None = None                  # set for a packed QKV weight (n_q + 2 n_kv rows)
    force: str | None = None                 # run this route only (its guard must pass)
    stream: int = 0
    gemv_shape: str | None = None            # pin a GEMV variant (None: the route's choice)
    int8: bool = False                       # decode with int8 activations (q4_gemv_int8)
    int8x: bool = False                      # decode from activations quantized beforehand (q4_gemv_int8x)
    glu: bool = False                        # int8x only: a [2N, K] gate/up weight, out = silu(g) * u (decode)
    glu_q8: bool = False                     # glu only: out also quantized by the GLU (int8_out), beside
                                             # quantize_activations of the same out (bit for bit)
    rope: str | None = None                  # n_kv only: the QKV GEMV also applying RoPE (this layout, heads
                                             # of ROPE_HEAD_DIM) and writing a KV cache, beside
                                             # rope_kv_cache_write of the plain GEMV's q, k, v (bit for bit)
    qk_norm: bool = False                    # rope only: each q and k head normalized first (Qwen3's), on
                                             # both sides (rope_kv_cache_write_norm; the _qknorm route)
    scales_rows: bool = False                # int8x only: the weight carries a row-major scale copy
    norm: bool = False                       # int8x only: x is RMSNorm(raw rows) from rms_norm_int8x
    norm_prologue: bool = False              # norm, glu_q8 or rope only: the GEMV normalizes the raw row
                                             # itself (norm=NormPrologue, its _norm route), bit for bit
    dp4a: bool = False                       # int8x of every row: the prefill takes an int8 GEMM (the
                                             # subgroup-matrix one where the adapter has it, else DP4A)
    gemm_shape: str | None = None            # dp4a or half: pin the GEMM's tile (None: the route's choice)
    half: bool = False                       # f32 x, the prefill on the f16 subgroup-matrix GEMM (opt-in)
    split_k: bool = False                    # dp4a only: a partials scratch, so the subgroup-matrix GEMM may
                                             # split K where its grid is small (q4_linear(partials=))

    @property
    def n_total(self) -> int:
        return self.n + 2 * self.n_kv if self.n_kv else 2 * self.n if self.glu else self.n

    @property
    def gemv_kind(self) -> str | None:
        """The int8x GEMV kernel kind a pinned variant of this case belongs to ("q4gsw_gemv_i8x_glu_q8_sr", ...),
        None for the other routes."""
        if not self.int8x or self.dp4a:
            return None
        kind = ("_glu_q8" if self.glu_q8 else "_glu") if self.glu else \
            (f"_qkv_rope_{self.rope}{'_qknorm' * self.qk_norm}" if self.rope else "_qkv") if self.n_kv else ""
        return f"q4gsw_gemv_i8x{kind}{'_norm' * self.norm_prologue}{'_sr' if self.scales_rows else ''}"


_LLAMA, _QWEN = LLAMA_3_2_1B.linears(), QWEN3_0_6B.linears()     # (K, N) by projection role


def _cases(rows_real: tuple[int, ...], rows_lm: tuple[int, ...], tier: str | None,
           rows_dp4a: tuple[int, ...]) -> list[LinearCase]:
    """The cases at real and awkward shapes, and one or more per GEMV (and DP4A GEMM) variant of `tier`
    (None: every variant, the sweep ones too; "shipped": those a route can reach)."""
    cases = [LinearCase(f"{prefix}.{name}", k, n, rows_lm if name == "lm_head" else rows_real)
             for prefix, config in (("llama", LLAMA_3_2_1B), ("qwen", QWEN3_0_6B))
             for name, k, n in config.linear_shapes()]
    cases += [
        LinearCase("llama.qkv_fused", LLAMA_3_2_1B.hidden, LLAMA_3_2_1B.q_dim, rows_real, n_kv=LLAMA_3_2_1B.kv_dim),
        LinearCase("qwen.qkv_separate", QWEN3_0_6B.hidden, QWEN3_0_6B.q_dim, (1, 7), n_kv=QWEN3_0_6B.kv_dim),
        # Awkward: K not a multiple of the 64 tile (96, 160), N = 1, odd rows, gs 32 and 128, a bias.
        LinearCase("awkward.k96_n1", 96, 1, (1, 3, 7), group_size=32),
        LinearCase("awkward.k160_bias", 160, 72, (1, 5, 67), group_size=32, bias=True),
        LinearCase("awkward.gs128", 256, 40, (1, 9), group_size=128),
        LinearCase("awkward.n_odd_gs64", 128, 131, (1, 65), bias=True),
        LinearCase("route.generic", 160, 72, (1, 5), group_size=32, bias=True, force="q4_linear_generic"),
    ]
    # Every GEMV variant, with K tails shorter than a step (160 = 5 chunks) and N not a multiple of its rows.
    cases += [LinearCase(f"gemv.{shape}", k, 37, (1,), group_size=32, bias=True, gemv_shape=shape)
              for shape in gemv_shapes("f32", tier) for k in (160, 2048)]
    # Int8 activations: real shapes, a prefill taking the f32 routes, a K beyond the workgroup memory
    # and a vocab-sized N with short rows (the f32 GEMV runs instead), each int8 variant with a K tail
    # (3 groups: shorter than a warp's step) and the full Llama K.
    cases += [LinearCase("int8.llama.q_o", *_LLAMA["q"], (1, 7), int8=True),
              LinearCase("int8.llama.down", *_LLAMA["down"], (1,), int8=True),
              LinearCase("int8.k160_bias", 160, 72, (1, 5), group_size=32, bias=True, int8=True),
              LinearCase("int8.k_beyond_workgroup_memory", 8256, 40, (1,), int8=True),
              LinearCase("int8.vocab_with_short_rows", 1024, 65600, (1,), int8=True)]   # f32 GEMV: half the lanes idle
    cases += [LinearCase(f"gemv.{shape}", k, 37, (1,), group_size=gs, bias=True, gemv_shape=shape, int8=True)
              for shape in gemv_shapes("int8", tier) for gs in (gemv_group_size(shape),) for k in (3 * gs, 2048)]
    # Pre-quantized int8 activations: real shapes (a prefill beside them takes the f32 routes), K past
    # the fused route's workgroup memory, gs 32 and 128, a vocab-sized N; every variant with a K tail
    # shorter than a warp's step (5 chunks), N not a multiple of its rows, a bias, and at the Llama K.
    cases += [LinearCase("int8x.llama.q_o", *_LLAMA["q"], (1, 7), int8x=True),
              LinearCase("int8x.llama.down", *_LLAMA["down"], (1,), int8x=True),
              LinearCase("int8x.k8256_gs32", 8256, 40, (1,), group_size=32, int8x=True),
              LinearCase("int8x.gs128_bias", 1024, 300, (1, 3), group_size=128, bias=True, int8x=True),
              LinearCase("int8x.vocab", 2048, 40000, (1,), int8x=True),
              LinearCase("int8x.llama.lm_head", *_LLAMA["lm_head"], (1,), int8x=True),
              # The fused decode QKV (one dispatch, three outputs): Llama's, Qwen's, and odd row counts.
              LinearCase("int8x.llama.qkv", *_LLAMA["q"], (1, 7), n_kv=LLAMA_3_2_1B.kv_dim, int8x=True),
              LinearCase("int8x.qwen.qkv", *_QWEN["q"], (1,), n_kv=QWEN3_0_6B.kv_dim, int8x=True),
              LinearCase("int8x.qkv_odd", 160, 37, (1, 3), group_size=32, n_kv=9, int8x=True)]
    # The fused gate/up + SwiGLU (decode only): Llama's and Qwen's, and odd row counts.
    cases += [LinearCase("int8x.llama.gate_up_glu", *_LLAMA["gate_up"], (1,), int8x=True, glu=True),
              LinearCase("int8x.qwen.gate_up_glu", *_QWEN["gate_up"], (1,), int8x=True, glu=True),
              LinearCase("int8x.glu_odd", 160, 37, (1,), group_size=32, int8x=True, glu=True)]
    # The same writing its output quantized for down too (q4_gemv_int8x_glu_q8, the route's variant),
    # beside quantize_activations of that output: Llama's, Qwen's with the scale copy, and groups of 32
    # in workgroups of 64 rows (the last half past N).
    cases += [LinearCase("int8x.glu_q8.llama", *_LLAMA["gate_up"], (1,), int8x=True, glu=True, glu_q8=True),
              LinearCase("int8x.rows.glu_q8.qwen", *_QWEN["gate_up"], (1,), int8x=True, glu=True, glu_q8=True,
                         scales_rows=True),
              LinearCase("int8x.glu_q8_gs32", 160, 96, (1,), group_size=32, int8x=True, glu=True, glu_q8=True)]
    # (N = 37 is no multiple of 4: the vec4-scale "v" variants get N = 44)
    cases += [LinearCase(f"gemv.{shape}", k, 44 if shape.endswith("v") else 37, (1,), group_size=32, bias=True,
                         gemv_shape=shape, int8x=True)
              for shape in gemv_shapes("int8x", tier) for k in (160, 2048)]
    cases += [LinearCase(f"gemv.qkv.{shape}", k, 44 if shape.endswith("v") else 36, (1,), group_size=32, n_kv=12,
                         gemv_shape=shape, int8x=True)
              for shape in gemv_shapes("int8x_qkv", tier) for k in (160, 2048)]
    # The fused QKV applying RoPE and writing the KV cache (q4_gemv_int8x_qkv_rope) beside the plain QKV
    # and rope_kv_cache_write: Llama's with the scale copy (the decoder's), and each layout's variants
    # with and without the copy (two q heads, one KV head, K tails).
    cases += [LinearCase("int8x.rows.llama.qkv_rope", *_LLAMA["q"], (1,), n_kv=LLAMA_3_2_1B.kv_dim, int8x=True,
                         scales_rows=True, rope="half")]
    cases += [LinearCase(f"gemv.{'rows.' if rows else ''}qkv_rope_{layout}.{shape}", k, 128, (1,), group_size=32,
                         n_kv=64, gemv_shape=shape, int8x=True, scales_rows=rows, rope=layout)
              for layout in ("half", "interleaved") for rows in (False, True)
              for shape in gemv_shapes(f"int8x_qkv_rope_{layout}{'_sr' if rows else ''}", tier) for k in (160, 2048)]
    cases += [LinearCase(f"gemv.glu.{shape}", k, 44 if shape.endswith("v") else 37, (1,), group_size=32,
                         gemv_shape=shape, int8x=True, glu=True)
              for shape in gemv_shapes("int8x_glu", tier) for k in (160, 2048)]
    # The quantizing GLU's shipped shapes with and without the scale copy, groups of 32 (N 96: the second
    # 64-row workgroup half past N). Its sweep shapes need up to 1024 invocations, more than CPU adapters
    # in the browser allow: tests/test_native_q4.py holds them bit-equal to the plain GLU natively.
    cases += [LinearCase(f"gemv.{'rows.' if rows else ''}glu_q8.{shape}", k, 96, (1,), group_size=32,
                         gemv_shape=shape, int8x=True, glu=True, glu_q8=True, scales_rows=rows)
              for rows in (False, True) for shape in gemv_shapes(f"int8x_glu_q8{'_sr' if rows else ''}", "shipped")
              for k in (160, 2048)]
    # The same two epilogue kinds making their own activations from the raw row (the _norm routes: the
    # norm's prologue in each workgroup), their shipped shapes with and without the scale copy.
    cases += [LinearCase(f"gemv.{'rows.' if rows else ''}glu_q8_norm.{shape}", 2048, 96, (1,), group_size=32,
                         gemv_shape=shape, int8x=True, glu=True, glu_q8=True, scales_rows=rows, norm=True,
                         norm_prologue=True)
              for rows in (False, True) for shape in gemv_shapes(f"int8x_glu_q8_norm{'_sr' if rows else ''}", "shipped")]
    cases += [LinearCase(f"gemv.{'rows.' if rows else ''}qkv_rope_{layout}_norm.{shape}", 2048, 128, (1,),
                         group_size=32, n_kv=64, gemv_shape=shape, int8x=True, scales_rows=rows, rope=layout,
                         norm=True, norm_prologue=True)
              for layout in ("half", "interleaved") for rows in (False, True)
              for shape in gemv_shapes(f"int8x_qkv_rope_{layout}_norm{'_sr' if rows else ''}", tier)]
    # The RoPE kinds normalizing each q and k head first (Qwen3's q/k norm: the _qknorm routes) beside
    # rope_kv_cache_write_norm, with and without the RMSNorm prologue and the scale copy.
    cases += [LinearCase(f"gemv.{'rows.' if rows else ''}qkv_rope_{layout}_qknorm{'_norm' * prologue}.{shape}", k, 128,
                         (1,), group_size=32, n_kv=64, gemv_shape=shape, int8x=True, scales_rows=rows, rope=layout,
                         qk_norm=True, norm=prologue, norm_prologue=prologue)
              for layout in ("half", "interleaved") for rows in (False, True) for prologue in (False, True)
              for shape in gemv_shapes(f"int8x_qkv_rope_{layout}_qknorm{'_norm' * prologue}{'_sr' if rows else ''}",
                                       "shipped")
              for k in ((2048,) if prologue else (160, 2048))]
    # The row-major scale copy (the _sr variants): each kind at a real shape (beside a prefill, which
    # keeps reading the reference scales), odd shapes, and every shape with K tails and a bias.
    cases += [LinearCase("int8x.rows.llama.q_o", *_LLAMA["q"], (1, 7), int8x=True, scales_rows=True),
              LinearCase("int8x.rows.llama.qkv", *_LLAMA["q"], (1,), n_kv=LLAMA_3_2_1B.kv_dim, int8x=True, scales_rows=True),
              LinearCase("int8x.rows.llama.gate_up_glu", *_LLAMA["gate_up"], (1,), int8x=True, glu=True, scales_rows=True),
              LinearCase("int8x.rows.vocab", 2048, 40000, (1,), int8x=True, scales_rows=True),
              # the shapes whose picks are latency shapes with the copy (r1u2w2k4, r1u1w8, r1u1w2k4)
              LinearCase("int8x.rows.llama.down", *_LLAMA["down"], (1,), int8x=True, scales_rows=True),
              LinearCase("int8x.rows.llama.gate_up", *_LLAMA["gate_up"], (1,), int8x=True, scales_rows=True),
              LinearCase("int8x.rows.qwen.q", *_QWEN["q"], (1,), int8x=True, scales_rows=True),
              LinearCase("int8x.rows.qwen.down", *_QWEN["down"], (1,), int8x=True, scales_rows=True),
              LinearCase("int8x.rows.qwen.gate_up_glu", *_QWEN["gate_up"], (1,), int8x=True, glu=True, scales_rows=True),
              LinearCase("int8x.rows.gs128_bias", 1024, 300, (1,), group_size=128, bias=True, int8x=True,
                         scales_rows=True),
              LinearCase("int8x.rows.qkv_odd", 160, 37, (1,), group_size=32, n_kv=9, int8x=True, scales_rows=True),
              LinearCase("int8x.rows.glu_odd", 160, 37, (1,), group_size=32, int8x=True, glu=True, scales_rows=True)]
    cases += [LinearCase(f"gemv.rows.{shape}", k, 37, (1,), group_size=32, bias=True, gemv_shape=shape, int8x=True,
                         scales_rows=True)
              for shape in gemv_shapes("int8x_sr", tier) for k in (160, 2048)]
    # K of several steps with a partial last one (8256 = 258 chunks), with and without the copy, and the
    # copy's fused QKV and SwiGLU kinds.
    cases += [LinearCase(f"gemv.lat.{shape}{'.rows' if rows else ''}", 8256, 37, (1,), group_size=32,
                         gemv_shape=shape, int8x=True, scales_rows=rows)
              for rows in (False, True) for shape in gemv_shapes("int8x_sr" if rows else "int8x", tier)
              if not shape.endswith("v")]
    cases += [LinearCase(f"gemv.lat.qkv.{shape}", 2048, 37, (1,), group_size=32, n_kv=9, gemv_shape=shape,
                         int8x=True, scales_rows=True) for shape in gemv_shapes("int8x_qkv_sr", tier)]
    cases += [LinearCase(f"gemv.lat.glu.{shape}", 2048, 37, (1,), group_size=32, gemv_shape=shape, int8x=True,
                         glu=True, scales_rows=True) for shape in gemv_shapes("int8x_glu_sr", tier)]
    # RMSNorm emitting the quantized row (rms_norm_int8x) before the fused QKV and gate/up: Llama's and
    # Qwen's hidden sizes, a row longer than one pass of the workgroup (3072), gs 32 and 128.
    cases += [LinearCase("int8x.norm.llama.qkv", *_LLAMA["q"], (1,), n_kv=LLAMA_3_2_1B.kv_dim, int8x=True, norm=True),
              LinearCase("int8x.norm.qwen.gate_up_glu", *_QWEN["gate_up"], (1,), int8x=True, glu=True, norm=True),
              LinearCase("int8x.norm.k3072_gs32", 3072, 40, (1,), group_size=32, int8x=True, norm=True),
              LinearCase("int8x.norm.k384_gs128", 384, 24, (1,), group_size=128, bias=True, int8x=True, norm=True)]
    # Every row quantized beforehand, the prefill on the DP4A GEMM (the decode row on the int8x GEMV):
    # each projection shape of both models at the prefill row counts, then K tails within a K tile (96,
    # 160: 3 and 5 chunks), N not a multiple of the 64-column tile, rows not of the row tile, gs 32 and
    # 128, a bias, an odd QKV; each tile variant of `tier` at the awkward shape.
    cases += [LinearCase(f"dp4a.{prefix}.{name}", k, n, rows_dp4a, int8x=True, dp4a=True)
              for prefix, config in (("llama", LLAMA_3_2_1B), ("qwen", QWEN3_0_6B))
              for name, k, n in config.linear_shapes() if name != "lm_head"]
    # The QKV as three DP4A GEMMs over row ranges of one weight (Llama's fused f32 GEMM steps aside).
    cases += [LinearCase(f"dp4a.{prefix}.qkv", *config.linears()["q"], rows_dp4a, n_kv=config.kv_dim, int8x=True,
                         dp4a=True) for prefix, config in (("llama", LLAMA_3_2_1B), ("qwen", QWEN3_0_6B))]
    cases += [LinearCase("dp4a.k96_n1", 96, 1, (1, 3, 7), group_size=32, int8x=True, dp4a=True),
              LinearCase("dp4a.k160_bias", 160, 72, (1, 5, 67), group_size=32, bias=True, int8x=True, dp4a=True),
              LinearCase("dp4a.gs128", 256, 40, (1, 9), group_size=128, int8x=True, dp4a=True),
              LinearCase("dp4a.n_odd_gs64", 128, 131, (1, 65, 130), bias=True, int8x=True, dp4a=True),
              LinearCase("dp4a.qkv_odd", 160, 37, (1, 3, 70), group_size=32, n_kv=9, int8x=True, dp4a=True),
              # a QKV whose stacked grid reaches the fused DP4A GEMM at 449 rows (32 x 8 tiles; three separate
              # GEMMs at 7), its outputs' boundaries inside column tiles
              LinearCase("dp4a.qkv_fused", 128, 1000, (7, 449), n_kv=516, int8x=True, dp4a=True),
              # gate/up + SwiGLU as one DP4A GEMM at 449 rows (the gate's own grid 32 x 8 tiles), N not a multiple
              # of its 32 outputs a workgroup; the fused decode GEMV at 1 row
              LinearCase("dp4a.glu", 128, 2040, (1, 449), glu=True, int8x=True, dp4a=True)]
    # The RMSNorm emitting every row quantized (rms_norm_int8x, one workgroup per row) before the QKV and
    # gate/up, and a row longer than one pass of its workgroup.
    cases += [LinearCase("dp4a.norm.llama.qkv", *_LLAMA["q"], rows_dp4a, n_kv=LLAMA_3_2_1B.kv_dim, int8x=True,
                         norm=True, dp4a=True),
              LinearCase("dp4a.norm.qwen.gate_up", *_QWEN["gate_up"], rows_dp4a, int8x=True, norm=True, dp4a=True),
              LinearCase("dp4a.norm.k3072_gs32", 3072, 40, (1, 5, 66), group_size=32, int8x=True, norm=True, dp4a=True)]
    cases += [LinearCase(f"dp4a.tile.{shape}", 160, 131, (2, 129), group_size=32, bias=True, int8x=True, dp4a=True,
                         gemm_shape=shape) for shape in gemm_dp4a_shapes(tier)]
    named = [replace(c, name=c.name if c.k != 2048 or not c.gemv_shape else c.name + ".k2048", stream=200 + i)
             for i, c in enumerate(cases)]
    # Artifacts are named after their case: two cases of one name would check one's outputs against the other.
    twice = sorted({c.name for c in named if sum(d.name == c.name for d in named) > 1})
    if twice:
        raise ValueError(f"q4 cases named twice: {twice}")
    return named


@dataclass(frozen=True)
class EmbeddingCase:
    name: str
    vocab: int
    dim: int
    group_size: int
    nibble_high_first: bool
    scales_transposed: bool
    stream: int


# The tied Llama lm_head layout at the real size, and the other conventions at Qwen's dim.
EMBEDDING_CASES = [
    EmbeddingCase("emb.llama_tied", LLAMA_3_2_1B.vocab, LLAMA_3_2_1B.hidden, 64, False, True, 900),
    EmbeddingCase("emb.rowmajor_high_first", 1000, 1024, 32, True, False, 901),
    EmbeddingCase("emb.rowmajor_low_first", 1000, 1024, 128, False, False, 902),
    EmbeddingCase("emb.transposed_high_first", 777, 96, 32, True, True, 903),
]


def _everywhere(case: LinearCase) -> bool:
    """Whether every adapter runs the case's pinned GEMV variant (WebGPU's default 256 invocations: 32 lanes
    per warp, RG x KS warps); cases without one take a route, which guards its own limits."""
    if not case.gemv_shape or case.gemv_kind is None:
        return True
    values = kernel(f"{case.gemv_kind}_sg_{case.gemv_shape}").template_values
    return 32 * values["RG"] * values["KS"] <= 256


def _embedding_ids(vocab: int) -> list[int]:
    """Edges, a spread of valid ids, and two out of range (the vocab itself and 0xFFFFFFFF)."""
    return [0, vocab - 1, vocab, 1, vocab // 2, 0xFFFFFFFF, vocab // 3, 7 % vocab]


# The projections' real (K, N) shapes, and those of them the browser's CI run keeps (one per route family).
_REAL_SHAPES = {shape for config in (LLAMA_3_2_1B, QWEN3_0_6B) for shape in config.linears().values()}
_BROWSER_REAL = {"llama.q_o", "llama.qkv_fused", "int8.llama.q_o", "int8x.llama.q_o", "int8x.llama.qkv",
                 "int8x.llama.gate_up_glu", "int8x.glu_q8.llama", "int8x.rows.glu_q8.qwen", "int8x.rows.llama.qkv_rope",
                 "int8x.rows.llama.q_o", "int8x.norm.llama.qkv", "dp4a.llama.q_o"}


def _in_browser_ci(case: LinearCase) -> bool:
    """Every case off the real shapes but the variant cases' K-2048 twins (the _norm ones stay: they have no
    other), and _BROWSER_REAL."""
    if case.gemv_shape:
        return case.k != 2048 or case.norm_prologue
    return (case.k, case.n) not in _REAL_SHAPES or case.name in _BROWSER_REAL


def _split_k(prefix: str, rows: tuple[int, ...], stream: int, names: set[str] | None = None) -> list[LinearCase]:
    """The int8 GEMM cases (not pinned to a tile, no norm) again with a partials scratch, so the GEMM splits K
    where its grid is small (k_splits): both models' projections (the QKV as three), K tails, gs 32 and 128,
    a bias, N not a multiple of the tile; `names` keeps those cases only."""
    cases = [c for c in _cases((1, 7), (1,), None, rows) if c.dp4a and not c.gemm_shape and not c.norm
             and (names is None or c.name in names)]
    return [LinearCase(f"{prefix}.split_k.{c.name.removeprefix('dp4a.')}", c.k, c.n, c.rows, c.group_size, c.bias,
                       c.n_kv, int8x=True, dp4a=True, split_k=True, stream=stream + i) for i, c in enumerate(cases)]


# Split K in the native CI run: awkward shapes with K long enough to split (gs 32 with a bias and N past the
# tile, gs 128 whose splits hold whole groups, a QKV of odd widths and a K that splits unevenly), and
# Llama's q_o.
_SPLIT_K_AWKWARD = [LinearCase("split_k.k1024_gs32_bias", 1024, 131, (7, 129), group_size=32, bias=True, int8x=True,
                               dp4a=True, split_k=True, stream=820),
                    LinearCase("split_k.k1280_gs128", 1280, 40, (3, 70), group_size=128, int8x=True, dp4a=True,
                               split_k=True, stream=821),
                    LinearCase("split_k.k640_qkv", 640, 37, (5, 66), n_kv=9, int8x=True, dp4a=True, split_k=True,
                               stream=822),
                    LinearCase("split_k.k1088_odd", 1088, 72, (9, 65), int8x=True, dp4a=True, split_k=True, stream=823)]

PRESETS = {
    # CI: every route, every real shape at decode and a small prefill, every shipped GEMV variant.
    "ci": _cases((1, 7), (1,), "shipped", (1, 7, 128, 129)) + _split_k("dp4a", (7, 129), 800, {"dp4a.llama.q_o"})
          + _SPLIT_K_AWKWARD,
    # The browser's CI run (SwiftShader: its 4-wide subgroups, its limits and the JS path): every route and
    # shipped variant at the awkward shapes and one real shape per route family; the real shapes of every
    # projection, the K-2048 twins of the variant cases and the 128-row prefill are the native run's (lavapipe).
    # (Not the q/k-normalizing QKV: its 11 storage buffers are more than SwiftShader's 10; nor the H200's
    # 512-invocation _glu_q8 shape r4u1w16, more than SwiftShader's 256: the native run pins it.)
    # (Split K runs in the browser's CI inside the int8x model test, against transformers.)
    "browser": [c for c in _cases((1, 7), (1,), "shipped", (1, 7, 129))
                if _in_browser_ci(c) and not c.qk_norm and _everywhere(c)],
    # The full matrix and the sweep variants too (opt-in: minutes on a CPU adapter).
    "full": _cases((1, 7, 128, 512), (1, 7, 128, 512), None, (1, 7, 128, 129, 512)),
    # The pre-quantized int8 routes alone, every variant (a quick check while tuning them).
    "int8x": [c for c in _cases((1, 7), (1,), None, (1, 7, 128, 129)) if c.int8x],
    # The int8 prefill alone, every DP4A tile (the same cases as in "full").
    "dp4a": [c for c in _cases((1, 7), (1,), None, (1, 7, 128, 129, 512)) if c.dp4a]
            + _split_k("dp4a", (7, 128, 129, 512), 800) + _SPLIT_K_AWKWARD,
    # The same on the subgroup-matrix GEMM, every one of its tiles pinned at the awkward shape and at
    # Llama's gate/up; only for an adapter whose guards let it run (run_q4_checks says why not).
    "sgmat": ([c for c in _cases((1, 7), (1,), None, (1, 7, 128, 129, 512)) if c.dp4a and not c.gemm_shape]
              + [LinearCase(f"sgmat.tile.{shape}", 160, 131, (2, 129), group_size=32, bias=True, int8x=True,
                            dp4a=True, gemm_shape=shape, stream=700 + i) for i, shape in enumerate(gemm_sgmat_shapes())]
              + [LinearCase(f"sgmat.tile.{shape}.gs128", 384, 40, (9, 33), group_size=128, int8x=True, dp4a=True,
                            gemm_shape=shape, stream=740 + i) for i, shape in enumerate(gemm_sgmat_shapes())]
              + [LinearCase(f"sgmat.tile.{shape}.llama.gate_up", *_LLAMA["gate_up"], (7, 512), int8x=True, dp4a=True,
                            gemm_shape=shape, stream=720 + i) for i, shape in enumerate(gemm_sgmat_shapes())]
              + _split_k("sgmat", (7, 128, 129, 512), 780) + _SPLIT_K_AWKWARD),
    # The f16 subgroup-matrix GEMM (half=True): every projection of both models at the prefill row counts,
    # then K tails within a K tile, N not a multiple of the tile, gs 32 and 128, a bias, and every tile pinned
    # at an awkward shape and at Llama's gate/up; only for an adapter with shader-f16 and the f16 config
    # (Chromium on NVIDIA with the f16 flag).
    "sgmat_f16": ([LinearCase(f"f16.{prefix}.{name}", k, n, (7, 128, 129, 512), half=True, stream=740 + i)
                   for i, (prefix, name, k, n) in enumerate(
                       (prefix, name, k, n) for prefix, config in (("llama", LLAMA_3_2_1B), ("qwen", QWEN3_0_6B))
                       for name, k, n in config.linear_shapes() if name != "lm_head")]
                  + [LinearCase("f16.k96_n1", 96, 1, (3, 7), group_size=32, half=True, stream=760),
                     LinearCase("f16.k160_bias", 160, 72, (5, 67), group_size=32, bias=True, half=True, stream=761),
                     LinearCase("f16.gs128", 256, 40, (9, 33), group_size=128, half=True, stream=762),
                     LinearCase("f16.n_odd_gs64", 128, 131, (65, 130), bias=True, half=True, stream=763)]
                  + [LinearCase(f"f16.tile.{shape}", 160, 131, (2, 129), group_size=32, bias=True, half=True,
                                gemm_shape=shape, stream=770 + i) for i, shape in enumerate(gemm_sgmat_f16_shapes())]
                  + [LinearCase(f"f16.tile.{shape}.llama.gate_up", *_LLAMA["gate_up"], (7, 512), half=True,
                                gemm_shape=shape, stream=790 + i) for i, shape in enumerate(gemm_sgmat_f16_shapes())]),
}


async def _run_case(runtime: Runtime, case: LinearCase, seed: int, sink) -> dict:
    tensors, device = runtime.tensors, runtime.device
    k, n_total, gs = case.k, case.n_total, case.group_size
    rows_max = max(case.rows)
    prefix = f"q4.{case.name}"
    packed = await tensors.allocate(f"{prefix}.packed", (n_total * k // 8,), "u32")
    scales = await tensors.allocate(f"{prefix}.scales", (k // gs * n_total,))
    rows_copy = await tensors.allocate(f"{prefix}.scales_rows", (k // gs * n_total,)) if case.scales_rows else None
    weight = Q4Weight(packed, scales, k, n_total, gs, scales_rows=rows_copy)
    x = await tensors.allocate(f"{prefix}.x", (rows_max, k))
    bias = await tensors.allocate(f"{prefix}.bias", (case.n,)) if case.bias else None
    if case.n_kv:
        outs = (await tensors.allocate(f"{prefix}.q", (rows_max, case.n)),
                await tensors.allocate(f"{prefix}.k", (rows_max, case.n_kv)),
                await tensors.allocate(f"{prefix}.v", (rows_max, case.n_kv)))
    else:
        outs = (await tensors.allocate(f"{prefix}.out", (rows_max, case.n)),)
    plan = Plan(runtime, prefix, live={TOKENS: case.rows[0]})
    await plan.add(q4_quantize(weight=weight, synth=(WEIGHT_RANGE, seed, case.stream)))
    if rows_copy is not None:
        await plan.add(q4_scales_rows(weight))
    raw = norm_weight = None
    if case.norm:       # x is then written by the norm, from a raw row and a norm weight
        raw = await tensors.allocate(f"{prefix}.raw", (rows_max, k))
        norm_weight = await tensors.allocate(f"{prefix}.norm_weight", (k,))
        await plan.add(fill_uniform(target=raw, value_range=ACT_RANGE, seed=seed, stream=case.stream + 1000))
        await plan.add(fill_uniform(target=norm_weight, value_range=NORM_RANGE, seed=seed, stream=case.stream + 3000))
    else:
        await plan.add(fill_uniform(target=x, value_range=ACT_RANGE, seed=seed, stream=case.stream + 1000))
    if bias is not None:
        await plan.add(fill_uniform(target=bias, value_range=BIAS_RANGE, seed=seed, stream=case.stream + 2000))
    activations = None
    if case.int8x:
        activations = await Int8Activations.allocate(runtime, x, gs, rows=rows_max if case.dp4a else 1)
        await plan.add(rms_norm_int8x(x=raw, weight=norm_weight, act=activations, eps=NORM_EPS)
                       if case.norm else quantize_activations(activations))
    out_q8 = alone = None
    if case.glu_q8:     # the GLU's int8 out, and quantize_activations' of the same out (a view named apart)
        out_q8 = await Int8Activations.allocate(runtime, outs[0], gs)
        again = Tensor(f"{prefix}.out_again", outs[0].shape, "f32", outs[0].usage, outs[0].buffer)
        alone = await Int8Activations.allocate(runtime, again, gs)
    prologue = NormPrologue(x=raw, weight=norm_weight, eps=NORM_EPS) if case.norm_prologue else None
    partials = await tensors.allocate(f"{prefix}.partials", (split_k_room(),)) if case.split_k else None
    rope = None
    if case.glu:
        linear = q4_linear_glu(act=activations, weight=weight, out=outs[0], adapter=device.adapter,
                               gemv_shape=case.gemv_shape, int8_out=out_q8, norm=prologue)
    elif case.n_kv:
        rope = await _rope_pair(runtime, prefix, case, outs, activations, weight, prologue, seed) if case.rope else None
        linear = q4_linear_qkv(x=x, weight=weight, outs=outs, adapter=device.adapter, int8=activations,
                               gemv_shape=_same_sums_shape(rope["ops"][-1], case) if rope else case.gemv_shape,
                               partials=partials)
    else:
        linear = q4_linear(x=x, weight=weight, out=outs[0], adapter=device.adapter, bias=bias, force=case.force,
                           gemv_shape=case.gemv_shape, gemm_shape=case.gemm_shape, half=case.half,
                           int8=activations if activations else case.int8, partials=partials)
    await plan.add(linear)
    if alone is not None:
        await plan.add(quantize_activations(alone))
    if case.rope:       # rope_kv_cache_write of the plain q, k, v; then the fused QKV into its own q and cache
        for op in rope["ops"]:
            await plan.add(op)
        linear = rope["ops"][-1]        # (reported: the fused QKV's kernels and decisions)
    plan.record()
    runs = []
    for m in case.rows:
        plan.resize(tokens=m)
        for out in outs:
            device.write_buffer(out.buffer, POISON * (m * out.shape[-1]))
        for tensor in (*(out_q8.tensors if out_q8 else ()), *(alone.tensors if alone else ()),
                       *(rope["q_out"] if rope else ())):
            device.write_buffer(tensor.buffer, POISON * tensor.numel)
        for cache in rope["caches"] if rope else ():
            for tensor in (cache.k, cache.v):
                device.write_buffer(tensor.buffer, bytes(tensor.nbytes))
            device.write_buffer(cache.offset.buffer, ROPE_OFFSET.to_bytes(4, "little"))
        execution = await plan.replay()
        artifacts = []
        for out in outs:
            name = f"{prefix}.{out.name.rsplit('.', 1)[1]}.m{m}.f32"
            data = await device.read_buffer(out.buffer, 4 * m * out.shape[-1])
            if sink:
                await sink(name, data)
            artifacts.append(name)
        if activations and m == 1:      # the quantized row itself, checked against the twin (and the norm's row)
            for tensor, suffix in ((activations.words, "u32"), (activations.stats, "f32"),
                                   *(((x, "f32"),) if case.norm else ())):
                name = f"{prefix}.{tensor.name.rsplit('.', 1)[1]}.{suffix}"
                if sink:
                    await sink(name, await device.read_buffer(tensor.buffer))
                artifacts.append(name)
        elif case.dp4a:     # the m quantized rows the GEMM read: K bytes and K / 32 chunk stats each (and the norm's rows)
            for tensor, suffix, nbytes in ((activations.words, "u32", m * k), (activations.stats, "f32", m * k // 4),
                                           *(((x, "f32", 4 * m * k),) if case.norm else ())):
                name = f"{prefix}.{tensor.name.rsplit('.', 1)[1]}.m{m}.{suffix}"
                if sink:
                    await sink(name, await device.read_buffer(tensor.buffer, nbytes))
                artifacts.append(name)
        if alone is not None:       # the GLU's quantized out, then quantize_activations' of the same out
            for tensor, suffix in ((out_q8.words, "u32"), (out_q8.stats, "f32"), (alone.words, "u32"),
                                   (alone.stats, "f32")):
                name = f"{tensor.name}.{suffix}"
                if sink:
                    await sink(name, await device.read_buffer(tensor.buffer))
                artifacts.append(name)
        if rope is not None:        # the fused QKV's q and caches, each beside rope_kv_cache_write's
            (plain_q, fused_q), (plain, fused) = rope["q_out"], rope["caches"]
            for tensor, suffix in ((fused_q, "f32"), (plain_q, "f32"), (fused.k, "u32"), (plain.k, "u32"),
                                   (fused.v, "u32"), (plain.v, "u32")):
                name = f"{tensor.name}.{suffix}"
                if sink:
                    await sink(name, await device.read_buffer(tensor.buffer))
                artifacts.append(name)
        runs.append({"rows": m, "routes": [r for r in execution.routes
                                           if r not in ("q4_quantize", "q4_scales_rows", "fill_uniform")],
                     "artifacts": artifacts})
    weight_artifacts = None
    if sink and packed.nbytes <= _UPLOAD_WEIGHTS_UP_TO:
        weight_artifacts = [f"{prefix}.packed.u32", f"{prefix}.scales.f32"]
        await sink(weight_artifacts[0], await device.read_buffer(packed.buffer))
        await sink(weight_artifacts[1], await device.read_buffer(scales.buffer))
        if rows_copy is not None:
            weight_artifacts.append(f"{prefix}.scales_rows.f32")
            await sink(weight_artifacts[2], await device.read_buffer(rows_copy.buffer))
    plan.release()
    for tensor in (packed, scales, rows_copy, x, raw, norm_weight, bias, partials, *outs,
                   *((activations.words, activations.stats) if activations else ()),
                   *(out_q8.tensors + alone.tensors if alone else ()),
                   *((rope["table"], *rope["q_out"], *rope["qk_norm"],
                      *(t for c in rope["caches"] for t in (c.k, c.v, c.offset))) if rope else ())):
        if tensor is not None:
            tensors.release(tensor.name)
    return {"name": case.name, "k": k, "n": case.n, "n_kv": case.n_kv, "group_size": gs, "bias": case.bias,
            "gemv_shape": case.gemv_shape, "int8": case.int8,
            "int8x": case.int8x, "glu": case.glu, "glu_q8": case.glu_q8, "scales_rows": case.scales_rows,
            "rope": case.rope and {"layout": case.rope, "head_dim": ROPE_HEAD_DIM, "capacity": ROPE_CAPACITY,
                                   "row": ROPE_POS + ROPE_OFFSET, "qk_norm": case.qk_norm},
            "norm": case.norm, "norm_prologue": case.norm_prologue,
            "dp4a": case.dp4a, "gemm_shape": case.gemm_shape, "half": case.half, "split_k": case.split_k,
            "kernels": [call.kernel for call in linear],
                "why": [decision.to_json() for decision in linear.decisions],
            "stream": case.stream, "force": case.force, "runs": runs, "weight_artifacts": weight_artifacts}


def _same_sums_shape(fused, case: LinearCase) -> str:
    """The plain QKV's variant summing as the fused QKV's decode variant does (same unroll and K split; rows
    per lane and warps per workgroup do not change a row's sums), so that the two compare bit for bit
    whichever variant each route's tuning would pick on this adapter."""
    chosen = next(call.kernel for call in fused.calls if call.phase == "decode").rsplit("_", 1)[1]
    kind = "int8x_qkv" + ("_sr" if case.scales_rows else "")

    def sums(shape: str) -> tuple[str, str]:     # r{R}u{U}w{warps}[k{KS}][v]: (U, KS)
        match = re.fullmatch(r"r\d+u(\d+)w\d+(?:k(\d+))?v?", shape)
        return match.group(1), match.group(2) or "1"
    same = [shape for shape in gemv_shapes(kind) if sums(shape) == sums(chosen)]
    if not same:
        raise ValueError(f"{case.name}: no {kind} variant sums as the fused QKV's {chosen} does")
    return same[0]


async def _rope_pair(runtime: Runtime, prefix: str, case: LinearCase, outs, activations, weight,
                     prologue: NormPrologue | None, seed: int) -> dict:
    """A RoPE case's table, two caches and two rotated q's, and its ops: rope_kv_cache_write of the plain
    QKV's q, k, v into the first, the fused QKV (q4_linear_qkv(rope=), the case's variant, normalizing the
    raw row itself given a `prologue`) into the second; with the case's qk_norm both normalize each q and
    k head first with the same weights (and the table is followed by them in the returned tensors)."""
    tensors, dim = runtime.tensors, ROPE_HEAD_DIM
    heads, kv_heads = case.n // dim, case.n_kv // dim
    table = await tensors.allocate(f"{prefix}.rope_table", (ROPE_CAPACITY, dim // 2, 2))
    await cos_sin_table_gpu(runtime, table, inverse_frequencies(dim, ROPE_THETA))
    caches = [await KVCache.allocate(runtime, f"{prefix}.{side}_cache", capacity=ROPE_CAPACITY, kv_heads=kv_heads,
                                     head_dim=dim) for side in ("plain", "fused")]
    q_out = [await tensors.allocate(f"{prefix}.{side}_q_rot", (1, heads, dim)) for side in ("plain", "fused")]
    q, k, v = (Tensor(t.name, (t.shape[0], t.shape[1] // dim, dim), "f32", t.usage, t.buffer) for t in outs)
    qk_norm, ops = None, []
    if case.qk_norm:
        qk_norm = tuple([await tensors.allocate(f"{prefix}.{side}_norm_weight", (dim,)) for side in ("q", "k")])
        ops += [fill_uniform(target=w, value_range=NORM_RANGE, seed=seed, stream=case.stream + 4000 + i)
                for i, w in enumerate(qk_norm)]
    plain = rope_kv_cache_write(q=q, k=k, v=v, q_out=q_out[0], table=table, cache=caches[0], heads=heads,
                                layout=case.rope, pos=ROPE_POS, qk_norm=qk_norm, eps=NORM_EPS)
    fused = q4_linear_qkv(x=activations.x, weight=weight, outs=outs, adapter=runtime.device.adapter, int8=activations,
                          gemv_shape=case.gemv_shape, rope=QKVRope(q_out=q_out[1], table=table, cache=caches[1],
                                                                   layout=case.rope, pos=ROPE_POS, qk_norm=qk_norm,
                                                                   eps=NORM_EPS),
                          norm=prologue)
    return {"ops": [*ops, plain, fused], "table": table, "caches": caches, "q_out": q_out,
            "qk_norm": qk_norm or ()}


async def _run_embedding_case(runtime: Runtime, case: EmbeddingCase, seed: int, sink) -> dict:
    tensors, device = runtime.tensors, runtime.device
    prefix = f"q4.{case.name}"
    ids_list = _embedding_ids(case.vocab)
    packed = await tensors.allocate(f"{prefix}.packed", (case.vocab * case.dim // 8,), "u32")
    scales = await tensors.allocate(f"{prefix}.scales", (case.vocab * case.dim // case.group_size,))
    weight = Q4Weight(packed, scales, case.dim, case.vocab, case.group_size)
    ids = await tensors.allocate(f"{prefix}.ids", (len(ids_list),), "u32")
    out = await tensors.allocate(f"{prefix}.out", (len(ids_list), case.dim))
    status = await tensors.allocate(f"{prefix}.status", (len(ids_list),), "u32")
    device.write_buffer(ids.buffer, struct.pack(f"<{len(ids_list)}I", *ids_list))
    plan = Plan(runtime, prefix, live={TOKENS: len(ids_list)})
    await plan.add(q4_quantize(weight=weight, synth=(WEIGHT_RANGE, seed, case.stream),
                               scales_row_major=not case.scales_transposed))
    await plan.add(q4_embedding(ids=ids, weight=weight, out=out, status=status, tokens="tokens",
                                nibble_high_first=case.nibble_high_first, scales_transposed=case.scales_transposed))
    plan.record()
    runs = []
    for tokens in (len(ids_list), 1):          # a prefill's tokens, then one decode token
        plan.resize(tokens=tokens)
        device.write_buffer(out.buffer, POISON * (tokens * case.dim))
        device.write_buffer(status.buffer, POISON * tokens)
        execution = await plan.replay()
        names = [f"{prefix}.out.t{tokens}.f32", f"{prefix}.status.t{tokens}.u32"]
        if sink:
            await sink(names[0], await device.read_buffer(out.buffer, 4 * tokens * case.dim))
            await sink(names[1], await device.read_buffer(status.buffer, 4 * tokens))
        runs.append({"tokens": tokens, "routes": [r for r in execution.routes if r != "q4_quantize"],
                     "artifacts": names, "params": list(plan.params_of(1))})
    plan.release()
    next_inputs = await _run_next_input(runtime, case, weight, prefix, sink)
    for tensor in (packed, scales, ids, out, status):
        tensors.release(tensor.name)
    return {"name": case.name, "vocab": case.vocab, "dim": case.dim, "group_size": case.group_size,
            "nibble_high_first": case.nibble_high_first, "scales_transposed": case.scales_transposed,
            "stream": case.stream, "ids": ids_list, "runs": runs, "next_inputs": next_inputs}


def _next_input_winners(vocab: int) -> list[int]:
    """Where the head's planted maximum goes: the edges and the middle of the vocabulary."""
    return sorted({0, vocab // 2, vocab - 1})


# The sampled head's draw: every other logit 1,000 below the planted one (a weight under e^-80: never drawn), so
# the draw is the maximum whatever the uniform, through the sampler's non-greedy path (the nucleus, the draw).
_NEXT_INPUT_SAMPLING = Sampling(temperature=1.0, top_k=64, seed=7)
_PLANTED = 1000.0


async def _run_next_input(runtime: Runtime, case: EmbeddingCase, weight: Q4Weight, prefix: str, sink) -> list[dict]:
    """The same rows as a decode step's head writes them (argmax(embed=) and sample(embed=): the next step's
    input): logits with one planted maximum, the chosen row read back, with the chosen id and the params that
    read it, for each head."""
    tensors, device = runtime.tensors, runtime.device
    blocks = argmax_blocks_needed(case.vocab)
    candidates = sample_candidates_needed(case.vocab)
    made = [await tensors.allocate(f"{prefix}.next.{name}", shape, dtype) for name, shape, dtype in (
        ("logits", (case.vocab,), "f32"), ("keys", (max(blocks, candidates),), "u32"),
        ("index", (max(blocks, candidates),), "u32"), ("result", (1,), "u32"), ("offset", (1,), "u32"),
        ("history", (2,), "u32"), ("row", (1, case.dim), "f32"))]
    logits, keys, index, result, offset, history, row = made
    embed = NextInput(weight, row, nibble_high_first=case.nibble_high_first, scales_transposed=case.scales_transposed)
    where = TokenHistory(history, offset, pos=0)
    heads = {"argmax": argmax(values=logits, block_keys=keys, block_index=index, result=result, history=where,
                              embed=embed),
             "sample": sample(values=logits, candidate_keys=keys, candidate_index=index, result=result, offset=offset,
                              sampling=_NEXT_INPUT_SAMPLING, pos=0, history=where, embed=embed)}
    runs = []
    for head, op in heads.items():
        plan = Plan(runtime, f"{prefix}.next.{head}", live={TOKENS: 1})
        await plan.add(op)
        plan.record()
        for winner in _next_input_winners(case.vocab):
            values = [0.0] * case.vocab
            values[winner] = _PLANTED
            device.write_buffer(logits.buffer, struct.pack(f"<{case.vocab}f", *values))
            device.write_buffer(row.buffer, POISON * case.dim)
            device.write_buffer(offset.buffer, bytes(4))
            execution = await plan.replay()
            name = f"{prefix}.next.{head}.row.w{winner}.f32"
            if sink:
                await sink(name, await device.read_buffer(row.buffer, 4 * case.dim))
            (chosen,) = struct.unpack("<I", await device.read_buffer(result.buffer, 4))
            runs.append({"head": head, "planted": winner, "index": chosen, "routes": list(execution.routes),
                         "artifact": name, "params": list(plan.params_of(1))})
        plan.release()
    for tensor in made:
        tensors.release(tensor.name)
    return runs


async def run_q4_checks(runtime: Runtime, *, preset: str = "ci", only: list[str] | None = None, seed: int = 5,
                        sink=None, progress=no_progress) -> dict:
    if preset not in PRESETS:
        raise ValueError(f"unknown q4 preset {preset!r}; known: {sorted(PRESETS)}")
    if preset in ("sgmat", "sgmat_f16"):  # every case must reach the route: refused with its guard's reason, not skipped
        x = Tensor("probe.x", (2, 64), "f32", 0)
        int8 = Int8Activations(x, Tensor("probe.q", (2, 16), "u32", 0), Tensor("probe.t", (2, 4), "f32", 0), 64)
        q4_linear(x=x, weight=Q4Weight(Tensor("probe.w", (64, 8), "u32", 0), Tensor("probe.s", (64,), "f32", 0), 64, 64, 64),
                  out=Tensor("probe.out", (2, 64), "f32", 0), adapter=runtime.device.adapter,
                  **({"force": "q4_gemm_sgmat_i8", "int8": int8} if preset == "sgmat" else
                     {"force": "q4_gemm_sgmat_f16", "half": True}))
    cases = [c for c in PRESETS[preset] if not only or c.name in only]
    if only and len(cases) != len(only):
        known = [c.name for c in PRESETS[preset]]
        raise ValueError(f"unknown q4 case(s) {sorted(set(only) - set(known))}; known: {known}")
    embedding_cases = EMBEDDING_CASES if not only else ()
    total = len(cases) + len(embedding_cases)
    results, embeddings = [], []
    for case in cases:
        progress("q4 cases", len(results), total)
        results.append(await _run_case(runtime, case, seed, sink))
    for case in embedding_cases:
        progress("q4 cases", len(results) + len(embeddings), total)
        embeddings.append(await _run_embedding_case(runtime, case, seed, sink))
    progress("q4 cases", total, total)
    return {"suite": "q4", "adapter": runtime.device.adapter.to_json(), "preset": preset, "seed": seed,
            "ranges": {"weight": vars(WEIGHT_RANGE), "act": vars(ACT_RANGE), "bias": vars(BIAS_RANGE)},
            "cases": results, "embeddings": embeddings,
            "result": NOT_CHECKED}      # the outputs are judged by the host oracle (verify_q4_report), not here
