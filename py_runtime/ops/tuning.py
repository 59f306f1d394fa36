"""Per-adapter tuning tables: which variant of a kernel family a route runs, by shape.

A route decides *what* runs (its guard: correctness, features, limits); a tuning table decides *which
variant* of that kernel, a speed choice only. Each table says where it was measured. `tuning_for`
picks the table from the adapter's info: the H200's picks for the H200 (and for the H100 in a browser,
where they were measured faster), the portable table for every other adapter. A run may name another
(the `tuning` option, to compare tables on one adapter); the name travels in the adapter info
(gpu/device.py NAMED_TUNING), so every route and the host's oracles see the same table. The portable
picks are one middle-of-the-road variant per family, measured on no particular GPU (tune a new adapter
by sweeping with `webgpu-llm-lab bench kernels --preset gemv_variants`, `gemv_int8x`, ... and adding a
table here).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from ..gpu.device import NAMED_TUNING

__all__ = ["Tuning", "H200", "H200_NATIVE", "SWIFTSHADER", "PORTABLE", "TABLES", "TABLE_NAMES",
           "named_table", "tuning_for", "tuning_table"]


@dataclass(frozen=True, kw_only=True)
class Tuning:
    name: str
    measured_on: str
    matches: Callable[[dict], bool]                         # adapter info -> does this table apply
    gemv_f32: Callable[[int, int], str]                     # (K, N) -> q4gsw_gemv shape
    gemv_int8: Callable[[int, int, int], str]               # (K, N, group size) -> q4gsw_gemv i8 shape
    gemv_int8x: Callable[[int, int, bool, bool, bool], str]  # (K, N, vec4 scales ok, glu, row-major copy)
    gemv_int8x_glu_q8: Callable[[int, int, bool, int], str]  # (K, N, row-major copy, the output's group size)
                                                            # -> a _glu_q8 shape (its workgroups: whole groups)
    gemv_int8x_qkv_rope: Callable[[int, int, int, bool], str]   # (K, N, head_dim, row-major copy) -> _qkv_rope
    flash_split: Callable[[int, int], tuple[str, int]]     # (G, W) -> sdpa_flash_split_sg variant suffix,
                                                            # workgroups wanted before splits take more steps
    prefill_attention: Callable[[int, int], str]            # (head_dim, smallest subgroup) -> sdpa_prefill_sg
                                                            # variant suffix
    prefill_attention_sgmat: Callable[[int], str]           # head_dim -> sdpa_prefill_sgmat variant suffix
    short_prefill_attention: Callable[[int], int] = lambda head_dim: 0     # head_dim -> the prompt length through
                                                            # which the subgroup prefill runs where the sgmat one
                                                            # is taken (0: the sgmat one at every length)
    decode_attention: Callable[[int], tuple[str, int] | None]   # W -> sdpa_decode_sg variant suffix, its reach:
                                                            # the longest context it serves (FlashDecoding beyond);
                                                            # None: FlashDecoding at every context


def _h200_gemv_f32(k: int, n: int) -> str:
    """From `bench kernels --preset gemv_variants` and `gemv_next` in Chromium and natively: word lanes
    with many rows per thread for vocab-sized N; masked nibbles with two warps per row group for the
    Llama projections (4 rows per thread where N >= 2048, 2 below); four warps for the short Qwen rows,
    whose masked variants were not measured."""
    if n >= 65536:
        return "w8u4"
    if k >= 2048:
        return "r4s2m" if n >= 2048 else "r2s2m"
    return "r2u2s4"


def _h200_gemv_int8(k: int, n: int, group_size: int) -> str:
    """A lane owns whole groups, so only gs 64 has a choice of shape. From `gemv_next` (decode chains,
    both backends; run-to-run spread ~10%): gate/up and lm_head i8r4g64 (~ i8r4u2g64), the 2048-row
    projections and down i8r2s2g64."""
    if group_size != 64:
        return f"i8r4g{group_size}"
    return "i8r4g64" if n >= 8192 else "i8r2s2g64"


def _h200_gemv_int8x(k: int, n: int, scales_vec4: bool, glu: bool, rows_copy: bool) -> str:
    """From `bench kernels --preset gemv_int8x` and `gemv_int8x_qwen` in Chromium (decode chains,
    docs/PERFORMANCE.md): wide N (gate/up, lm_head, the fused gate/up) 4 rows per lane with vec4 scales;
    with the row-major copy 2 rows per lane in two-warp workgroups for the fused gate/up (1 row per warp
    where K is one warp's 32 chunks, Qwen's), 4 for lm_head, and one row per warp for the unfused gate/up
    (87% of the stream against 81%). The others are latency-bound: one row per lane and warps enough that
    one step covers a row with one chunk per lane (32 chunks: 8 rows of one warp; 64: two warps per row;
    128: four). Llama's down (256 chunks) takes 4 warps of 2 chunks with the copy, and without it 2 warps
    in two steps (75% of the stream against 72%: the strided scale loads favour fewer in flight)."""
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


def _h200_flash_split(group: int, words: int) -> tuple[str, int]:
    """From `bench kernels --preset attention_flash_sweep` in Chromium (context 4096, docs/PERFORMANCE.md):
    256 workgroups (one per SM and a little more: longer splits beat more workgroups at every variant);
    Llama's 4 heads split over two slots per key with the next step prefetched (14.3 us against 15.5 us
    for one slot, and against 21.8 us at 1024 workgroups); Qwen3's 2 heads of 128 dims one key per slot
    and step, prefetched (18.0 us)."""
    return {(4, 2): "u2h2p", (2, 4): "u1h1p"}.get((group, words), "u2h1"), 256


def _portable_prefill_attention(head_dim: int, narrowest: int) -> str:
    """Four invocations per query row (every adapter's subgroups hold them), one slot per row: on
    SwiftShader 0.40x sdpa_k16's time and 0.73x sdpa_q16's at S 128 (docs/PERFORMANCE.md)."""
    return f"d{head_dim}s4w{head_dim // 32}u2p"


def _h200_prefill_attention(head_dim: int, narrowest: int) -> str:
    """From `bench kernels --preset attention_prefill_sweep` in Chromium (docs/bench/h200-2026-12-02-s13/flash-one/):
    four slots per row sharing its keys (the walk is latency-bound): Llama's D 64 113 us at S 512 (one
    slot 168, K16 171), Qwen3's D 128 eight lanes of two words 115 us (one slot of four lanes 160, Q16
    198); four lanes of four words (121 us) where subgroups may be narrower than 8."""
    if head_dim == 128:
        return "d128s8w2u2pk4" if narrowest >= 8 else "d128s4w4u2pk4"
    return f"d{head_dim}s4w{head_dim // 32}u2pk4"


def _portable_prefill_attention_sgmat(head_dim: int) -> str:
    """Four subgroups of 16 query rows sharing each staged tile of 32 keys (~24 KB of workgroup memory for heads
    of 64, ~32 KB for 128)."""
    return f"d{head_dim}w4m16k32"


def _h200_short_prefill_attention(head_dim: int) -> int:
    """From `bench kernels --preset attention_prefill_short` in Chromium with the f16 flag
    (docs/bench/h200-2026-12-04-s23/short/), us per layer, subgroup / subgroup-matrix route: Llama's D 64
    9.9 / 13.8 at S 16, 14.9 / 18.9 at 96, 28.0 / 28.4 at 128, 31.7 / 32.6 at 160, 41.3 / 35.4 at 192;
    Qwen3's D 128 9.9 / 16.6 at 16, 21.9 / 34.5 at 96, 31.2 / 44.3 at 192, 43.6 / 39.8 at 256."""
    return 192 if head_dim == 128 else 160


