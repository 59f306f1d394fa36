"""Kernel tiers: the variants a route can pick ship; the others (of the Q4 GEMV, DP4A and
subgroup-matrix GEMM and FlashDecoding subgroup families) are generated (and loadable) for benchmark sweeps only. Every other
family ships whole."""

from __future__ import annotations

from collections import Counter

import pytest
import yaml

from py_runtime.kernels import TIERS, kernel, kernel_names

# The shapes py_runtime/ops/q4.py's choosers can return for each kernel kind, over every K (a multiple
# of the group size), N, group size and flag: gemv_shape_for and gemv_int8_shape_for (q4gsw_gemv);
# gemv_int8x_shape_for as _int8x_decode calls it (plain: q4_linear, _qkv: q4_linear_qkv, _glu:
# q4_linear_glu, _glu_q8: q4_linear_glu(int8_out=), _qkv_rope_{layout}: q4_linear_qkv(rope=); _sr: the
# weight has the row-major scale copy, which turns the vec4 "v" shapes off);
# plus the portable defaults the route tables give adapters other than the H200 (f32 r2u2s4; int8
# i8r4g32/64/128; int8x r2u2w1 for every kind). Each ships in both reductions, _sg and _wg.
ROPE_SHAPES = ("r8u1w8", "r16u1w8", "r2u1w32", "r4u1w32")
SHIPPED_SHAPES = {
    "q4gsw_gemv": ("w8u4", "r4s2m", "r2s2m", "r2u2s4", "i8r4g32", "i8r4g64", "i8r4g128", "i8r2s2g64"),
    "q4gsw_gemv_i8x": ("r4u1w2v", "r4u1w2", "r1u1w8", "r1u1w4k2", "r1u1w2k4", "r2u2w1"),
    "q4gsw_gemv_i8x_qkv": ("r4u1w2v", "r4u1w2", "r1u1w8", "r1u1w4k2", "r1u1w2k4", "r2u2w1"),
    "q4gsw_gemv_i8x_glu": ("r4u1w2v", "r2u2w1"),
    "q4gsw_gemv_i8x_sr": ("r4u1w2", "r1u1w8", "r1u1w4k2", "r1u1w2k4", "r1u2w2k4", "r2u2w1"),
    "q4gsw_gemv_i8x_qkv_sr": ("r4u1w2", "r1u1w8", "r1u1w4k2", "r1u1w2k4", "r1u2w2k4", "r2u2w1"),
    "q4gsw_gemv_i8x_glu_sr": ("r1u1w8", "r4u1w2", "r2u2w2", "r2u2w1"),
    "q4gsw_gemv_i8x_glu_q8": ("r8u1w8", "r4u1w16", "r2u1w16"),
    "q4gsw_gemv_i8x_glu_q8_sr": ("r8u1w8", "r4u1w16", "r2u1w16"),
    # the RoPE kinds: 64 rows (heads of 64, 32) or 128 (heads of 128), in 256 invocations or (the H200's)
    # 1024, each also normalizing q and k first (_qknorm: q4_linear_qkv(rope=QKVRope(qk_norm=))); the
    # parts of a head (32, 16, 8 rows) are sweep variants of the kinds without the q/k norm
    **{f"q4gsw_gemv_i8x_qkv_rope_{layout}{qk}{sr}": ROPE_SHAPES for layout in ("half", "interleaved")
       for qk in ("", "_qknorm") for sr in ("", "_sr")},
    # the glu_q8 and RoPE kinds with the RMSNorm prologue (q4_linear_glu(norm=), q4_linear_qkv(norm=))
    "q4gsw_gemv_i8x_glu_q8_norm": ("r8u1w8", "r4u1w16", "r2u1w16"),
    "q4gsw_gemv_i8x_glu_q8_norm_sr": ("r8u1w8", "r4u1w16", "r2u1w16"),
    **{f"q4gsw_gemv_i8x_qkv_rope_{layout}{qk}_norm{sr}": ROPE_SHAPES for layout in ("half", "interleaved")
       for qk in ("", "_qknorm") for sr in ("", "_sr")},
}
GEMV_SOURCES = ("shaders/quant/q4gsw_gemv.wgsl", "shaders/quant/q4gsw_gemv_i8x.wgsl")
# (shipped, sweep) of the families with sweep variants: q4gsw_gemv ships 8 of its 24 shapes, the int8x
# family 102 of its 179 kind-and-shape pairs; each in two reductions. The DP4A GEMM ships the one tile
# its route runs (ops/q4_linear.py GEMM_DP4A_SHAPE) of nine, the subgroup-matrix GEMM its one of ten (and its _sk form)
# (GEMM_SGMAT_SHAPE), the f16 one the three tiles its tiers pick (SGMAT_F16_TIERS) of eleven; FlashDecoding's
# subgroup split pass the 6
# variants its tuning picks of 16; the subgroup prefill the 5 variants its tuning picks of 12; the one-pass
# decode the 3 its tables pick of 7, each also with the i8x epilogue. The three attention families ship each
# pick once more: its kvf16_ twin (the cache in shader-f16 types).
COUNTS = {"shaders/quant/q4gsw_gemv.wgsl": (16, 32), "shaders/quant/q4gsw_gemv_i8x.wgsl": (212, 170),
          "shaders/quant/q4gsw_gemm_dp4a.wgsl": (4, 16), "shaders/quant/q4gsw_gemm_sgmat.wgsl": (2, 18),
          "shaders/quant/q4gsw_gemm_sgmat_f16.wgsl": (3, 8),
          "shaders/attention/sdpa_flash_subgroup.wgsl": (6 + 6, 10),
          "shaders/attention/sdpa_prefill_subgroup.wgsl": (5 + 5, 7),
          "shaders/attention/sdpa_prefill_sgmat.wgsl": (2, 7),
          "shaders/attention/sdpa_decode_subgroup.wgsl": (6 + 6, 4)}


