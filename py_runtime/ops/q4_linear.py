"""Q4 linears as routes: out[:M] = x[:M] @ dequant(W).T (+ bias), for one weight (q4_linear), a packed
QKV weight (q4_linear_qkv) and a packed gate/up weight with the SwiGLU fused in (q4_linear_glu).

A linear records a decode dispatch (live tokens == 1) and a prefill dispatch (tokens > 1); at any
live size the one that does not apply idles with zero workgroups, so one plan serves prefill then
decode and attestation shows what ran. Each slot takes the first route whose guard passes:

  decode   q4_gemv_int8x      activations quantized beforehand (int8=Int8Activations, see
                              int8_activations.py); any K; reads the row-major scale copy where the
                              weight has one
           q4_gemv_int8       int8=True: each workgroup quantizes x per group into workgroup memory and
                              multiplies with dot4I8Packed; K must fit that memory, and not a vocab-sized
                              N with fewer groups than a warp has lanes (half the lanes idle: slower than
                              f32 on the H200). Differs from the f32 routes by the int8 rounding.
           q4_gemv_subgroup   subgroups at most 32 wide (the reduction assumes it)
           q4_gemv_workgroup  any adapter with 256-invocation workgroups
  prefill  q4_gemm_sgmat_i8   the DP4A GEMM's inputs and arithmetic, each group's i32 sums made by int8
                              subgroup matrices (tensor cores): the device has the subgroup-matrix
                              feature, lists the i8 x i8 -> i32 16x16x32 config, compiled the probe kernel
                              (AdapterReport.probes) and runs 32-wide subgroups
           q4_gemm_sgmat_f16  half=True (opt-in: f16 rounding of x and of each dequantized weight, f32
                              sums): f16 subgroup matrices on the f32 x; the device has shader-f16 and
                              the subgroup-matrix feature, lists the f16 x f16 -> f32 16x16x16 config,
                              compiled its probe and runs 32-wide subgroups
           q4_gemm_dp4a       activations of every row quantized beforehand (int8=Int8Activations with
                              rows > 1, at least x's): int8 x Q4 with dot4I8Packed, i32 per group and f32
                              across groups; 256 invocations and its tile's workgroup memory. Differs
                              from the f32 GEMMs by the int8 rounding
           q4_gemm_bk64       K x N one the BK64 kernel was built for (Llama-3.2-1B's projections: the
                              seed's guard), gs 64, no bias, 32 KiB of workgroup memory
           q4_gemm_tiled      any K (multiple of 8), 64 x 64 tiles, BK 32
  either slot empty: q4_linear_generic, one invocation per output at every row count, replaces both.

The fused kinds add a route in front of the separate linears: q4_gemv_int8x_qkv (the decode QKV as
one GEMV writing q, k and v) and q4_qkv_fused_bk64 (the prefill QKV at Llama's exact geometry);
q4_gemv_int8x_glu is gate/up + SwiGLU as one decode GEMV; given Int8Activations of its output
(q4_linear_glu(int8_out=)), q4_gemv_int8x_glu_q8 goes first: the same GEMV also writing its output
quantized for the next int8x linear, where a workgroup of the variant holds whole groups of the output;
given a QKVRope, q4_gemv_int8x_qkv_rope goes before q4_gemv_int8x_qkv: the decode QKV also applying
RoPE and writing the KV cache, where a workgroup holds whole heads or an equal part of one (both
elements of its rotation pairs); where the QKVRope has a q/k norm
(Qwen3's per-head RMSNorm before RoPE), q4_gemv_int8x_qkv_rope_qknorm in its place, normalizing each q
and k head first (bit for bit rope_kv_cache_write_norm's; whole heads). Given a NormPrologue (norm=) of
the RMSNorm that produces their activations, q4_gemv_int8x_glu_q8_norm and q4_gemv_int8x_qkv_rope_norm
(q4_gemv_int8x_qkv_rope_qknorm_norm) go first: the same GEMVs computing that norm and its int8
quantization in each workgroup (bit for bit rms_norm_int8x's), so the norm's dispatch can idle at a
decode step; K must fit the prologue's workgroup row (MAXK).

Which variant of a GEMV family runs is a speed choice, not a route: the adapter's tuning table
(tuning.py) picks it; `gemv_shape` pins one (benchmark sweeps, checks), and `gemm_shape` the int8
GEMMs' tile (a DP4A tile such as m64k64 or a subgroup-matrix one such as m64n64; each route runs its
default until an adapter's measurements pick otherwise); `force` runs a named route
(its guard must still pass); `tuning` names a table. `op.explain()` says what was chosen and why.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cache

from ..dispatch import Op, OpCall, Sizing, IDLE, POS, TOKENS, idle_where, linear_grid, live_limit, live_value
from ..gpu.device import AdapterReport
from ..kernels import Kernel, kernel, kernel_names
from ..models.config import LAYOUTS, LLAMA_3_2_1B
from ..routing import Route, RouteUnavailable, choose
from ..tensors import Tensor
from .attention import KVCache
from .int8_activations import Int8Activations
from .norm import eps_f32
from .q4 import Q4Weight, q4_weight_bytes
from .subgroup_matrix import subgroup_matrix_unavailable
from .tuning import Tuning, tuning_for

__all__ = ["q4_linear", "q4_linear_qkv", "q4_linear_glu", "QKVRope", "NormPrologue", "gemv_shapes", "gemv_int8_max_k",
           "rows_fit", "gemv_group_size", "gemm_dp4a_shapes", "GEMM_DP4A_SHAPE", "gemm_sgmat_shapes",
           "gemm_sgmat_f16_shapes", "GEMM_SGMAT_SHAPE", "k_splits", "split_k_room", "GemmTile",
           "DECODE_ROUTES", "PREFILL_ROUTES", "GENERIC_ROUTES", "GLU_ROUTES", "GEMM_BK64_SHAPES", "QKV_FUSED_SHAPE"]

_TILE = 64                      # the GEMMs' output tile (q4gsw_gemm.wgsl)
_GEMV_INVOCATIONS = 256         # every GEMV variant's workgroup (q4gsw_gemv.yaml)
GEMM_DP4A_SHAPE = "m64k64p"     # the DP4A GEMM's tile the route runs (q4gsw_gemm_dp4a.yaml)
GEMM_SGMAT_SHAPE = "m32n64w4p"  # the subgroup-matrix GEMM's tile the route runs (q4gsw_gemm_sgmat.yaml)
# The int8 prefill takes the subgroup-matrix GEMM while the DP4A GEMM's grid would be small, and DP4A from
# this many of its 64 x 64 tiles on (both recorded, one idle at any M): on the H200 the subgroup-matrix
# GEMM is 1.06-1.35x faster up to 96 tiles and DP4A's m64k64p 1.23-1.41x faster from 256 (Llama's
# projections at M 128 and 512, docs/PERFORMANCE.md "Session 19").
SGMAT_UNTIL_DP4A_TILES = 256
# K splits of the subgroup-matrix GEMM where its grid is small (q4_linear(partials=)): workgroups wanted
# (the H200's 132 SMs hold 4 of its 128-invocation workgroups each), splits at most, chunks a split at least.
SPLIT_K_WORKGROUPS = 512
SPLIT_K_MAX = 8
SPLIT_K_MIN_CHUNKS = 8
# The f16 subgroup-matrix GEMM's tiles (q4gsw_gemm_sgmat_f16.yaml), each from the grid it would have at the live
# M: the first tile whose grid reaches its count (H200, Llama's projections at M 128 and 512, docs/PERFORMANCE.md
# "Session 20": m128n128w8k the fastest from 96 tiles, m64n128w8k from 128, m64n64w8 below). A tile the
# adapter's workgroup memory cannot hold is skipped; the last is the guard's.
SGMAT_F16_TIERS = (("m128n128w8k", 96), ("m64n128w8k", 128), ("m64n64w8", 0))
GEMM_SGMAT_F16_SHAPE = SGMAT_F16_TIERS[-1][0]
# The shapes the BK64 GEMM and the fused QKV GEMM were built for: the seed's exact-geometry guards.
GEMM_BK64_SHAPES = frozenset(LLAMA_3_2_1B.linears()[role] for role in ("q", "o", "gate_up", "down"))
QKV_FUSED_SHAPE = LLAMA_3_2_1B.qkv_shape()


@cache
def gemv_shapes(kind: str, tier: str | None = None) -> tuple[str, ...]:
    """The variant names (suffixes) the kernel registry holds for a decode GEMV kind: "f32" and "int8"
    (q4gsw_gemv), "int8x", "int8x_qkv", "int8x_qkv_rope_half", "int8x_qkv_rope_interleaved", "int8x_glu",
    "int8x_glu_q8", the two RoPE kinds + "_qknorm" (the q/k norm before RoPE), the RoPE kinds and glu_q8 +
    "_norm" (the RMSNorm prologue), and each of those + "_sr" (q4gsw_gemv_i8x); `tier` keeps the shipped
    (route-reachable) or the sweep (benchmark-only) ones."""
    if kind in ("f32", "int8"):
        prefix, int8 = "q4gsw_gemv_wg_", kind == "int8"
        return tuple(name[len(prefix):] for name in kernel_names(tier) if name.startswith(prefix)
                     and bool(kernel(name).template_values.get("I8")) == int8)
    match = re.fullmatch(r"int8x(_qkv_rope_half|_qkv_rope_interleaved|_qkv|_glu_q8|_glu)?(_qknorm)?(_norm)?(_sr)?",
                         kind)
    ropes = ("_qkv_rope_half", "_qkv_rope_interleaved")
    if not match or (match.group(2) and match.group(1) not in ropes) or (
            match.group(3) and match.group(1) not in ropes + ("_glu_q8",)):
        raise ValueError(f"unknown GEMV kind {kind!r}: f32, int8, int8x, int8x_qkv, int8x_qkv_rope_half, "
                         f"int8x_qkv_rope_interleaved, int8x_glu, int8x_glu_q8, the two RoPE kinds + _qknorm, the "
                         f"RoPE kinds and glu_q8 + _norm, each int8x kind + _sr")
    prefix = f"q4gsw_gemv_i8x{''.join(group or '' for group in match.groups())}_wg_"
    return tuple(name[len(prefix):] for name in kernel_names(tier) if name.startswith(prefix))


@cache
def gemm_dp4a_shapes(tier: str | None = None) -> tuple[str, ...]:
    """The DP4A GEMM's tile variants (suffixes of q4gsw_gemm_dp4a_), `tier` as for gemv_shapes."""
    prefix = "q4gsw_gemm_dp4a_"     # (not its _sk_, _qkv_ and _glu_ forms: a tile's name has no underscore)
    return tuple(name[len(prefix):] for name in kernel_names(tier)
                 if name.startswith(prefix) and "_" not in name[len(prefix):])