def _h200_decode_attention(words: int) -> tuple[str, int]:
    """From `bench kernels --preset attention_decode_sweep` in Chromium (docs/bench/h200-2026-12-02-s14/
    onepass/), us per layer in the chain against FlashDecoding on subgroups: Llama's D 64 two keys per slot
    4.5-5.0 at context 128 (FlashDecoding 9.5), 7.1 at 512 (10.2), 10.9 at 1024 (11.5), 16.6 at 2048
    (12.7: past the reach); Qwen3's D 128 two keys per slot 6.4 at 128 (10.8), 10.6 at 512 (12.3), 15.0
    at 1024 (13.5: past it)."""
    return ("w2u2p", 1024) if words <= 2 else ("w4u2p", 512)


def _h200_native_decode_attention(words: int) -> tuple[str, int] | None:
    """wgpu-native on the H200 (Naga's SPIR-V, `native-model-int8x`, docs/bench/h200-2026-12-02-s14/reads/):
    profiled per layer in a decode step at context 128-256, Llama's one pass 18.0 us against FlashDecoding's
    34.4 (23.3 + 11.1), but Qwen3's heads of 128 49.6 against 41.8 (31.9 + 9.9): the one pass for D 64 only."""
    return _h200_decode_attention(words) if words <= 2 else None


