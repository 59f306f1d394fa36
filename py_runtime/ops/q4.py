"""Q4 group-wise symmetric weights ("q4gsw"): quantization and the linear routes.

Layout (../shared/reference/kernels.md section 2): packed bytes [N, K/2] read as u32 words
(nibble i of word j of a row is k = 8j + i, stored as q + 8), f32 scales [K/gs, N].

Routes, first passing guard wins; every route is attested:
  decode (live rows == 1):  q4_gemv_subgroup  subgroups feature, subgroups at most 32 wide
                            q4_gemv_workgroup any adapter (workgroup-memory reduction)
  prefill (live rows > 1):  q4_gemm_bk64      K x N in the Llama set, gs 64, no bias, limits
                            q4_gemm_tiled     any K (multiple of 8), 64 x 64 tiles, BK 32
  fallback (no guard):      q4_linear_generic one invocation per output
  opt-in int8 activations (q4_linear(int8=True), decode only):
                            q4_gemv_int8      each workgroup quantizes x per group (scale = max|x| / 127)
                            into workgroup memory, then dot4I8Packed; gs 32, 64, 128 and K up to
                            int8_max_k, else the f32 GEMV. Differs from the f32 routes by the int8 rounding.
  opt-in pre-quantized int8 activations (q4_linear(int8=Int8Activations), decode only):
                            q4_gemv_int8x     x quantized once by quantize_activations (same rounding as
                            q4_gemv_int8), shared by every linear that reads it; any K, gs of the activations
                            must equal the weight's; vec4-scale variants where rows align to 4
                            q4_gemv_int8x_qkv q4_linear_qkv(int8=act): the decode QKV as one GEMV, three outputs
                            q4_gemv_int8x_glu q4_linear_glu: gate/up as one GEMV, silu(g) * u out (decode only)
                            (each reads the weight's row-major scale copy where it has one: q4_scales_rows)
Both the decode and the prefill dispatch are recorded in a plan; a resize gives the one that does
not apply zero workgroups, so one plan serves prefill then decode and attestation shows what ran.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from ..gpu.device import AdapterReport
from ..dispatch import OpCall, Sizing, linear_grid, live_limit, live_value
from ..tensors import Tensor
from .norm import eps_f32

__all__ = ["Q4Weight", "GROUP_SIZES", "GEMV_SHAPES", "GEMV_INT8_SHAPES", "q4_embedding", "BK64_SHAPES",
           "q4_quantize", "q4_linear", "q4_linear_qkv", "gemv_variant", "int8_max_k", "int8_shape_params", "q4_weight_bytes",
           "stream_read", "Int8Activations", "quantize_activations", "GEMV_INT8X_SHAPES",
           "gemv_int8x_shape_for", "GEMV_INT8X_GLU_SHAPES", "q4_linear_glu", "q4_scales_rows", "GEMV_INT8X_SR_SHAPES",
           "GEMV_INT8X_LATENCY_SHAPES", "rms_norm_int8x"]

GROUP_SIZES = (32, 64, 128)
BK64_SHAPES = {(2048, 8192), (8192, 2048), (2048, 2048)}     # (K, N), the Llama-1B projections
QKV_SHAPE = (2048, 2048, 512)                                 # K, Nq, Nk = Nv
IDLE = (0, 0, 0)
_TILE = 64
GEMV_SHAPES = ("r8", "r4u2", "r4s2", "r2u2s4", "r1u2s8", "r2s8", "w8u4", "w4u4s2", "w4u8", "w16u2", "w16u4",
               "w8u8", "r4s2m", "r2u2s4m", "r2s2m", "w8u4m", "w8u2m", "w4u4s2m")   # the f32 combinations in the yaml

GEMV_INT8_SHAPES = ("i8r4g32", "i8r4g64", "i8r8g64", "i8r2s2g64", "i8r4u2g64", "i8r4g128")   # the I8 combinations
# q4gsw_gemv_i8x.yaml: rows per lane, chunks in flight, row groups (warps), k: warps splitting a row's
# chunks; v: vec4 scales. The latency shapes hold few loads per lane and split a row over warps where it
# is longer than one warp's step (for the GEMVs that take about a dispatch's fixed cost, all but the widest).
GEMV_INT8X_LATENCY_SHAPES = ("r1u1w4k2", "r2u1w2k2", "r1u2w2k4", "r1u4w2k2", "r2u2w1k4", "r1u1w8", "r1u1w2k4")
GEMV_INT8X_SHAPES = ("r2u2w1", "r2u2w2", "r1u4w4", "r4u1w2", "r4u1w1v", "r4u1w2v") + GEMV_INT8X_LATENCY_SHAPES
GEMV_INT8X_GLU_SHAPES = ("r2u2w1", "r4u1w1v", "r4u1w2v")     # the _glu variants' own list
# the _sr variants' (row-major scale copy), every kind
GEMV_INT8X_SR_SHAPES = ("r2u2w1", "r2u2w2", "r1u4w4", "r4u1w2") + GEMV_INT8X_LATENCY_SHAPES


@dataclass(frozen=True)
class Q4Weight:
    """A packed Q4 matrix; a projection may use rows [n_offset, n_offset + n) of it."""

    packed: Tensor          # u32 words, [n_total, k / 8]
    scales: Tensor          # f32, [k / group_size, n_total]
    k: int
    n_total: int
    group_size: int
    n_offset: int = 0
    n: int | None = None
    scales_rows: Tensor | None = None   # optional row-major copy [n_total, K/gs] (q4_scales_rows): int8x decode

    def __post_init__(self):
        if self.group_size not in GROUP_SIZES or self.k % self.group_size:
            raise ValueError(f"Q4 weight {self.packed.name!r}: K {self.k} must be a multiple of the group size "
                             f"{self.group_size}, one of {GROUP_SIZES}")
        if self.packed.dtype != "u32" or self.packed.numel < self.n_total * self.k // 8:
            raise ValueError(f"Q4 weight {self.packed.name!r} must be u32 words, at least {self.n_total * self.k // 8} "
                             f"for [{self.n_total}, {self.k}]")
        if self.scales.numel < self.n_total * self.k // self.group_size:
            raise ValueError(f"Q4 scales {self.scales.name!r} hold too few values for [{self.k // self.group_size}, "
                             f"{self.n_total}]")
        if self.scales_rows is not None and self.scales_rows.numel < self.n_total * self.k // self.group_size:
            raise ValueError(f"Q4 scales_rows {self.scales_rows.name!r} hold too few values for "
                             f"[{self.n_total}, {self.k // self.group_size}]")
        if self.n is None:
            object.__setattr__(self, "n", self.n_total - self.n_offset)
        if not (0 <= self.n_offset and self.n_offset + self.n <= self.n_total):
            raise ValueError(f"Q4 weight {self.packed.name!r}: rows [{self.n_offset}, {self.n_offset + self.n}) "
                             f"outside its {self.n_total} rows")

    def rows(self, n_offset: int, n: int) -> "Q4Weight":
        """A view of rows [n_offset, n_offset + n): one projection of a packed QKV weight."""
        return Q4Weight(self.packed, self.scales, self.k, self.n_total, self.group_size, n_offset, n, self.scales_rows)


@dataclass(frozen=True)
class Int8Activations:
    """An f32 activation row `x` [1, K] quantized to int8 per group of `group_size` values once
    (quantize_activations), for every Q4 GEMV that reads x through the q4_gemv_int8x route. `words`:
    u32 [K / 4], two planes of 16 bytes per 32-value chunk; `stats`: f32 [K / 16], per chunk (its
    group's scale, 8 * sum of its q). See shaders/quant/int8_activations.wgsl."""

    x: Tensor
    words: Tensor
    stats: Tensor
    group_size: int

    def __post_init__(self):
        k = self.x.shape[-1]
        if self.group_size not in GROUP_SIZES or k % self.group_size:
            raise ValueError(f"int8 activations of {self.x.name!r}: K {k} must be a multiple of the group size "
                             f"{self.group_size}, one of {GROUP_SIZES}")
        if self.words.dtype != "u32" or self.words.numel < k // 4 or self.stats.dtype != "f32" or \
                self.stats.numel < k // 16:
            raise ValueError(f"int8 activations of {self.x.name!r}: words must be u32 [{k // 4}] and stats f32 "
                             f"[{k // 16}], got {self.words!r} and {self.stats!r}")

    @property
    def k(self) -> int:
        return self.x.shape[-1]


def quantize_activations(act: Int8Activations, *, rows: int | str = 1) -> OpCall:
    """Quantize act.x into act.words / act.stats: one dispatch, idle unless the live row count is 1
    (the decode: prefill linears read the f32 x)."""
    k, gs = act.k, act.group_size

    def sizing(spec, live):
        active = live_value(rows, live, "quantize_activations") == 1
        return Sizing(workgroups=(-(-k // 8 // spec.invocations), 1, 1) if active else IDLE,
                      params=struct.pack("<2I", k, gs), bytes_moved=(4 * k + k + 8 * (k // 32)) if active else 0)

    return OpCall(label=f"quantize_activations({act.x.name})", kernel="int8_activations", route="int8_activations",
                  tensors={"x": act.x, "words": act.words, "stats": act.stats}, sizing=sizing)


def rms_norm_int8x(*, x: Tensor, weight: Tensor, act: Int8Activations, eps: float, tokens: int | str = 1) -> OpCall:
    """RMSNorm of the decode's one row into act.x (f32, as rms_norm would write it) and its int8
    quantization into act.words / act.stats, in one dispatch (the int8_activations kernel's NORM
    variant): the producer of an int8x GEMV's input emits it quantized. Idle unless the live token
    count is 1; a prefill runs rms_norm."""
    (d,) = weight.shape
    if x.shape[-1] != d or act.k != d or x.dtype != "f32" or weight.dtype != "f32":
        raise ValueError(f"rms_norm_int8x: x {x!r}, weight {weight!r} and the activations' K {act.k} must agree")
    eps32 = eps_f32(eps)

    def sizing(spec, live):
        active = live_value(tokens, live, "rms_norm_int8x") == 1
        return Sizing(workgroups=(1, 1, 1) if active else IDLE, params=struct.pack("<2If", d, act.group_size, eps32),
                      bytes_moved=(4 * 3 * d + d + 8 * (d // 32)) if active else 0, flops=4 * d if active else 0)

    return OpCall(label=f"rms_norm_int8x({x.name}->{act.x.name})", kernel="rms_norm_int8x", route="rms_norm_int8x",
                  tensors={"x": x, "words": act.words, "stats": act.stats, "w": weight, "y": act.x}, sizing=sizing)


def q4_quantize(*, weight: Q4Weight, w: Tensor | None = None, synth: tuple | None = None,
                scales_row_major: bool = False) -> OpCall:
    """Quantize into `weight` (its packed and scales tensors) either the f32 tensor `w` [N, K], or
    the synthetic weight `synth` = (UniformRange, seed, stream), generated in place (w[n, k] is
    element n * K + k of fill_uniform's sequence) so no f32 copy of a large weight ever exists.
    Scales are [K/gs, N] (the linear layout) unless scales_row_major ([N, K/gs], the embedding layout)."""
    n, k = weight.n_total, weight.k
    if (w is None) == (synth is None):
        raise ValueError("q4_quantize: give exactly one of w (a tensor) or synth (range, seed, stream)")
    if w is not None and w.shape != (n, k):
        raise ValueError(f"q4_quantize: w {list(w.shape)} does not match the Q4 weight [{n}, {k}]")
    groups = n * (k // weight.group_size)
    value_range, seed, stream = synth if synth else (None, 0, 0)
    extra = struct.pack("<IIif", seed, stream, value_range.scale_log2, value_range.offset) if synth else bytes(16)

    def sizing(spec, live) -> Sizing:
        return Sizing(workgroups=linear_grid(groups, spec.invocations, live_limit(live)),
                      params=struct.pack("<3I", n, k, weight.group_size) + extra + struct.pack("<I", scales_row_major),
                      bytes_moved=(0 if synth else 4 * n * k) + n * k // 2 + 4 * groups)

    tensors = {"packed": weight.packed, "scales": weight.scales}
    if w is not None:
        tensors["w"] = w
    return OpCall(label=f"q4_quantize({weight.packed.name})", kernel="q4gsw_quantize_synth" if synth else "q4gsw_quantize",
                  route="q4_quantize", tensors=tensors, sizing=sizing)


def q4_scales_rows(weight: Q4Weight) -> OpCall:
    """Fill weight.scales_rows with the row-major copy of weight.scales (once, at load): the int8x
    decode GEMVs then read it (the "_sr" variants, see q4gsw_scales_rows.wgsl); every other route
    keeps reading the reference scales."""
    if weight.scales_rows is None:
        raise ValueError(f"q4_scales_rows: Q4 weight {weight.packed.name!r} has no scales_rows tensor to fill")
    groups, count = weight.k // weight.group_size, weight.n_total * (weight.k // weight.group_size)

    def sizing(spec, live) -> Sizing:
        return Sizing(workgroups=linear_grid(count, spec.invocations, live_limit(live)),
                      params=struct.pack("<2I", groups, weight.n_total), bytes_moved=8 * count)

    return OpCall(label=f"q4_scales_rows({weight.packed.name})", kernel="q4gsw_scales_rows", route="q4_scales_rows",
                  tensors={"scales": weight.scales, "rows": weight.scales_rows}, sizing=sizing)


def _linear_params(weight: Q4Weight, m: int, has_bias: bool) -> bytes:
    return struct.pack("<7I", m, weight.k, weight.n, weight.n_total, weight.n_offset, weight.group_size, int(has_bias))


def q4_weight_bytes(k: int, n: int, group_size: int) -> int:
    """Bytes of an N x K Q4 weight: packed nibbles plus f32 scales."""
    return n * k // 2 + 4 * n * k // group_size


def _cost(weight: Q4Weight, m: int, has_bias: bool) -> tuple[int, int]:
    moved = q4_weight_bytes(weight.k, weight.n, weight.group_size)
    moved += 4 * m * weight.k + 4 * m * weight.n + (4 * weight.n if has_bias else 0)
    return moved, 2 * m * weight.n * weight.k


def gemv_shape_for(k: int, n: int) -> str:
    """The GEMV variant for a K x N weight, from `bench kernels --preset gemv_variants` and
    `gemv_next` on an H200 in Chromium and natively (docs/PERFORMANCE.md): word lanes with many rows
    per thread for vocab-sized N; masked nibbles with two warps per row group for the Llama
    projections (4 rows per thread where N >= 2048, 2 below); four warps for the short Qwen rows,
    whose masked variants were not measured on the H200."""
    if n >= 65536:
        return "w8u4"
    if k >= 2048:
        return "r4s2m" if n >= 2048 else "r2s2m"
    return "r2u2s4"


def int8_shape_params(shape: str) -> tuple[int, int]:
    """(rows per thread, group size) of an int8 GEMV shape name: "i8r4u2g64" -> (4, 64)."""
    found = re.fullmatch(r"i8r(\d+)(?:u\d+)?(?:s\d+)?g(\d+)", shape)
    if not found:
        raise ValueError(f"{shape!r} is not an int8 GEMV shape")
    return int(found.group(1)), int(found.group(2))


def int8_max_k(rows_per_thread: int) -> int:
    """The longest activation row an int8 GEMV variant quantizes into its workgroup memory (the
    template's MAXK: 16 KB in all with the reduction buffer, which grows with R)."""
    return 4096 if rows_per_thread > 4 else 8192


def gemv_int8_shape_for(k: int, n: int, group_size: int) -> str | None:
    """The int8 GEMV variant (a lane owns whole groups, so only gs 64 has a choice of shape), or None
    for the f32 GEMV: K beyond every variant's workgroup memory, or a vocab-sized N with fewer groups
    than a warp has lanes (Qwen's lm_head, K 1024: half the lanes idle, slower than f32 on the H200)."""
    if k > int8_max_k(4) or (n >= 65536 and k // group_size < 32):
        return None
    if group_size != 64:
        return f"i8r4g{group_size}"
    # From `gemv_next` on the H200 (decode chains, both backends; run-to-run spread ~10%): gate/up and
    # lm_head i8r4g64 (~ i8r4u2g64), the 2048-row projections and down i8r2s2g64.
    return "i8r4g64" if n >= 8192 else "i8r2s2g64"


def gemv_int8x_shape_for(k: int, n: int, scales_vec4: bool, glu: bool = False, rows_copy: bool = False) -> str:
    """The pre-quantized int8 GEMV variant for a K x N weight (N: output rows); `scales_vec4`: the
    weight's n_total and n_offset (and N) are multiples of 4, as the vec4-scale ("v") variants require;
    `rows_copy`: the weight has a row-major scale copy (the _sr variants). From `bench kernels --preset
    gemv_int8x` on the H200 in Chromium (decode chains, docs/PERFORMANCE.md): wide N (gate/up, lm_head,
    the fused gate/up) 4 rows per lane with vec4 scales; with the copy 2 rows per lane in two-warp
    workgroups for the fused gate/up (1 row per warp where K is one warp's 32 chunks, Qwen's), 4 for
    lm_head, and one row per warp for the unfused gate/up (87% of the stream against 81%). The others
    are latency-bound: one row per lane and warps enough that one step covers a row with one chunk per
    lane (32 chunks: 8 rows of one warp; 64: two warps per row; 128: four). Llama's down (256 chunks)
    takes 4 warps of 2 chunks with the copy, and without it 2 warps in two steps (75% of the stream
    against 72%: the strided scale loads favour fewer in flight)."""
    wide = glu or (n >= 8192 and k <= 4096)
    chunks = k // 32
    if rows_copy and wide:
        if glu and chunks <= 32:        # Qwen's gate/up: 2 rows per lane would clamp half their chunks
            return "r1u1w8"
        return "r4u1w2" if n >= 65536 else "r2u2w2" if glu else "r1u1w8"
    if wide:
        if scales_vec4:
            return "r4u1w2v"
        return "r2u2w1" if glu else "r4u1w2"
    if chunks <= 32:
        return "r1u1w8"
    if chunks <= 64:
        return "r1u1w4k2"
    if chunks <= 128:
        return "r1u1w2k4"
    return "r1u2w2k4" if rows_copy else "r1u1w4k2"


def _int8x_decode(label: str, act: "Int8Activations", weight: Q4Weight, outs: tuple[Tensor, ...], adapter: AdapterReport,
                  rows: int | str, bias: Tensor | None, shape: str | None, glu: bool = False,
                  x: Tensor | None = None) -> OpCall:
    """The q4_gemv_int8x dispatch (decode only: idle unless the live row count is 1). Three outputs make
    it the fused decode QKV (q4_gemv_int8x_qkv): rows of the packed weight split n_q, n_kv, n_kv; `glu`
    the fused gate/up + SwiGLU (q4_gemv_int8x_glu): gate rows [0, n), up rows [n, 2n), n = the output's.
    `x`: the f32 input the caller's other routes read, which the activations must be the quantization of."""
    if x is not None and act.x is not x:
        raise ValueError(f"{label}: int8 activations of {act.x.name!r} cannot feed x {x.name!r}")
    if act.group_size != weight.group_size or act.k != weight.k:
        raise ValueError(f"{label}: int8 activations of {act.x.name!r} (K {act.k}, groups of {act.group_size}) cannot "
                         f"feed a weight with K {weight.k} in groups of {weight.group_size}")
    n_out = weight.n // 2 if glu else weight.n
    rows_copy = weight.scales_rows is not None
    aligned = weight.n_total % 4 == 0 and weight.n_offset % 4 == 0 and n_out % 4 == 0
    known = GEMV_INT8X_SR_SHAPES if rows_copy else GEMV_INT8X_GLU_SHAPES if glu else GEMV_INT8X_SHAPES
    # With the row-major copy a row's scales are contiguous: the vec4 loads across rows have no use.
    shape = shape or gemv_int8x_shape_for(weight.k, n_out, aligned and not rows_copy, glu, rows_copy)
    if shape not in known:
        raise ValueError(f"{label}: pre-quantized activations need a GEMV shape of {known}, not {shape!r}")
    if shape.endswith("v") and not aligned:
        raise ValueError(f"{label}: {shape!r} loads scales as vec4, which needs n_total ({weight.n_total}), n_offset "
                         f"({weight.n_offset}) and the output rows ({n_out}) to be multiples of 4")
    kind = "_glu" if glu else "_qkv" if len(outs) == 3 else ""
    subgroups = "subgroups" in adapter.device_features      # any width: the kernel caps a warp at its workgroup
    kernel = f"q4gsw_gemv_i8x{kind}{'_sr' if rows_copy else ''}_{'sg' if subgroups else 'wg'}_{shape}"
    route = f"q4_gemv_int8x{kind}"
    qkv = kind == "_qkv"
    has_bias = bias is not None
    capacity = min(o.numel // o.shape[-1] for o in outs)

    def sizing(spec, live):
        m = live_value(rows, live, label)
        if not 0 <= m <= capacity:
            raise ValueError(f"{label}: {m} rows, but the outputs hold {capacity}")
        active = m == 1
        moved, flops = _cost(weight, 1, has_bias)
        rows_per_group = int(spec.params["RG"]) * int(spec.params["R"])     # (KS warps share a row group)
        params = struct.pack("<6I", weight.k, n_out, weight.n_total, weight.n_offset, weight.group_size, int(has_bias))
        if qkv:
            params += struct.pack("<2I", outs[0].shape[-1], outs[1].shape[-1])
        return Sizing(workgroups=linear_grid(-(-n_out // rows_per_group), 1, live_limit(live)) if active else IDLE,
                      params=params, bytes_moved=moved if active else 0, flops=flops if active else 0)

    tensors = {"xq": act.words, "xstats": act.stats, "weights": weight.packed,
               "scales": weight.scales_rows if rows_copy else weight.scales, "out": outs[0]}
    if not glu:
        tensors["bias"] = bias if has_bias else weight.scales
    if qkv:
        tensors.update({"out_k": outs[1], "out_v": outs[2]})
    return OpCall(label=f"{label}.decode", kernel=kernel, route=route, tensors=tensors, sizing=sizing)


def _subgroup_reduction(adapter: AdapterReport) -> bool:
    """The q4gsw_gemv GEMVs' subgroup guard: subgroups at most 32 wide. (wgpu-native reports 4..128 on
    every Vulkan adapter, the H200 included, so natively their workgroup-memory variants run; the int8x
    GEMVs take subgroups of any width.)"""
    sub_max = adapter.info.get("subgroupMaxSize")
    return "subgroups" in adapter.device_features and isinstance(sub_max, int) and 0 < sub_max <= 32


def gemv_variant(adapter: AdapterReport, shape: str) -> tuple[str, str]:
    """(kernel, route) of the decode GEMV this adapter can run, in the given shape. The int8 shapes
    share the reduction guard but report the q4_gemv_int8 route."""
    if shape not in GEMV_SHAPES + GEMV_INT8_SHAPES:
        raise ValueError(f"unknown GEMV shape {shape!r}; known: {GEMV_SHAPES + GEMV_INT8_SHAPES}")
    subgroup = _subgroup_reduction(adapter)
    kernel = f"q4gsw_gemv_{'sg' if subgroup else 'wg'}_{shape}"
    if shape in GEMV_INT8_SHAPES:
        return kernel, "q4_gemv_int8"
    return kernel, "q4_gemv_subgroup" if subgroup else "q4_gemv_workgroup"


def _check_io(x: Tensor, weight: Q4Weight, out: Tensor, bias: Tensor | None, what: str) -> int:
    if x.shape[-1] != weight.k or out.shape[-1] != weight.n:
        raise ValueError(f"{what}: x {list(x.shape)} and out {list(out.shape)} do not fit K={weight.k}, N={weight.n}")
    if bias is not None and bias.shape != (weight.n,):
        raise ValueError(f"{what}: bias {list(bias.shape)} is not [{weight.n}]")
    return min(x.numel // weight.k, out.numel // weight.n)


def q4_linear(*, x: Tensor, weight: Q4Weight, out: Tensor, adapter: AdapterReport, rows: int | str,
              bias: Tensor | None = None, gemv_shape: str | None = None,
              force_route: str | None = None, int8: "bool | Int8Activations" = False) -> list[OpCall]:
    """out[:M] = x[:M] @ dequant(weight).T (+ bias). Returns the dispatches to add to a plan (a
    decode one and a prefill one; the one that does not apply idles). `force_route` pins a route
    (tests and benchmarks): only routes whose guards pass can be pinned, and a pinned decode route
    runs at rows == 1, a pinned prefill route at rows > 1. `int8=True` opts the decode into int8
    activations (q4_gemv_int8) where K allows; elsewhere the f32 GEMV runs, and attestation says so.
    `int8=Int8Activations` (of this x) decodes from activations quantized beforehand (q4_gemv_int8x);
    the plan must run quantize_activations first."""
    label = f"q4_linear({out.name})"
    capacity = _check_io(x, weight, out, bias, label)
    has_bias = bias is not None
    tensors = {"x": x, "weights": weight.packed, "scales": weight.scales, "bias": bias if has_bias else weight.scales,
               "out": out}
    limits = adapter.limits

    def check_rows(m):
        if not 0 <= m <= capacity:
            raise ValueError(f"{label}: {m} rows, but x/out hold {capacity}")

    def decode_sizing(spec, live):
        m = live_value(rows, live, label)
        check_rows(m)
        moved, flops = _cost(weight, 1, has_bias)
        if spec.params.get("I8") and weight.k > int8_max_k(int(spec.params["R"])):
            raise ValueError(f"{label}: K={weight.k} exceeds {spec.name}'s workgroup memory "
                             f"(K <= {int8_max_k(int(spec.params['R']))})")
        rows_per_group = spec.workgroup_size[1] // int(spec.params["KSPLIT"]) * int(spec.params["R"])
        active = m == 1
        grid = linear_grid(-(-weight.n // rows_per_group), 1, live_limit(live)) if active else IDLE
        return Sizing(workgroups=grid, params=struct.pack("<6I", weight.k, weight.n, weight.n_total, weight.n_offset,
                                                          weight.group_size, int(has_bias)),
                      bytes_moved=moved if active else 0, flops=flops if active else 0)

    def gemm_sizing(spec, live):
        m = live_value(rows, live, label)
        check_rows(m)
        moved, flops = _cost(weight, m, has_bias)
        active = m > 1
        grid = (-(-weight.n // _TILE), -(-m // _TILE), 1) if active else IDLE
        return Sizing(workgroups=grid, params=_linear_params(weight, m, has_bias) + struct.pack("<2I", 0, 0),
                      bytes_moved=moved if active else 0, flops=flops if active else 0)

    def generic_sizing(spec, live):
        m = live_value(rows, live, label)
        check_rows(m)
        moved, flops = _cost(weight, m, has_bias)
        return Sizing(workgroups=linear_grid(m * weight.n, spec.invocations, live_limit(live)),
                      params=_linear_params(weight, m, has_bias), bytes_moved=moved, flops=flops)

    prequantized = isinstance(int8, Int8Activations)
    # (the pre-quantized decode picks its own shape: _int8x_decode)
    shape = gemv_shape if prequantized else \
        gemv_shape or (int8 and gemv_int8_shape_for(weight.k, weight.n, weight.group_size)) or gemv_shape_for(weight.k, weight.n)
    if shape and shape in GEMV_INT8_SHAPES and int8_shape_params(shape)[1] != weight.group_size:
        raise ValueError(f"{label}: {shape!r} is an int8 GEMV for another group size than {weight.group_size}")
    decode_kernel, decode_route = (None, None) if prequantized else gemv_variant(adapter, shape)
    prefill_kernel, prefill_route = None, None
    if limits.get("maxComputeWorkgroupStorageSize", 0) >= 2 * _TILE * 32 * 4 and \
            limits.get("maxComputeInvocationsPerWorkgroup", 0) >= 256:
        prefill_kernel, prefill_route = "q4gsw_gemm_bk32", "q4_gemm_tiled"
    if (weight.k, weight.n) in BK64_SHAPES and weight.group_size == 64 and not has_bias and \
            limits.get("maxComputeWorkgroupStorageSize", 0) >= 2 * _TILE * 64 * 4 and \
            limits.get("maxComputeInvocationsPerWorkgroup", 0) >= 256:
        prefill_kernel, prefill_route = "q4gsw_gemm_bk64", "q4_gemm_bk64"
    if limits.get("maxComputeInvocationsPerWorkgroup", 0) < 256:
        decode_kernel = None            # the GEMV variants are 256 invocations wide
    decode = OpCall(label=f"{label}.decode", kernel=decode_kernel, route=decode_route, tensors=tensors,
                    sizing=decode_sizing) if decode_kernel else None
    if prequantized:
        decode = _int8x_decode(label, int8, weight, (out,), adapter, rows, bias, gemv_shape, x=x)
    calls = {
        "decode": decode,
        "prefill": OpCall(label=f"{label}.prefill", kernel=prefill_kernel, route=prefill_route, tensors=tensors,
                          sizing=gemm_sizing) if prefill_kernel else None,
        "generic": OpCall(label=f"{label}.generic", kernel="q4gsw_linear_generic", route="q4_linear_generic",
                          tensors=tensors, sizing=generic_sizing),
    }
    if force_route is not None:
        chosen = [c for c in calls.values() if c and c.route == force_route]
        if not chosen:
            raise ValueError(f"{label}: route {force_route!r} is not available here; "
                             f"available: {[c.route for c in calls.values() if c]}")
        return chosen[:1]
    if calls["decode"] is None or calls["prefill"] is None:
        return [calls["generic"]]
    return [calls["decode"], calls["prefill"]]


def q4_linear_glu(*, act: Int8Activations, weight: Q4Weight, out: Tensor, adapter: AdapterReport,
                  rows: int | str = 1, gemv_shape: str | None = None) -> OpCall:
    """out = silu(x @ W_gate.T) * (x @ W_up.T) for a packed [2N, K] weight (gate rows, then up rows) and
    activations quantized beforehand: one fused decode dispatch (q4_gemv_int8x_glu), idle unless the live
    row count is 1. A prefill runs gate, up and swiglu as separate ops."""
    label = f"q4_linear_glu({out.name})"
    if weight.n % 2 or out.shape[-1] != weight.n // 2:
        raise ValueError(f"{label}: a [{weight.n}, {weight.k}] gate/up weight does not give out {list(out.shape)}: "
                         f"it needs 2 x {out.shape[-1]} rows")
    return _int8x_decode(label, act, weight, (out,), adapter, rows, None, gemv_shape, glu=True)


def q4_linear_qkv(*, x: Tensor, weight: Q4Weight, outs: tuple[Tensor, Tensor, Tensor], adapter: AdapterReport,
                  rows: int | str, int8: "Int8Activations | None" = None, gemv_shape: str | None = None) -> list[OpCall]:
    """q, k, v = x @ W.T for a packed [Nq + 2 Nkv, K] weight. The fused BK64 kernel for the exact
    Llama geometry (K 2048, Nq 2048, Nkv 512, gs 64) at rows > 1; otherwise three ordinary linears
    over row ranges of the same packed weight. With pre-quantized activations `int8` (of x), the decode
    is one fused GEMV writing the three outputs (q4_gemv_int8x_qkv), at any shape; `gemv_shape` picks
    its variant (default: gemv_int8x_shape_for)."""
    q_out, k_out, v_out = outs
    n_q, n_kv = q_out.shape[-1], k_out.shape[-1]
    if v_out.shape[-1] != n_kv or weight.n != n_q + 2 * n_kv:
        raise ValueError(f"q4_linear_qkv: outputs {[list(t.shape) for t in outs]} do not split a {weight.n}-row weight")
    first = weight.n_offset         # the weight may itself be rows of a larger stack
    views = (weight.rows(first, n_q), weight.rows(first + n_q, n_kv), weight.rows(first + n_q + n_kv, n_kv))
    separate = [call for view, out in zip(views, outs)
                for call in q4_linear(x=x, weight=view, out=out, adapter=adapter, rows=rows)]
    if int8 is not None and all(c.route != "q4_linear_generic" for c in separate):
        prefill = [c for c in separate if not c.route.startswith("q4_gemv")]
        separate = [_int8x_decode("q4_linear_qkv", int8, weight, outs, adapter, rows, None, gemv_shape, x=x)] + prefill
    limits = adapter.limits
    fused_fits = ((weight.k, n_q, n_kv) == QKV_SHAPE and weight.group_size == 64 and weight.n == weight.n_total
                  and limits.get("maxComputeWorkgroupStorageSize", 0) >= 2 * _TILE * 64 * 4
                  and limits.get("maxStorageBuffersPerShaderStage", 0) >= 7)
    if not fused_fits:
        return separate
    capacity = min(x.numel // weight.k, q_out.numel // n_q, k_out.numel // n_kv, v_out.numel // n_kv)

    def fused_sizing(spec, live):
        m = live_value(rows, live, "q4_linear_qkv")
        if not 0 <= m <= capacity:
            raise ValueError(f"q4_linear_qkv: {m} rows, but x/outputs hold {capacity}")
        moved, flops = _cost(weight, m, False)
        active = m > 1
        grid = (-(-weight.n_total // _TILE), -(-m // _TILE), 1) if active else IDLE
        params = struct.pack("<9I", m, weight.k, weight.n_total, weight.n_total, 0, weight.group_size, 0, n_q, n_kv)
        return Sizing(workgroups=grid, params=params, bytes_moved=moved if active else 0, flops=flops if active else 0)

    fused = OpCall(label="q4_linear_qkv.fused", kernel="q4gsw_gemm_qkv_bk64", route="q4_qkv_fused_bk64",
                   tensors={"x": x, "weights": weight.packed, "scales": weight.scales, "bias": weight.scales, "out": q_out,
                            "out_k": k_out, "out_v": v_out},
                   sizing=fused_sizing)
    decode_only = [c for c in separate if c.route.startswith("q4_gemv")]
    return decode_only + [fused]


def q4_embedding(*, ids: Tensor, weight: Q4Weight, out: Tensor, status: Tensor, tokens: int | str,
                 nibble_high_first: bool = False, scales_transposed: bool = True) -> OpCall:
    """out[t] = dequant(weight[ids[t]]) for t < tokens (zeros and status[t] = 1 for ids >= vocab).
    `weight` is [vocab, dim] (k = dim); the two conventions are immutable controls, packed into the
    params on every sizing so a resize of `tokens` can never drop them."""
    vocab, dim = weight.n_total, weight.k
    if ids.dtype != "u32" or status.dtype != "u32" or out.shape[-1] != dim:
        raise ValueError(f"q4_embedding: ids {ids!r}, status {status!r} must be u32 and out {out!r} rows of {dim}")
    capacity = min(ids.numel, status.numel, out.numel // dim)

    def sizing(spec, live) -> Sizing:
        t = live_value(tokens, live, "q4_embedding")
        if not 0 <= t <= capacity:
            raise ValueError(f"q4_embedding({out.name}): {t} tokens, but ids/status/out hold {capacity}")
        n = t * dim
        return Sizing(workgroups=linear_grid(n, spec.invocations, live_limit(live)) if n else IDLE,
                      params=struct.pack("<6I", t, dim, vocab, weight.group_size, int(nibble_high_first),
                                         int(scales_transposed)),
                      bytes_moved=n // 2 + 4 * n // weight.group_size + 4 * n + 8 * t, flops=n)

    return OpCall(label=f"q4_embedding({out.name})", kernel="q4gsw_embedding", route="q4_embedding",
                  tensors={"ids": ids, "packed": weight.packed, "scales": weight.scales, "out": out, "status": status}, sizing=sizing)


def stream_read(*, data: Tensor, sink: Tensor, nbytes: int | None = None, offset: int = 0, store: bool = False) -> OpCall:
    """Read bytes [offset, offset + nbytes) of `data` once (default: all of it), one vec4 per
    invocation up to 65535 workgroups, then grid-stride (the bandwidth yardstick). `store`: every
    workgroup also writes its fold to `sink` (a read plus a kernel's write-back)."""
    nbytes = data.nbytes - offset if nbytes is None else nbytes
    if offset % 16 or nbytes < 16 or offset + nbytes > data.nbytes:
        raise ValueError(f"stream_read({data.name}): range [{offset}, {offset + nbytes}) must be 16-byte aligned, "
                         f"at least 16 bytes, within {data.nbytes}")
    words4 = nbytes // 16

    def sizing(spec, live):
        workgroups = max(1, min(65535, -(-words4 // spec.invocations)))
        return Sizing(workgroups=(workgroups, 1, 1), params=struct.pack("<2I", words4, offset // 16),
                      bytes_moved=16 * words4)

    return OpCall(label=f"stream_read({data.name}@{offset})", kernel="stream_read_store" if store else "stream_read",
                  route="stream_read",
                  tensors={"data": data, "sink": sink}, sizing=sizing)