@cache
def gemm_sgmat_shapes(tier: str | None = None) -> tuple[str, ...]:
    """The subgroup-matrix GEMM's tile variants (suffixes of q4gsw_gemm_sgmat_), `tier` as for gemv_shapes."""
    prefix = "q4gsw_gemm_sgmat_"
    return tuple(name[len(prefix):] for name in kernel_names(tier)
                 if name.startswith(prefix) and not name.startswith(("q4gsw_gemm_sgmat_f16_", "q4gsw_gemm_sgmat_sk_")))


@cache
def gemm_sgmat_f16_shapes(tier: str | None = None) -> tuple[str, ...]:
    """The f16 subgroup-matrix GEMM's tile variants (suffixes of q4gsw_gemm_sgmat_f16_), `tier` as for
    gemv_shapes."""
    prefix = "q4gsw_gemm_sgmat_f16_"
    return tuple(name[len(prefix):] for name in kernel_names(tier) if name.startswith(prefix))


def _sgmat_tile(shape: str, family: str = "q4gsw_gemm_sgmat") -> tuple[int, int]:
    """(rows, columns) of a subgroup-matrix GEMM variant's output tile."""
    v = {key: int(value) for key, value in kernel(f"{family}_{shape}").template_values.items()}
    return 16 * v["SGM"] * v["FM"], 16 * v["SGN"] * v["FN"]


def _workgroup_refusal(spec: Kernel, limits: dict, what: str) -> str | None:
    """Why the adapter cannot run `spec`'s workgroups (its workgroup memory and invocations, as the registry
    has them), `what` naming them; None where it can."""
    storage = limits.get("maxComputeWorkgroupStorageSize", 0)
    allowed = limits.get("maxComputeInvocationsPerWorkgroup", 0)
    if storage < spec.workgroup_bytes or allowed < spec.invocations:
        return (f"{what} {spec.workgroup_bytes} bytes of workgroup memory and {spec.invocations} invocations; "
                f"the adapter allows {storage} and {allowed}")
    return None


def _sgmat_fits(req: _Linear, shape: str, family: str = "q4gsw_gemm_sgmat") -> str | None:
    """Whether the adapter gives a subgroup-matrix tile its workgroup memory and invocations."""
    return _workgroup_refusal(kernel(f"{family}_{shape}"), req.limits, f"the {shape} tile needs")


@cache
def gemv_int8_max_k(shape: str) -> int:
    """The longest row an int8 GEMV variant quantizes into its workgroup memory (its MAXK)."""
    found = re.search(r"const MAXK: u32 = (\d+)u;", kernel(f"q4gsw_gemv_wg_{shape}").code)
    if not found:
        raise ValueError(f"{shape!r} is not an int8 GEMV variant (no MAXK in q4gsw_gemv_wg_{shape})")
    return int(found.group(1))


def gemv_group_size(shape: str) -> int:
    """The group size an int8 GEMV variant is built for."""
    return int(kernel(f"q4gsw_gemv_wg_{shape}").template_values["GS"])


@dataclass(frozen=True, kw_only=True)
class QKVRope:
    """What a decode QKV GEMV may also do (q4_linear_qkv(rope=)): rope_kv_cache_write's work for its one
    token, with its arguments but q, k and v (the GEMV's own rows): q rotated into q_out [tokens, heads,
    D], K rotated and V into the cache at `pos` (plus the cache's GPU-side offset). `qk_norm` (the q and k
    weights, f32 [head_dim]) normalizes each q and k head first with `eps` (Qwen3's per-head RMSNorm, as
    rope_kv_cache_write(qk_norm=) does): the _qknorm routes."""

    q_out: Tensor
    table: Tensor
    cache: KVCache
    layout: str
    pos: int | str = POS
    qk_norm: tuple[Tensor, Tensor] | None = None
    eps: float = 1e-6


@dataclass(frozen=True, kw_only=True)
class NormPrologue:
    """The RMSNorm whose output a decode GEMV reads (q4_linear_glu(norm=), q4_linear_qkv(norm=)): x's
    first row (f32 [..., K], the residual stream) normalized with `weight` [K] and `eps`, as rms_norm_int8x
    writes it into the GEMV's Int8Activations. A _norm route computes it itself in each workgroup."""

    x: Tensor
    weight: Tensor
    eps: float


def _check_norm(label: str, norm: NormPrologue, k: int) -> None:
    x, weight = norm.x, norm.weight
    if x.dtype != "f32" or weight.dtype != "f32" or x.shape[-1] != k or weight.shape != (k,):
        raise ValueError(f"{label}: norm: x {x!r} and weight {weight!r} must be f32 rows of K = {k} and f32 [{k}]")


@dataclass(frozen=True)
class _Linear:
    """What a linear's route guards and builders see."""

    label: str
    x: Tensor
    weight: Q4Weight
    outs: tuple[Tensor, ...]        # (out,), or (q, k, v) for the fused QKV kinds
    bias: Tensor | None
    tokens: int | str
    adapter: AdapterReport
    int8: bool | Int8Activations
    gemv_shape: str | None
    tuning: Tuning
    glu: bool = False
    gemm_shape: str | None = None
    capacity: int = field(default=0)
    accumulate: bool = False        # out += the product: a residual add folded into the linear
    half: bool = False              # the prefill may round to f16 for the f16 subgroup-matrix GEMM
    int8_out: Int8Activations | None = None     # glu: the output's int8 form, for q4_gemv_int8x_glu_q8
    rope: "QKVRope | None" = None               # qkv: RoPE and the cache write, for q4_gemv_int8x_qkv_rope
    norm: NormPrologue | None = None            # the RMSNorm before it, for the _norm routes
    partials: Tensor | None = None              # scratch for a prefill GEMM's K splits (small grids)

    @property
    def limits(self) -> dict:
        return self.adapter.limits

    @property
    def prequantized(self) -> bool:
        return isinstance(self.int8, Int8Activations)

    @property
    def int8_shape(self) -> str:
        w = self.weight
        return self.gemv_shape or self.tuning.gemv_int8(w.k, w.n, w.group_size)

    def rows(self, live) -> int:
        m = live_value(self.tokens, live, self.label)
        if not 0 <= m <= self.capacity:
            raise ValueError(f"{self.label}: {m} rows, but x/outputs hold {self.capacity}")
        return m