def _portable_decode_attention(words: int) -> tuple[str, int]:
    """A workgroup of 256 invocations per query head, two keys per slot and step (one for heads of 128
    dims: half the registers), up to 512 keys (two steps of the slots)."""
    return ("w2u2p" if words <= 2 else "w4u1p"), 512


def _is_native(info: dict) -> bool:
    # wgpu-native names its graphics backend; a browser's GPUAdapterInfo has no such field.
    return "backend_type" in info


def _is_swiftshader(info: dict) -> bool:
    return "swiftshader" in f"{info.get('architecture', '')} {info.get('description', '')}".lower()


def _named(info: dict, name: str) -> bool:
    # Chromium reports the name as the description, wgpu-native as the device.
    return name in f"{info.get('description', '')} {info.get('device', '')}".lower()


def _is_h200(info: dict) -> bool:
    return _named(info, "h200")


def _takes_h200_picks(info: dict) -> bool:
    """The H200, and the H100 in Chromium: there the H200's table beat the portable one in every model run,
    both models at contexts 256 and 4,096 (Llama's decode step 848 -> 777 us at 256, 1,250 -> 916 at 4,096;
    Qwen3's 1,272 -> 1,100-1,105 at 256; docs/bench/h100-2026-12-05-s28/tuning/, `--tuning`). Natively
    on an H100 nothing is measured yet."""
    return _is_h200(info) or (_named(info, "h100") and not _is_native(info))


def _h200_glu_q8(k: int, n: int, rows_copy: bool, group: int) -> str:
    """The fused gate/up + SwiGLU quantizing its output (_glu_q8): whole groups of the output per workgroup.
    Groups of 64 (`browser-glu-q8`, `browser-glu-q8-qwen`, decode chains in Chromium, docs/bench/
    h200-2026-12-02-s12/): r4u1w16 (512 invocations) 13.65 us for Llama's 2 x 2048 -> 8192 and 9.66 for
    Qwen3's 2 x 1024 -> 3072, against r8u1w8's 16.40 and 11.37 and the 1024-invocation r2u2w32 / r2u1w32's
    13.81 / 13.87 and 10.80 / 10.07. Groups of 32 (a decode step's down input; `browser-glu-q8-norm`,
    docs/bench/h200-2026-12-02-s15/group32/, with the norm prologue as the model runs it): r2u1w16 (32 rows
    in 512 invocations) 15.17 us (Llama) and 10.02 (Qwen3), against r4u1w16's 15.32 / 11.12, r4u1w8's
    15.48 / 10.74 and r1u1w32's 17.29 / 10.62; in a model a decode step's GPU pass 778 -> 749-751 us
    (Llama) and 1,157 -> 1,103-1,110 (Qwen3) with the RoPE QKV's 1024-invocation shapes."""
    return "r2u1w16" if group == 32 else "r4u1w16"


# The portable _glu_q8 pick: r8u1w8, 256 invocations, what every adapter allows. The fused QKV applying RoPE
# (_qkv_rope): _rope_rows_for, one shape per head size.
def _rope_rows_for(k: int, n: int, head_dim: int, rows_copy: bool) -> str:
    """The fused QKV applying RoPE: 64 rows in 256 invocations (8 rows per lane, 8 warps: what every
    adapter allows) where they hold whole heads (Llama's 64, or 32), else 128 (16 rows per lane: Qwen3's
    heads of 128); a head_dim that divides neither falls back to the plain QKV (the route guard says so)."""
    return "r8u1w8" if 64 % head_dim == 0 else "r16u1w8"