def test_the_shipped_q4_gemv_variants_are_exactly_what_the_routes_can_pick():
    expected = {f"{kind}_{reduction}_{shape}" for kind, shapes in SHIPPED_SHAPES.items()
                for reduction in ("sg", "wg") for shape in shapes}
    shipped = {name for name in kernel_names(tier="shipped") if kernel(name).source in GEMV_SOURCES}
    assert sorted(shipped) == sorted(expected)


def test_only_the_families_listed_have_sweep_variants_and_none_was_dropped():
    counts = Counter((kernel(name).source, kernel(name).tier) for name in kernel_names())
    for source, (shipped, sweep) in COUNTS.items():
        assert (counts[source, "shipped"], counts[source, "sweep"]) == (shipped, sweep), source
    assert {source for source, tier in counts if tier == "sweep"} == set(COUNTS)


def test_the_registry_tiers_follow_the_yaml_sweep_lists(repo):
    listed = set()
    for source in COUNTS:
        path = (repo / source).with_suffix(".yaml")
        family = yaml.safe_load(path.read_text())[path.stem]
        for entry in family["shader_variants"]:
            listed |= {f"{entry['NAME']}_{suffix}" for suffix in entry.get("sweep", [])}
    assert sorted(listed) == kernel_names(tier="sweep")


def test_sweep_kernels_are_generated_and_loadable():
    names = kernel_names()
    assert sorted(kernel_names(tier="shipped") + kernel_names(tier="sweep")) == names
    sweep = kernel("q4gsw_gemv_sg_r8")
    assert sweep.tier == "sweep" and "fn " in sweep.code and sweep.params_layout.size == 28
    assert kernel("q4gsw_gemv_sg_r4s2m").tier == "shipped" and kernel("swiglu").tier == "shipped"
    assert all(kernel(name).tier in TIERS for name in names)


def test_kernel_names_refuses_an_unknown_tier():
    with pytest.raises(ValueError, match="unknown kernel tier 'bench'; tiers: \\['shipped', 'sweep'\\]"):
        kernel_names(tier="bench")