def _int8_cost(weight: Q4Weight, m: int, has_bias: bool, accumulate: bool = False) -> tuple[int, int]:
    """_cost with x read as int8 rows and their chunk stats (the int8 GEMMs)."""
    moved, flops = _cost(weight, m, has_bias, accumulate)
    return moved - 4 * m * weight.k + m * weight.k + 8 * m * (weight.k // 32), flops


def _cost(weight: Q4Weight, m: int, has_bias: bool, accumulate: bool = False) -> tuple[int, int]:
    moved = q4_weight_bytes(weight.k, weight.n, weight.group_size)
    moved += 4 * m * weight.k + 4 * m * weight.n * (2 if accumulate else 1) + (4 * weight.n if has_bias else 0)
    return moved, 2 * m * weight.n * weight.k


def _subgroup_reduction(adapter: AdapterReport) -> bool:
    """The q4gsw_gemv GEMVs' subgroup guard: subgroups at most 32 wide (wgpu-native reports 4..128 on
    every Vulkan adapter, so natively their workgroup-memory variants run; the int8x GEMVs take
    subgroups of any width)."""
    sub_max = adapter.info.get("subgroupMaxSize")
    return "subgroups" in adapter.device_features and isinstance(sub_max, int) and 0 < sub_max <= 32


def _gemv_fits(req: _Linear) -> str | None:
    allowed = req.limits.get("maxComputeInvocationsPerWorkgroup", 0)
    return None if allowed >= _GEMV_INVOCATIONS else \
        f"the GEMV workgroups are {_GEMV_INVOCATIONS} invocations; the adapter allows {allowed}"


# -- decode routes ----------------------------------------------------------------------------------

def _int8x_guard(req: _Linear) -> str | None:
    return None if req.prequantized else "no pre-quantized activations given (int8=Int8Activations)"


def _int8_guard(req: _Linear) -> str | None:
    if req.prequantized or not (req.int8 or req.gemv_shape in gemv_shapes("int8")):
        return "int8 activations not asked for (int8=True)"
    if req.gemv_shape is not None and req.gemv_shape not in gemv_shapes("int8"):
        return f"the pinned variant {req.gemv_shape!r} is an f32 GEMV"
    w, shape = req.weight, req.int8_shape
    if w.k > gemv_int8_max_k(shape):
        return f"K {w.k} exceeds {shape}'s workgroup memory (K <= {gemv_int8_max_k(shape)})"
    if req.gemv_shape is None and w.n >= 65536 and w.k // w.group_size < 32:
        return f"vocab-sized N {w.n} with {w.k // w.group_size} groups per row: fewer than a warp's 32 lanes"
    return _gemv_fits(req)


def _f32_gemv_guard(subgroup: bool):
    def guard(req: _Linear) -> str | None:
        if req.prequantized:
            return "pre-quantized activations take the int8x route"
        if req.gemv_shape in gemv_shapes("int8"):
            return f"the pinned variant {req.gemv_shape!r} is an int8 GEMV"
        if subgroup and not _subgroup_reduction(req.adapter):
            return (f"needs the 'subgroups' feature with subgroups at most 32 wide "
                    f"(subgroupMaxSize {req.adapter.info.get('subgroupMaxSize')})")
        return _gemv_fits(req)
    return guard


def _gemv_decode(route: str):
    def build(req: _Linear) -> OpCall:
        w, has_bias = req.weight, req.bias is not None
        int8 = route == "q4_gemv_int8"
        shape = req.int8_shape if int8 else req.gemv_shape or req.tuning.gemv_f32(w.k, w.n)
        name = f"q4gsw_gemv_{'sg' if _subgroup_reduction(req.adapter) else 'wg'}_{shape}"

        def sizing(spec, live):
            active = req.rows(live) == 1
            moved, flops = _cost(w, 1, has_bias, req.accumulate)
            values = spec.template_values
            rows_per_group = spec.workgroup_size[1] // int(values["KSPLIT"]) * int(values["R"])
            grid = linear_grid(-(-w.n // rows_per_group), 1, live_limit(live)) if active else IDLE
            return Sizing(workgroups=grid, params=spec.pack_params(k=w.k, n=w.n, n_total=w.n_total, n_offset=w.n_offset,
                                                                   group_size=w.group_size, has_bias=has_bias,
                                                                   accumulate=req.accumulate),
                          bytes_moved=moved if active else 0, flops=flops if active else 0)

        return OpCall(label=f"{req.label}.decode", kernel=name, route=route, tensors=_linear_tensors(req), sizing=sizing,
                      phase="decode")
    return build


def _int8x_kind(req: _Linear, epilogue: str = "", norm: bool = False) -> str:
    """The variant kind: "_glu" / "_glu_q8" (epilogue "q8"), "_qkv" / "_qkv_rope_{layout}" (epilogue
    "rope"; + "_qknorm" where a q/k norm goes first), or "" for one output; `norm` adds the RMSNorm
    prologue ("_norm", of the two epilogue kinds)."""
    if req.glu:
        kind = "_glu_q8" if epilogue == "q8" else "_glu"
    elif len(req.outs) == 3:
        kind = f"_qkv_rope_{req.rope.layout}{'_qknorm' * bool(req.rope.qk_norm)}" if epilogue == "rope" else "_qkv"
    else:
        kind = ""
    return kind + "_norm" * norm


def _int8x_shape(req: _Linear, epilogue: str = "") -> str:
    """The variant an int8x GEMV runs: the pinned one, else the tuning table's."""
    w = req.weight
    n_out = w.n // 2 if req.glu else w.n
    rows_copy = w.scales_rows is not None
    if epilogue == "q8":
        return req.gemv_shape or req.tuning.gemv_int8x_glu_q8(w.k, n_out, rows_copy, req.int8_out.group_size)
    if epilogue == "rope":
        return req.gemv_shape or req.tuning.gemv_int8x_qkv_rope(w.k, n_out, req.rope.cache.head_dim, rows_copy)
    aligned = w.n_total % 4 == 0 and w.n_offset % 4 == 0 and n_out % 4 == 0
    # With the row-major copy a row's scales are contiguous: the vec4 loads across rows have no use.
    return req.gemv_shape or req.tuning.gemv_int8x(w.k, n_out, aligned and not rows_copy, req.glu, rows_copy)


def _int8x_kernel(req: _Linear, epilogue: str = "", norm: bool = False) -> str:
    subgroups = "subgroups" in req.adapter.device_features      # any width: the kernel caps a warp at its workgroup
    # (a _norm kind has its base kind's shapes: the tuning table's pick serves both)
    return (f"q4gsw_gemv_i8x{_int8x_kind(req, epilogue, norm)}{_sr(req)}_"
            f"{'sg' if subgroups else 'wg'}_{_int8x_shape(req, epilogue)}")


def _sr(req: _Linear) -> str:
    return "_sr" if req.weight.scales_rows is not None else ""


def _plain_pin(kind: str, other: str):
    """A plain kind's guard against a pinned variant of its epilogue kind (the pin picks the route)."""
    def guard(req: _Linear) -> str | None:
        if req.gemv_shape is not None and req.gemv_shape not in gemv_shapes(f"int8x{kind}{_sr(req)}"):
            return f"the pinned variant {req.gemv_shape!r} is a {other} one"
        return None
    return guard


def rows_fit(rows: int, whole: int, parts: bool = False) -> bool:
    """Whether a workgroup of `rows` output rows holds whole units of `whole` rows (heads, groups), or
    (`parts`) an equal part of one, of 4 rows or more: the epilogue variants' first guard."""
    return rows % whole == 0 or parts and whole % rows == 0 and rows % 4 == 0


def _epilogue_guard(req: _Linear, epilogue: str, whole: int, what: str, buffers: int,
                    norm: bool = False, parts: bool = False) -> str | None:
    """An epilogue variant's limits: its workgroups hold whole `what`s of `whole` rows (`parts`: or an equal
    part of one, of 4 rows or more), and the adapter allows its invocations, workgroup memory and storage
    buffers (`norm`: of the _norm variant)."""
    kind = _int8x_kind(req, epilogue, norm)
    if req.gemv_shape is not None and req.gemv_shape not in gemv_shapes(f"int8x{kind}{_sr(req)}"):
        return f"the pinned variant {req.gemv_shape!r} is a plain {kind.split('_')[1].upper()} one"
    shape = _int8x_shape(req, epilogue)
    spec = kernel(_int8x_kernel(req, epilogue, norm))
    values = spec.template_values
    rows, invocations = values["RG"] * values["R"], spec.invocations
    if not rows_fit(rows, whole, parts):
        return (f"{shape}'s workgroups hold {rows} rows, not whole {what} of {whole}"
                + " nor an equal part of one (of 4 rows or more)" * parts)
    limits = req.limits
    invocations_allowed = limits.get("maxComputeInvocationsPerWorkgroup", 0)
    allowed = min(invocations_allowed, limits.get("maxComputeWorkgroupSizeX", invocations_allowed))
    if invocations > allowed:
        return f"{shape}'s workgroups are {invocations} invocations; the adapter allows {allowed}"
    storage = limits.get("maxComputeWorkgroupStorageSize", 0)
    needed = spec.workgroup_bytes
    if needed > storage:
        return f"{shape} needs {needed} bytes of workgroup memory; the adapter allows {storage}"
    if limits.get("maxStorageBuffersPerShaderStage", 0) < buffers:
        return f"needs {buffers} storage buffers per shader stage"
    return None


def _glu_q8_guard(req: _Linear, norm: bool = False) -> str | None:
    if req.int8_out is None:
        return "no int8 activations of the output given (int8_out=Int8Activations)"
    return _epilogue_guard(req, "q8", req.int8_out.group_size, "groups", 7, norm)


def _qkv_rope_guard(qk_norm: bool):
    """The RoPE epilogue's guard, of the routes with (`qk_norm`) or without the q/k norm before RoPE."""
    def guard(req: _Linear, norm: bool = False) -> str | None:
        if req.rope is None:
            return "no RoPE and KV cache write asked for (rope=QKVRope)"
        if qk_norm and not req.rope.qk_norm:
            return "no q/k norm before RoPE asked for (QKVRope(qk_norm=))"
        if req.rope.qk_norm and not qk_norm:
            return "a q/k norm goes before RoPE (Qwen3's): the _qknorm routes apply it"
        # the q/k norm needs its whole head in one workgroup; RoPE alone its pairs
        return _epilogue_guard(req, "rope", req.rope.cache.head_dim, "heads", 11 if qk_norm else 9, norm,
                               parts=not qk_norm)
    return guard


def _norm_guard(epilogue_guard):
    """A _norm route's guard: its epilogue route's, with the prologue asked for and K within its row."""
    def guard(req: _Linear) -> str | None:
        if req.norm is None:
            return "no RMSNorm prologue asked for (norm=NormPrologue)"
        if why := epilogue_guard(req, norm=True):
            return why
        epilogue = "q8" if req.glu else "rope"
        max_k = kernel(_int8x_kernel(req, epilogue, norm=True)).template_values["MAXK"]
        if req.weight.k > max_k:
            return f"K {req.weight.k} exceeds the prologue's workgroup row (K <= {max_k})"
        return None
    return guard


def _int8x_decode(req: _Linear, epilogue: str = "", norm: bool = False) -> OpCall:
    """The q4_gemv_int8x dispatch (decode only). Three outputs make it the fused decode QKV: rows of the
    packed weight split n_q, n_kv, n_kv; `glu` the fused gate/up + SwiGLU: gate rows [0, n), up rows
    [n, 2n), n = the output's. `epilogue` "q8": that GEMV also writing req.int8_out (the output
    quantized); "rope": the QKV rotating q into req.rope.q_out and writing K and V into its cache.
    `norm`: the _norm variant, reading req.norm's f32 row and making its own activations."""
    act, w, label = req.int8, req.weight, req.label
    n_out = w.n // 2 if req.glu else w.n
    rows_copy = w.scales_rows is not None
    aligned = w.n_total % 4 == 0 and w.n_offset % 4 == 0 and n_out % 4 == 0
    kind = _int8x_kind(req, epilogue)
    shape = _int8x_shape(req, epilogue)
    if shape.endswith("v") and not aligned:
        raise ValueError(f"{label}: {shape!r} loads scales as vec4, which needs n_total ({w.n_total}), n_offset "
                         f"({w.n_offset}) and the output rows ({n_out}) to be multiples of 4")
    name = _int8x_kernel(req, epilogue, norm)
    has_bias = req.bias is not None
    qkv, rope = len(req.outs) == 3, req.rope if epilogue == "rope" else None

    def sizing(spec, live):
        active = req.rows(live) == 1
        moved, flops = _cost(w, 1, has_bias, req.accumulate)
        values = spec.template_values
        rows_per_group = int(values["RG"]) * int(values["R"])     # (KS warps share a row group)
        fields = dict(k=w.k, n=n_out, n_total=w.n_total, n_offset=w.n_offset, group_size=w.group_size,
                      has_bias=has_bias, accumulate=req.accumulate)
        if qkv:
            fields.update(n_q=req.outs[0].shape[-1], n_kv=req.outs[1].shape[-1])
        if epilogue == "q8":
            fields.update(out_group_size=req.int8_out.group_size)
            moved += n_out + 8 * (n_out // 32)          # the int8 row and its chunk stats
        if norm:
            fields.update(eps=eps_f32(req.norm.eps))
            moved += 4 * w.k                            # the f32 row and the norm's weight for the int8 row
        if rope is not None:
            pos = live_value(rope.pos, live, label)
            if active and pos + 1 > min(rope.cache.capacity, rope.table.shape[0]):
                raise ValueError(f"{label}: position {pos} is outside the KV cache's {rope.cache.capacity} rows or "
                                 f"the {rope.table.shape[0]}-row cos/sin table")
            fields.update(half=rope.cache.head_dim // 2, pos=pos, capacity=rope.cache.capacity,
                          table_rows=rope.table.shape[0])
            if rope.qk_norm:
                fields.update(qk_eps=eps_f32(rope.eps))
        return Sizing(workgroups=linear_grid(-(-n_out // rows_per_group), 1, live_limit(live)) if active else IDLE,
                      params=spec.pack_params(**fields), bytes_moved=moved if active else 0,
                      flops=flops if active else 0)

    tensors = {"weights": w.packed, "scales": w.scales_rows if rows_copy else w.scales, "out": req.outs[0]}
    tensors.update({"hidden": req.norm.x, "norm_weight": req.norm.weight} if norm else
                   {"xq": act.words, "xstats": act.stats})
    if not req.glu and rope is None:
        tensors["bias"] = req.bias if has_bias else w.scales
    if rope is not None:
        tensors.update({"out": rope.q_out, "k_cache": rope.cache.k, "v_cache": rope.cache.v, "table": rope.table,
                        "offset": rope.cache.offset})
        if rope.qk_norm:
            tensors.update({"q_norm": rope.qk_norm[0], "k_norm": rope.qk_norm[1]})
    elif qkv:
        tensors.update({"out_k": req.outs[1], "out_v": req.outs[2]})
    if epilogue == "q8":
        tensors.update({"act_words": req.int8_out.words, "act_stats": req.int8_out.stats})
    if rope is not None:
        route = "q4_gemv_int8x_qkv_rope" + "_qknorm" * bool(rope.qk_norm) + "_norm" * norm
    else:
        route = f"q4_gemv_int8x{kind}" + "_norm" * norm
    return OpCall(label=f"{label}.decode", kernel=name, route=route, tensors=tensors, sizing=sizing, phase="decode")


DECODE_ROUTES = (
    Route(name="q4_gemv_int8x", guard=_int8x_guard, build=_int8x_decode),
    Route(name="q4_gemv_int8", guard=_int8_guard, build=_gemv_decode("q4_gemv_int8")),
    Route(name="q4_gemv_subgroup", guard=_f32_gemv_guard(subgroup=True), build=_gemv_decode("q4_gemv_subgroup")),
    Route(name="q4_gemv_workgroup", guard=_f32_gemv_guard(subgroup=False), build=_gemv_decode("q4_gemv_workgroup")),
)


# -- prefill routes and the fallback ------------------------------------------------------------------

def _gemm_fits(req: _Linear, name: str) -> str | None:
    """Whether the adapter gives the f32 GEMM kernel `name` (q4gsw_gemm.wgsl) its workgroup memory and
    invocations."""
    spec = kernel(name)
    return _workgroup_refusal(spec, req.limits, f"BK {spec.template_values['BK']} tiles need")


def _every_row_guard(req: _Linear) -> str | None:
    """The int8 GEMMs' inputs: activations quantized beforehand for every row x and the outputs hold."""
    act = req.int8
    if not req.prequantized or act.rows == 1:
        return "no int8 activations of the prefill rows given (int8=Int8Activations allocated with rows > 1)"
    if act.rows < req.capacity:
        return f"the int8 activations hold {act.rows} rows; x and the outputs hold {req.capacity}"
    if act.group_size != req.weight.group_size:
        return (f"the int8 activations are in groups of {act.group_size}; the GEMMs scale a weight group's sums "
                f"once, so they need the weight's {req.weight.group_size}")
    return None


def _sgmat_guard(req: _Linear) -> str | None:
    if why := _every_row_guard(req):
        return why
    if req.gemm_shape is not None and req.gemm_shape not in gemm_sgmat_shapes():
        return f"the pinned tile {req.gemm_shape!r} is not an int8 subgroup-matrix one"
    if why := subgroup_matrix_unavailable(req.adapter, "i8"):
        return why
    return _sgmat_fits(req, req.gemm_shape or GEMM_SGMAT_SHAPE)


def _sgmat_f16_guard(req: _Linear) -> str | None:
    if not req.half:
        return "f16 rounding not asked for (half=True)"
    if req.prequantized:
        return "int8 activations given: the int8 routes take them"
    if req.gemm_shape is not None and req.gemm_shape not in gemm_sgmat_f16_shapes():
        return f"the pinned tile {req.gemm_shape!r} is not an f16 subgroup-matrix one"
    if why := subgroup_matrix_unavailable(req.adapter, "f16"):
        return why
    return _sgmat_fits(req, req.gemm_shape or GEMM_SGMAT_F16_SHAPE, "q4gsw_gemm_sgmat_f16")


def _sgmat_f16_tiers(req: _Linear) -> list[tuple[str, int]]:
    """The SGMAT_F16_TIERS whose tiles this adapter holds (the pinned tile alone where one is pinned)."""
    if req.gemm_shape is not None:
        return [(req.gemm_shape, 0)]
    return [(shape, least) for shape, least in SGMAT_F16_TIERS
            if _sgmat_fits(req, shape, "q4gsw_gemm_sgmat_f16") is None]


def _sgmat_f16_prefill(req: _Linear, shape: str | None = None, tiers: list[tuple[str, int]] | None = None) -> OpCall:
    """The q4_gemm_sgmat_f16 dispatch in `shape` (default the last of `tiers`, the guard's tile), active at the M
    where it is the first of `tiers` (default _sgmat_f16_tiers) whose grid has its count of tiles."""
    w, has_bias = req.weight, req.bias is not None
    tiers = tiers or _sgmat_f16_tiers(req)
    shape = shape or tiers[-1][0]
    name = f"q4gsw_gemm_sgmat_f16_{shape}"
    tile_m, tile_n = _sgmat_tile(shape, "q4gsw_gemm_sgmat_f16")
    grids = [(tier, least, *_sgmat_tile(tier, "q4gsw_gemm_sgmat_f16")) for tier, least in tiers]

    def runs(m: int) -> bool:       # (the last tier asks for no tiles: it takes every grid)
        return next(tier for tier, least, tm, tn in grids if -(-w.n // tn) * -(-m // tm) >= least) == shape

    def sizing(spec, live):
        m = req.rows(live)
        moved, flops = _cost(w, m, has_bias, req.accumulate)
        active = m > 1 and runs(m)
        grid = (-(-w.n // tile_n), -(-m // tile_m), 1) if active else IDLE
        return Sizing(workgroups=grid, params=_linear_params(spec, w, m, has_bias, req.accumulate),
                      bytes_moved=moved if active else 0, flops=flops if active else 0)

    return OpCall(label=f"{req.label}.prefill", kernel=name, route="q4_gemm_sgmat_f16", tensors=_linear_tensors(req),
                  sizing=sizing, phase="prefill", runs=runs)


def _dp4a_guard(req: _Linear) -> str | None:
    if why := _every_row_guard(req):
        return why
    if req.gemm_shape is not None and req.gemm_shape not in gemm_dp4a_shapes():
        return f"the pinned tile {req.gemm_shape!r} is not a DP4A one"
    shape = req.gemm_shape or GEMM_DP4A_SHAPE
    return _workgroup_refusal(kernel(f"q4gsw_gemm_dp4a_{shape}"), req.limits, f"the {shape} tile needs")


def _dp4a_tiles(w: Q4Weight, m: int) -> int:
    return -(-w.n // _TILE) * -(-m // int(kernel(f"q4gsw_gemm_dp4a_{GEMM_DP4A_SHAPE}").template_values["TM"]))


def k_splits(k: int, n: int, group_size: int, m: int, tile: "GemmTile", room: int) -> tuple[int, int]:
    """(splits, chunks per split) of a GEMM's K for M x N in `tile`s: enough splits that the grid has as many
    invocations as SPLIT_K_WORKGROUPS workgroups of 128, each split whole groups and whole K tiles and at least
    SPLIT_K_MIN_CHUNKS chunks, at most SPLIT_K_MAX, and the partials [splits, M, N] within `room` floats."""
    chunks, unit = k // 32, math.lcm(tile.chunks, max(1, group_size // 32))
    tiles = -(-n // tile.n) * -(-m // tile.m)
    target = SPLIT_K_WORKGROUPS * 128 // tile.invocations
    wanted = min(-(-target // tiles), SPLIT_K_MAX, chunks // max(unit, SPLIT_K_MIN_CHUNKS), room // max(1, m * n))
    if wanted <= 1:
        return 1, chunks
    per_split = -(-chunks // wanted // unit) * unit
    return -(-chunks // per_split), per_split


@dataclass(frozen=True)
class GemmTile:
    """An int8 GEMM variant's output tile (m x n), its workgroup's invocations and its K tile in chunks."""

    m: int
    n: int
    invocations: int
    chunks: int

    @classmethod
    def of(cls, name: str) -> "GemmTile":
        spec = kernel(name)
        values = spec.template_values
        if name.startswith("q4gsw_gemm_dp4a"):
            return cls(int(values["TM"]), _TILE, spec.invocations, int(values["BK"]) // 32)
        family, shape = name.rsplit("_", 1)
        return cls(*_sgmat_tile(shape, family), spec.invocations, chunks=2)


def split_k_room() -> int:
    """Floats a decoder's shared partials scratch needs for any GEMM k_splits splits: fewer than twice the
    target's invocations worth of output tiles (splits x tiles stays under the target), the largest tile
    per invocation of the shipped int8 GEMMs."""
    tiles = (GemmTile.of(f"q4gsw_gemm_sgmat_{GEMM_SGMAT_SHAPE}"), GemmTile.of(f"q4gsw_gemm_dp4a_{GEMM_DP4A_SHAPE}"))
    return 2 * SPLIT_K_WORKGROUPS * 128 * max(t.m * t.n // t.invocations for t in tiles)


def _int8_gemm_name(req: _Linear, route: str, split: bool) -> str:
    sgmat = route == "q4_gemm_sgmat_i8"
    shape = req.gemm_shape or (GEMM_SGMAT_SHAPE if sgmat else GEMM_DP4A_SHAPE)
    return f"q4gsw_gemm_{'sgmat' if sgmat else 'dp4a'}{'_sk' if split else ''}_{shape}"


def _int8_gemm_prefill(req: _Linear, route: str, rows: str = "all") -> OpCall:
    """The q4_gemm_dp4a or q4_gemm_sgmat_i8 dispatch: the same bindings and params. `rows` "small" or
    "large": active only where the DP4A grid at the live M is under or from SGMAT_UNTIL_DP4A_TILES. With
    `partials` (and not the large-grid DP4A GEMM beside the subgroup-matrix one) the GEMM splits K where its
    grid is small (k_splits) and _split_k_reduce adds the splits up."""
    w, act, has_bias = req.weight, req.int8, req.bias is not None
    split = req.partials is not None and rows != "large"
    name = _int8_gemm_name(req, route, split)
    tile = GemmTile.of(name)

    def runs(m: int) -> bool:
        return rows == "all" or (_dp4a_tiles(w, m) >= SGMAT_UNTIL_DP4A_TILES) == (rows == "large")

    def sizing(spec, live):
        m = req.rows(live)
        moved, flops = _int8_cost(w, m, has_bias, req.accumulate)
        active = m > 1 and runs(m)
        splits, split_chunks = k_splits(w.k, w.n, w.group_size, m, tile, req.partials.numel) if split else \
            (1, w.k // 32)
        grid = (-(-w.n // tile.n), -(-m // tile.m), splits) if active else IDLE
        return Sizing(workgroups=grid,
                      params=spec.pack_params(m=m, k=w.k, n=w.n, n_total=w.n_total, n_offset=w.n_offset,
                                              group_size=w.group_size, has_bias=has_bias, accumulate=req.accumulate,
                                              splits=splits, split_chunks=split_chunks),
                      bytes_moved=moved + 8 * (splits - 1) * m * w.n if active else 0, flops=flops if active else 0)

    tensors = {"xq": act.words, "xstats": act.stats, "weights": w.packed, "scales": w.scales,
               "bias": req.bias if has_bias else w.scales, "out": req.outs[0]}
    if split:
        tensors["partials"] = req.partials
    return OpCall(label=f"{req.label}.prefill", kernel=name, route=route, tensors=tensors, sizing=sizing,
                  phase="prefill", runs=None if rows == "all" else runs)


def _split_k_reduce(req: _Linear, gemm: OpCall) -> OpCall:
    """The K splits of `gemm` (an int8 GEMM's _sk form) added up with the bias and the residual, where the
    GEMM runs and splits at the live M; idle elsewhere."""
    w, has_bias, tile = req.weight, req.bias is not None, GemmTile.of(gemm.kernel)

    def sizing(spec, live):
        m = req.rows(live)
        runs = m > 1 and gemm.runs_with(m)
        splits = k_splits(w.k, w.n, w.group_size, m, tile, req.partials.numel)[0] if runs else 1
        return Sizing(workgroups=linear_grid(m * w.n, spec.invocations, live_limit(live)) if splits > 1 else IDLE,
                      params=spec.pack_params(m=m, n=w.n, splits=splits, has_bias=has_bias, accumulate=req.accumulate),
                      bytes_moved=4 * m * w.n * (splits + 1 + req.accumulate) if splits > 1 else 0)

    return OpCall(label=f"{req.label}.prefill_split_k", kernel="q4gsw_gemm_split_reduce", route="q4_gemm_split_k",
                  tensors={"partials": req.partials, "bias": req.bias if has_bias else req.partials, "out": req.outs[0]},
                  sizing=sizing, phase="prefill", runs=gemm.runs)


def _bk64_guard(req: _Linear) -> str | None:
    w = req.weight
    if (w.k, w.n) not in GEMM_BK64_SHAPES:
        return f"K x N {w.k} x {w.n} is not one the BK64 GEMM was built for {sorted(GEMM_BK64_SHAPES)}"
    if w.group_size != 64 or req.bias is not None:
        return f"needs group size 64 and no bias (gs {w.group_size}, bias {req.bias is not None})"
    return _gemm_fits(req, "q4gsw_gemm_bk64")


def _linear_params(spec, w: Q4Weight, m: int, has_bias: bool, accumulate: bool) -> bytes:
    fields = dict(m=m, k=w.k, n=w.n, n_total=w.n_total, n_offset=w.n_offset, group_size=w.group_size,
                  has_bias=has_bias, accumulate=accumulate)
    if "n_q" in spec.params_layout.names:       # the GEMM family's struct has the fused QKV's fields too
        fields.update(n_q=0, n_kv=0)
    return spec.pack_params(**fields)


def _gemm_prefill(name: str, route: str):
    def build(req: _Linear) -> OpCall:
        w, has_bias = req.weight, req.bias is not None

        def sizing(spec, live):
            m = req.rows(live)
            moved, flops = _cost(w, m, has_bias, req.accumulate)
            active = m > 1
            grid = (-(-w.n // _TILE), -(-m // _TILE), 1) if active else IDLE
            return Sizing(workgroups=grid, params=_linear_params(spec, w, m, has_bias, req.accumulate),
                          bytes_moved=moved if active else 0, flops=flops if active else 0)

        return OpCall(label=f"{req.label}.prefill", kernel=name, route=route, tensors=_linear_tensors(req),
                      sizing=sizing, phase="prefill")
    return build


def _generic(req: _Linear) -> OpCall:
    w, has_bias = req.weight, req.bias is not None

    def sizing(spec, live):
        m = req.rows(live)
        moved, flops = _cost(w, m, has_bias, req.accumulate)
        return Sizing(workgroups=linear_grid(m * w.n, spec.invocations, live_limit(live)),
                      params=_linear_params(spec, w, m, has_bias, req.accumulate), bytes_moved=moved, flops=flops)

    return OpCall(label=f"{req.label}.generic", kernel="q4gsw_linear_generic", route="q4_linear_generic",
                  tensors=_linear_tensors(req), sizing=sizing)


PREFILL_ROUTES = (
    Route(name="q4_gemm_sgmat_i8", guard=_sgmat_guard, build=lambda req: _int8_gemm_prefill(req, "q4_gemm_sgmat_i8")),
    Route(name="q4_gemm_dp4a", guard=_dp4a_guard, build=lambda req: _int8_gemm_prefill(req, "q4_gemm_dp4a")),
    Route(name="q4_gemm_sgmat_f16", guard=_sgmat_f16_guard, build=_sgmat_f16_prefill),
    Route(name="q4_gemm_bk64", guard=_bk64_guard, build=_gemm_prefill("q4gsw_gemm_bk64", "q4_gemm_bk64")),
    Route(name="q4_gemm_tiled", guard=lambda req: _gemm_fits(req, "q4gsw_gemm_bk32"),
          build=_gemm_prefill("q4gsw_gemm_bk32", "q4_gemm_tiled")),
)
GENERIC_ROUTES = (Route(name="q4_linear_generic", build=_generic),)
INT8_GEMM_ROUTES = ("q4_gemm_sgmat_i8", "q4_gemm_dp4a")


def _linear_tensors(req: _Linear) -> dict:
    w = req.weight
    return {"x": req.x, "weights": w.packed, "scales": w.scales, "bias": req.bias if req.bias is not None else w.scales,
            "out": req.outs[0]}


def _slots(req: _Linear, force: str | None = None) -> tuple[dict[str, OpCall], tuple]:
    """The linear's dispatches by slot ("decode" and "prefill", or "generic" alone) and its decisions."""
    tables = (("decode", DECODE_ROUTES), ("prefill", PREFILL_ROUTES), ("generic", GENERIC_ROUTES))
    if force is not None:
        for slot, routes in tables:
            if any(route.name == force for route in routes):
                route, decision = choose(routes, req, op=req.label, slot=slot, force=force)
                return _with_split_k(req, {slot: route.build(req)}), (decision,)
        raise RouteUnavailable(f"{req.label}: no route {force!r}; routes: {[r.name for _, rs in tables for r in rs]}")
    decode, decode_why = choose(DECODE_ROUTES, req, op=req.label, slot="decode")
    prefill, prefill_why = choose(PREFILL_ROUTES, req, op=req.label, slot="prefill")
    if decode is None or prefill is None:
        generic, generic_why = choose(GENERIC_ROUTES, req, op=req.label, slot="generic")
        return {"generic": generic.build(req)}, (decode_why, prefill_why, generic_why)
    if prefill.name == "q4_gemm_sgmat_i8" and req.gemm_shape is None and _dp4a_guard(req) is None:
        # the subgroup-matrix GEMM for small grids, DP4A for large ones (SGMAT_UNTIL_DP4A_TILES)
        large, large_why = choose([r for r in PREFILL_ROUTES if r.name == "q4_gemm_dp4a"], req, op=req.label,
                                  slot=f"prefill from {SGMAT_UNTIL_DP4A_TILES} DP4A tiles")
        return (_with_split_k(req, {"decode": decode.build(req),
                                    "prefill": _int8_gemm_prefill(req, "q4_gemm_sgmat_i8", "small"),
                                    "prefill_large": _int8_gemm_prefill(req, "q4_gemm_dp4a", "large")}),
                (decode_why, prefill_why, large_why))
    if prefill.name == "q4_gemm_sgmat_f16":
        # a dispatch per tile tier, each active where the live M's grid picks its tile; the guard's is "prefill"
        tiers = _sgmat_f16_tiers(req)
        larger = {f"prefill_{shape}": _sgmat_f16_prefill(req, shape, tiers) for shape, _ in tiers[:-1]}
        return ({"decode": decode.build(req), **larger, "prefill": _sgmat_f16_prefill(req, tiers[-1][0], tiers)},
                (decode_why, prefill_why))
    return _with_split_k(req, {"decode": decode.build(req), "prefill": prefill.build(req)}), (decode_why, prefill_why)


def _with_split_k(req: _Linear, slots: dict[str, OpCall]) -> dict[str, OpCall]:
    """The slots, and the split-K reduce after the prefill where its GEMM may split K."""
    split = [call for call in slots.values() if "_sk_" in call.kernel]
    if split:
        slots["prefill_split_k"] = _split_k_reduce(req, split[0])
    return slots


def _check_pin(req: _Linear) -> None:
    """A pinned variant must be one of the route's own; an int8 one must fit this weight."""
    known = gemm_dp4a_shapes() + gemm_sgmat_shapes() + gemm_sgmat_f16_shapes()
    if req.gemm_shape is not None and req.gemm_shape not in known:
        raise ValueError(f"{req.label}: unknown GEMM tile {req.gemm_shape!r}; known: {known}")
    shape, w = req.gemv_shape, req.weight
    if shape is None:
        return
    if req.prequantized:
        epilogues = [""] + ["q8"] * (req.int8_out is not None) + ["rope"] * (req.rope is not None)
        kinds = [f"int8x{_int8x_kind(req, epilogue)}{_sr(req)}" for epilogue in epilogues]
        known = tuple(s for kind in kinds for s in gemv_shapes(kind))
        if shape not in known:
            raise ValueError(f"{req.label}: pre-quantized activations need a GEMV shape of {known}, not {shape!r}")
        return
    if shape in gemv_shapes("int8"):
        if gemv_group_size(shape) != w.group_size:
            raise ValueError(f"{req.label}: {shape!r} is an int8 GEMV for another group size than {w.group_size}")
        if w.k > gemv_int8_max_k(shape):
            raise ValueError(f"{req.label}: K={w.k} exceeds {shape}'s workgroup memory (K <= {gemv_int8_max_k(shape)})")
    elif shape not in gemv_shapes("f32"):
        raise ValueError(f"{req.label}: unknown GEMV shape {shape!r}; known: {gemv_shapes('f32') + gemv_shapes('int8')}")


def _check_io(x: Tensor, weight: Q4Weight, out: Tensor, bias: Tensor | None, what: str) -> int:
    if x.shape[-1] != weight.k or out.shape[-1] != weight.n:
        raise ValueError(f"{what}: x {list(x.shape)} and out {list(out.shape)} do not fit K={weight.k}, N={weight.n}")
    if bias is not None and bias.shape != (weight.n,):
        raise ValueError(f"{what}: bias {list(bias.shape)} is not [{weight.n}]")
    return min(x.numel // weight.k, out.numel // weight.n)


def _check_activations(label: str, act: Int8Activations, weight: Q4Weight, x: Tensor | None) -> None:
    if x is not None and act.x is not x:
        raise ValueError(f"{label}: int8 activations of {act.x.name!r} cannot feed x {x.name!r}")
    # (the GEMVs scale each 32-value chunk by its activations' group: any group that divides the weight's
    # serves them; the GEMMs' guard asks for the weight's own)
    if weight.group_size % act.group_size or act.k != weight.k:
        raise ValueError(f"{label}: int8 activations of {act.x.name!r} (K {act.k}, groups of {act.group_size}) cannot "
                         f"feed a weight with K {weight.k} in groups of {weight.group_size}")


def q4_linear(*, x: Tensor, weight: Q4Weight, out: Tensor, adapter: AdapterReport, tokens: int | str = TOKENS,
              bias: Tensor | None = None, int8: bool | Int8Activations = False, gemv_shape: str | None = None,
              gemm_shape: str | None = None, force: str | None = None, tuning: str | None = None,
              accumulate: bool = False, half: bool = False, partials: Tensor | None = None) -> Op:
    """out[:M] = x[:M] @ dequant(weight).T (+ bias), M the live `tokens`: a decode and a prefill dispatch
    (or the generic one), see the module docstring. `int8=True` opts the decode into int8 activations
    where the route's guard allows (elsewhere the f32 GEMV runs, and attestation says so);
    `int8=Int8Activations` (of this x) decodes from activations quantized beforehand, and where they hold
    every row of x the prefill too (an int8 GEMM: q4_gemm_sgmat_i8 for small grids where the device has
    it, else q4_gemm_dp4a; `gemm_shape` pins a tile and with it the GEMM): the plan must run their
    producer first. `force` runs only the named route (a decode route at M == 1, a prefill route at
    M > 1). `accumulate` adds the product to what out holds (out[:M] += ...: a residual add folded in;
    every route does it in its store). `half` lets an f32 prefill round x and the weights to f16 for the
    f16 subgroup-matrix GEMM where the device has it (elsewhere the f32 GEMMs run). `partials` (f32 scratch
    of at least split_k_room() elements, shared by linears that run one at a time) lets the
    subgroup-matrix GEMM split K over more workgroups where its grid is small (k_splits), a reduce pass
    adding the splits up (route q4_gemm_split_k)."""
    label = f"q4_linear({out.name})"
    capacity = _check_io(x, weight, out, bias, label)
    if isinstance(int8, Int8Activations):
        _check_activations(label, int8, weight, x)
    if accumulate and out.buffer == x.buffer:
        raise ValueError(f"{label}: out += x @ W.T needs out and x in different buffers ({x.name!r} is both)")
    if partials is not None and (partials.dtype != "f32" or partials.buffer in (x.buffer, out.buffer)):
        raise ValueError(f"{label}: partials {partials!r} must be an f32 scratch of its own")
    req = _Linear(label, x, weight, (out,), bias, tokens, adapter, int8, gemv_shape, tuning_for(adapter, tuning),
                  gemm_shape=gemm_shape, capacity=capacity, accumulate=accumulate, half=half, partials=partials)
    _check_pin(req)
    calls, decisions = _slots(req, force)
    return Op(label, tuple(calls.values()), decisions)


GLU_ROUTES = (
    Route(name="q4_gemv_int8x_glu_q8_norm", guard=lambda req: _int8x_guard(req) or _norm_guard(_glu_q8_guard)(req),
          build=lambda req: _int8x_decode(req, "q8", norm=True)),
    Route(name="q4_gemv_int8x_glu_q8", guard=lambda req: _int8x_guard(req) or _glu_q8_guard(req),
          build=lambda req: _int8x_decode(req, "q8")),
    Route(name="q4_gemv_int8x_glu", guard=lambda req: _int8x_guard(req) or _plain_pin("_glu", "quantizing (q8)")(req),
          build=_int8x_decode),
)


def _glu_dp4a_guard(req: _Linear) -> str | None:
    return _every_row_guard(req) or _dp4a_guard(req)


def _fused_dp4a(req: _Linear, form: str, route: str, n: int, sized_as: Q4Weight, outs: dict,
                **fields) -> OpCall:
    """A fused form of the DP4A GEMM (`form`: "qkv" or "glu", of the route's tile) over every row of req.weight,
    writing n output columns into `outs`, for every prefill row, where `sized_as`'s own DP4A grid has at least
    SGMAT_UNTIL_DP4A_TILES tiles (the separate linears it stands for run below that, the caller idling them
    above: on grids that large none of them would split K)."""
    w, act = req.weight, req.int8
    name = f"q4gsw_gemm_dp4a_{form}_{GEMM_DP4A_SHAPE}"
    tile = GemmTile.of(name)
    columns = tile.n * n // w.n             # output columns a workgroup stores

    def runs(m: int) -> bool:
        return _dp4a_tiles(sized_as, m) >= SGMAT_UNTIL_DP4A_TILES

    def sizing(spec, live):
        m = req.rows(live)
        moved, flops = _int8_cost(w, m, False)
        active = m > 1 and runs(m)
        grid = (-(-n // columns), -(-m // tile.m), 1) if active else IDLE
        params = spec.pack_params(m=m, k=w.k, n=n, n_total=w.n_total, n_offset=w.n_offset, group_size=w.group_size,
                                  has_bias=False, accumulate=False, splits=1, split_chunks=w.k // 32, **fields)
        return Sizing(workgroups=grid, params=params, bytes_moved=moved - 4 * m * (w.n - n) if active else 0,
                      flops=flops if active else 0)

    tensors = {"xq": act.words, "xstats": act.stats, "weights": w.packed, "scales": w.scales, **outs}
    return OpCall(label=f"{req.label}.{form}", kernel=name, route=route, tensors=tensors, sizing=sizing,
                  phase="prefill", runs=runs)


def _glu_dp4a_prefill(req: _Linear) -> OpCall:
    """gate, up and their SwiGLU as one DP4A GEMM over the [gate; up] weight (a workgroup stages 32 outputs'
    gate rows and their up rows), where the gate GEMM's own grid is large (the caller's separate gate, up
    and swiglu run below that)."""
    n = req.weight.n // 2
    return _fused_dp4a(req, "glu", "q4_glu_dp4a", n, req.weight.rows(0, n), {"out": req.outs[0]})


GLU_PREFILL_ROUTES = (Route(name="q4_glu_dp4a", guard=_glu_dp4a_guard, build=_glu_dp4a_prefill),)


def q4_linear_glu(*, act: Int8Activations, weight: Q4Weight, out: Tensor, adapter: AdapterReport,
                  tokens: int | str = TOKENS, gemv_shape: str | None = None, tuning: str | None = None,
                  int8_out: Int8Activations | None = None, norm: NormPrologue | None = None) -> Op:
    """out = silu(x @ W_gate.T) * (x @ W_up.T) for a packed [2N, K] weight (gate rows, then up rows) and
    activations quantized beforehand: one fused decode dispatch (q4_gemv_int8x_glu), idle unless the live
    token count is 1. Where `act` holds every row, a prefill whose grid is large runs one fused DP4A GEMM too
    (q4_glu_dp4a, the op's "prefill" call; idle below that size, where the caller runs gate, up and swiglu
    apart: `dispatch.idle_where` idles those where it runs). `int8_out` (Int8Activations of
    out) asks the dispatch to write out's row quantized too (q4_gemv_int8x_glu_q8, bit for bit what
    quantize_activations makes of out) where its guard passes; where it does not, the op is the plain
    GLU and the caller still quantizes out (the op's route says which). `gemv_shape` pins the variant of
    the route whose kind has it. `norm` (the RMSNorm that produces `act`) lets the quantizing GEMV make its
    own activations (q4_gemv_int8x_glu_q8_norm, bit for bit rms_norm_int8x's act) where its guard passes:
    the caller's norm dispatch may then idle at a decode step (the op's route says whether)."""
    label = f"q4_linear_glu({out.name})"
    if weight.n % 2 or out.shape[-1] != weight.n // 2:
        raise ValueError(f"{label}: a [{weight.n}, {weight.k}] gate/up weight does not give out {list(out.shape)}: "
                         f"it needs 2 x {out.shape[-1]} rows")
    _check_activations(label, act, weight, None)
    if norm is not None:
        _check_norm(label, norm, weight.k)
    if int8_out is not None and (int8_out.x.buffer != out.buffer or int8_out.k != out.shape[-1]):
        raise ValueError(f"{label}: int8 activations of {int8_out.x.name!r} (K {int8_out.k}) are not of out "
                         f"{list(out.shape)}")
    req = _Linear(label, act.x, weight, (out,), None, tokens, adapter, act, gemv_shape, tuning_for(adapter, tuning),
                  glu=True, capacity=out.numel // out.shape[-1], int8_out=int8_out, norm=norm)
    _check_pin(req)
    route, decision = choose(GLU_ROUTES, req, op=label, slot="decode")
    if route is None:
        raise RouteUnavailable(decision.explain())
    prefill, prefill_why = choose(GLU_PREFILL_ROUTES, req, op=label, slot="prefill")
    if prefill is None:
        return Op(label, (route.build(req),), (decision, prefill_why))
    return Op(label, (route.build(req), prefill.build(req)), (decision, prefill_why))


def _qkv_fused_guard(req: _Linear, separate: list[dict]) -> str | None:
    if any(call.route in INT8_GEMM_ROUTES for slots in separate for call in slots.values()):
        return "int8 activations of every row: the separate linears take an int8 GEMM"
    if any(call.route == "q4_gemm_sgmat_f16" for slots in separate for call in slots.values()):
        return "half=True: the separate linears take the f16 subgroup-matrix GEMM"
    w = req.weight
    n_q, n_kv = req.outs[0].shape[-1], req.outs[1].shape[-1]
    if (w.k, n_q, n_kv) != QKV_FUSED_SHAPE or w.group_size != 64 or w.is_view:
        return (f"(K, Nq, Nkv, gs) = ({w.k}, {n_q}, {n_kv}, {w.group_size}) of a whole weight is not "
                f"{QKV_FUSED_SHAPE + (64,)}, the geometry the fused GEMM was built for")
    if any("decode" not in slots for slots in separate):
        return "the separate linears have no decode route here (the generic linears serve every row count)"
    if req.limits.get("maxStorageBuffersPerShaderStage", 0) < 7:
        return "needs 7 storage buffers per shader stage"
    return _gemm_fits(req, "q4gsw_gemm_qkv_bk64")


def _qkv_fused_prefill(req: _Linear) -> OpCall:
    w = req.weight
    n_q, n_kv = req.outs[0].shape[-1], req.outs[1].shape[-1]

    def sizing(spec, live):
        m = req.rows(live)
        moved, flops = _cost(w, m, False)
        active = m > 1
        grid = (-(-w.n_total // _TILE), -(-m // _TILE), 1) if active else IDLE
        params = spec.pack_params(m=m, k=w.k, n=w.n_total, n_total=w.n_total, n_offset=0, group_size=w.group_size,
                                  has_bias=False, accumulate=False, n_q=n_q, n_kv=n_kv)
        return Sizing(workgroups=grid, params=params, bytes_moved=moved if active else 0, flops=flops if active else 0)

    return OpCall(label=f"{req.label}.fused", kernel="q4gsw_gemm_qkv_bk64", route="q4_qkv_fused_bk64",
                  tensors={"x": req.x, "weights": w.packed, "scales": w.scales, "bias": w.scales, "out": req.outs[0],
                           "out_k": req.outs[1], "out_v": req.outs[2]}, sizing=sizing, phase="prefill")


def _qkv_dp4a_guard(req: _Linear, separate: list[dict]) -> str | None:
    if not all("prefill" in slots and all(slots[slot].route in INT8_GEMM_ROUTES for slot in ("prefill", "prefill_large")
                                          if slot in slots) for slots in separate):
        return "the separate linears take no int8 GEMM (int8 activations of every row, int8=)"
    if req.limits.get("maxStorageBuffersPerShaderStage", 0) < 8:
        return "needs 8 storage buffers per shader stage"
    return _dp4a_guard(req)


def _qkv_dp4a_prefill(req: _Linear) -> OpCall:
    """The three prefills as one DP4A GEMM over the stacked weight, each column stored to its output, where its
    grid is large (q4_linear_qkv idles the separate linears there)."""
    w, (q, k, v) = req.weight, req.outs
    return _fused_dp4a(req, "qkv", "q4_qkv_fused_dp4a", w.n, w, {"out": q, "out_k": k, "out_v": v},
                       n_q=q.shape[-1], n_kv=k.shape[-1])


def q4_linear_qkv(*, x: Tensor, weight: Q4Weight, outs: tuple[Tensor, Tensor, Tensor], adapter: AdapterReport,
                  tokens: int | str = TOKENS, int8: Int8Activations | None = None, gemv_shape: str | None = None,
                  tuning: str | None = None, rope: QKVRope | None = None, half: bool = False,
                  norm: NormPrologue | None = None, partials: Tensor | None = None) -> Op:
    """q, k, v = x @ W.T for a packed [Nq + 2 Nkv, K] weight: three ordinary linears over row ranges of
    the one weight, unless a fused route takes a slot: the fused BK64 GEMM for the prefill at Llama's
    exact geometry, and with pre-quantized activations `int8` (of x) one GEMV writing the three outputs
    for the decode, at any shape (`gemv_shape` pins its variant). Where `int8` holds every row, the three
    prefills take the int8 GEMMs (each over its rows of the weight; see q4_linear) in place of the f32
    ones, and with `half` the f16 subgroup-matrix GEMM where the device has it. `rope`
    (QKVRope) asks the decode GEMV to apply RoPE and write the KV cache too (q4_gemv_int8x_qkv_rope,
    bit for bit rope_kv_cache_write's of the plain GEMV's q, k, v; with rope.qk_norm the q/k norm first,
    q4_gemv_int8x_qkv_rope_qknorm, rope_kv_cache_write_norm's) where its guard passes: it then writes
    rope.q_out and the cache, not q, k and v; where not, the plain GEMV runs and the caller's
    rope_kv_cache_write stays (the op's decode route says which). `norm` (the RMSNorm that produces `int8`)
    lets that GEMV make its own activations too (q4_gemv_int8x_qkv_rope_norm, _qkv_rope_qknorm_norm) where
    its guard passes. `partials` as for q4_linear (the separate prefills' K splits)."""
    label = "q4_linear_qkv"
    q_out, k_out, v_out = outs
    n_q, n_kv = q_out.shape[-1], k_out.shape[-1]
    if v_out.shape[-1] != n_kv or weight.n != n_q + 2 * n_kv:
        raise ValueError(f"{label}: outputs {[list(t.shape) for t in outs]} do not split a {weight.n}-row weight")
    if int8 is not None:
        _check_activations(label, int8, weight, x)
    if norm is not None:
        _check_norm(label, norm, weight.k)
    if rope is not None:
        dim, cache = rope.cache.head_dim, rope.cache
        problems = [f"q_out {rope.q_out!r} must be f32 [tokens, {n_q // dim}, {dim}]"] * (
            rope.q_out.dtype != "f32" or rope.q_out.shape[1:] != (n_q // dim, dim) or n_q % dim)
        problems += [f"k and v [{n_kv}] are not the cache's {cache.kv_heads} heads of {dim}"] * (
            n_kv != cache.kv_heads * dim)
        problems += [f"head_dim {dim} is not a multiple of 4"] * bool(dim % 4)
        problems += [f"unknown RoPE layout {rope.layout!r} (known: {', '.join(LAYOUTS)})"] * (
            rope.layout not in LAYOUTS)
        problems += [f"table {rope.table!r} must be f32 [positions, {dim // 2}, 2]"] * (
            rope.table.dtype != "f32" or rope.table.shape[1:] != (dim // 2, 2))
        for name, norm_weight in zip(("q", "k"), rope.qk_norm or ()):
            problems += [f"the {name} norm weight {norm_weight!r} must be f32 [{dim}]"] * (
                norm_weight.dtype != "f32" or norm_weight.shape != (dim,))
        if problems:
            raise ValueError(f"{label}: rope: " + "; ".join(problems))
    table = tuning_for(adapter, tuning)
    first = weight.n_offset         # the weight may itself be rows of a larger stack
    views = (weight.rows(first, n_q), weight.rows(first + n_q, n_kv), weight.rows(first + n_q + n_kv, n_kv))
    separate, decisions = [], []
    every_row = int8 if int8 is not None and int8.rows > 1 else False      # the separate prefills on DP4A
    for view, out in zip(views, outs):
        part = _Linear(f"q4_linear({out.name})", x, view, (out,), None, tokens, adapter, every_row, None, table,
                       capacity=_check_io(x, view, out, None, label), half=half, partials=partials)
        slots, why = _slots(part)
        separate.append(slots)
        decisions += why
    capacity = min(x.numel // weight.k, q_out.numel // n_q, k_out.numel // n_kv, v_out.numel // n_kv)
    req = _Linear(label, x, weight, tuple(outs), None, tokens, adapter, int8 or False, gemv_shape, table,
                  capacity=capacity, rope=rope, norm=norm)
    _check_pin(req)

    def separate_decode(r: _Linear) -> str | None:
        return None if all("decode" in s for s in separate) else "the separate linears have no decode route here"

    def rope_routes(qk_norm: bool) -> tuple[Route, Route]:
        """The RoPE epilogue's two routes (with the norm prologue first), with or without the q/k norm."""
        name, guard = "q4_gemv_int8x_qkv_rope" + "_qknorm" * qk_norm, _qkv_rope_guard(qk_norm)
        return (Route(name=name + "_norm",
                      guard=lambda r: _int8x_guard(r) or separate_decode(r) or _norm_guard(guard)(r),
                      build=lambda r: _int8x_decode(r, "rope", norm=True)),
                Route(name=name, guard=lambda r: _int8x_guard(r) or separate_decode(r) or guard(r),
                      build=lambda r: _int8x_decode(r, "rope")))

    decode_routes = (*rope_routes(qk_norm=True), *rope_routes(qk_norm=False),
                     Route(name="q4_gemv_int8x_qkv",
                           guard=lambda r: _int8x_guard(r) or separate_decode(r) or _plain_pin("_qkv", "RoPE")(r),
                           build=_int8x_decode))
    prefill_routes = (Route(name="q4_qkv_fused_bk64", guard=lambda r: _qkv_fused_guard(r, separate),
                            build=_qkv_fused_prefill),
                      Route(name="q4_qkv_fused_dp4a", guard=lambda r: _qkv_dp4a_guard(r, separate),
                            build=_qkv_dp4a_prefill))
    fused_decode, decode_why = choose(decode_routes, req, op=label, slot="decode")
    fused_prefill, prefill_why = choose(prefill_routes, req, op=label, slot="prefill")
    calls = [fused_decode.build(req)] if fused_decode else [s["decode"] for s in separate if "decode" in s]
    separate_prefills = [s[slot] for s in separate for slot in ("prefill", "prefill_large", "prefill_split_k")
                         if slot in s]
    if fused_prefill is None:
        calls += separate_prefills
    elif fused_prefill.name == "q4_qkv_fused_dp4a":     # large grids only: the separate linears below them
        fused = fused_prefill.build(req)
        calls += [fused, *idle_where(Op(label, tuple(separate_prefills)), fused).calls]
    else:
        calls.append(fused_prefill.build(req))
    calls += [s["generic"] for s in separate if "generic" in s]
    return Op(label, tuple(calls), (decode_why, prefill_why, *decisions))