def _h200_rope_rows_for(k: int, n: int, head_dim: int, rows_copy: bool) -> str:
    """The same whole heads per workgroup as _rope_rows_for in four times the warps (1024 invocations): a
    quarter of the rows per lane. In Chromium: 512 invocations (r4u1w16 / r8u1w16) took a decode step's GPU
    pass 782-787 -> 778-779 us (Llama) and 1,168 -> 1,158 (Qwen3; docs/bench/h200-2026-12-02-s14/rope/);
    1024, measured together with the _glu_q8 groups of 32 (docs/bench/h200-2026-12-02-s15/rope32/ against
    group32/), the QKV's profiled time per layer 15.8-16.1 -> 15.4-15.5 us (Llama) and 16.4-16.5 -> 16.0
    (Qwen3)."""
    return "r2u1w32" if 64 % head_dim == 0 else "r4u1w32"


H200 = Tuning(name="h200", measured_on="NVIDIA H200, Chromium 156 (Dawn/Vulkan) and wgpu-native 0.32, driver 580; "
                                     "the H100 in Chromium 156 against the portable table",
              matches=_takes_h200_picks, gemv_f32=_h200_gemv_f32, gemv_int8=_h200_gemv_int8,
              gemv_int8x=_h200_gemv_int8x, gemv_int8x_glu_q8=_h200_glu_q8,
              gemv_int8x_qkv_rope=_h200_rope_rows_for, flash_split=_h200_flash_split,
              prefill_attention=_h200_prefill_attention, prefill_attention_sgmat=_portable_prefill_attention_sgmat,
              short_prefill_attention=_h200_short_prefill_attention, decode_attention=_h200_decode_attention)
PORTABLE = Tuning(name="portable", measured_on="none: one middle variant per family",
                  matches=lambda info: True, gemv_f32=lambda k, n: "r2u2s4",
                  gemv_int8=lambda k, n, group_size: f"i8r4g{group_size}",
                  gemv_int8x=lambda k, n, scales_vec4, glu, rows_copy: "r2u2w1",
                  # 64 rows in 256 invocations, what every adapter allows (8 rows per lane, 8 warps)
                  gemv_int8x_glu_q8=lambda k, n, rows_copy, group: "r8u1w8",
                  gemv_int8x_qkv_rope=_rope_rows_for,
                  flash_split=lambda group, words: ("u2h1", 32),
                  prefill_attention=_portable_prefill_attention,
                  prefill_attention_sgmat=_portable_prefill_attention_sgmat, decode_attention=_portable_decode_attention)
# The same picks natively but where Naga's code for a kernel measured otherwise.
H200_NATIVE = replace(H200, name="h200-native", measured_on="NVIDIA H200, wgpu-native 0.32, driver 580",
                      matches=lambda info: _is_h200(info) and _is_native(info),
                      decode_attention=_h200_native_decode_attention)
# SwiftShader (Chromium's CPU adapter: 4-wide subgroups, no L2 to share a KV head's rows through): the one-pass
# decode took 29.2 ms a layer against FlashDecoding's 13.4 at context 64 (docs/bench/swiftshader-2026-12-02-s14/,
# `attention_tiny`; lavapipe 1.32 against 1.61 ms keeps the portable pick).
SWIFTSHADER = replace(PORTABLE, name="swiftshader", measured_on="SwiftShader in Chromium 156 (the one-pass decode only)",
                      matches=_is_swiftshader, decode_attention=lambda words: None)
TABLES = (H200_NATIVE, H200, SWIFTSHADER, PORTABLE)     # the first whose `matches` accepts the adapter's info
TABLE_NAMES = tuple(table.name for table in TABLES)


def named_table(name: str) -> Tuning:
    named = [table for table in TABLES if table.name == name]
    if not named:
        raise ValueError(f"unknown tuning table {name!r}; known: {list(TABLE_NAMES)}")
    return named[0]


def tuning_for(adapter, name: str | None = None) -> Tuning:
    """The table for this adapter, or the one named (a route option: compare tables on one adapter)."""
    return named_table(name) if name is not None else tuning_table(adapter.info)


def tuning_table(adapter_info: dict) -> Tuning:
    """The table the run named, else the first whose `matches` accepts this adapter info."""
    if adapter_info.get(NAMED_TUNING) is not None:
        return named_table(adapter_info[NAMED_TUNING])
    return next(table for table in TABLES if table.matches(adapter_info))
