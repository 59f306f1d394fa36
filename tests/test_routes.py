"""Routes as data: every shipped Q4 linear kernel is reachable by some route on some adapter, no route
reaches a sweep kernel, the CI check pins every shipped GEMV variant, the tuning table follows the
adapter, and a route choice explains itself (and refuses a forced route that cannot run)."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from py_runtime.checks.q4_linear import PRESETS
from py_runtime.gpu.device import AdapterReport
from py_runtime.kernels import kernel, kernel_names
from py_runtime.ops.int8_activations import Int8Activations
from py_runtime.ops.norm import rms_norm
from py_runtime.ops.q4 import Q4Weight
from py_runtime.models.config import LAYOUTS
from py_runtime.ops.attention import KVCache
from py_runtime.ops.q4_linear import (GEMM_DP4A_SHAPE, GemmTile, NormPrologue, QKVRope, gemm_sgmat_shapes, k_splits, q4_linear,
                                      q4_linear_glu, q4_linear_qkv, split_k_room)
from py_runtime.ops.tuning import tuning_for
from py_runtime.routing import RouteUnavailable
from py_runtime.tensors import Tensor

LINEAR_SOURCES = ("shaders/quant/q4gsw_gemv.wgsl", "shaders/quant/q4gsw_gemv_i8x.wgsl", "shaders/quant/q4gsw_gemm.wgsl",
                  "shaders/quant/q4gsw_gemm_dp4a.wgsl", "shaders/quant/q4gsw_gemm_sgmat.wgsl",
                  "shaders/quant/q4gsw_gemm_sgmat_f16.wgsl", "shaders/quant/q4gsw_gemm_split_reduce.wgsl",
                  "shaders/quant/q4gsw_linear_generic.wgsl")
SGMAT_I8 = {"componentType": "i8", "resultComponentType": "i32", "M": 16, "N": 16, "K": 32}
SGMAT_F16 = {"componentType": "f16", "resultComponentType": "f32", "M": 16, "N": 16, "K": 16}
# (16 storage buffers: the H200's in Chromium, docs/bench; the q/k-normalizing RoPE GEMV binds 11)
BIG = {"maxComputeInvocationsPerWorkgroup": 1024, "maxComputeWorkgroupStorageSize": 32768,
       "maxStorageBuffersPerShaderStage": 16}
ADAPTERS = {
    "h200-chromium": AdapterReport(backend="browser", info={"description": "NVIDIA H200", "subgroupMaxSize": 32},
                                   features=(), limits=BIG, device_features=("subgroups",)),
    # Chromium's CPU adapter: its own table (the one-pass decode off)
    "swiftshader": AdapterReport(backend="browser", info={"architecture": "swiftshader", "subgroupMaxSize": 4,
                                                          "description": "SwiftShader Device (Subzero)"},
                                 features=(), limits=BIG, device_features=("subgroups",)),
    "h200-native": AdapterReport(backend="native", info={"device": "NVIDIA H200", "subgroupMaxSize": 128,
                                                          "backend_type": "Vulkan"},
                                 features=(), limits=BIG, device_features=("subgroups",)),
    # a browser that does not expose subgroups (the lab's launcher flags do): the H200's picks, workgroup forms
    # Chromium with --enable-unsafe-webgpu: the int8 subgroup-matrix configs listed, the probe compiled
    "h200-chromium-sgmat": AdapterReport(
        backend="browser", info={"description": "NVIDIA H200", "subgroupMinSize": 32, "subgroupMaxSize": 32,
                                 "subgroupMatrixConfigs": [SGMAT_I8, {**SGMAT_I8, "N": 8}]},
        features=(), limits={**BIG, "maxComputeWorkgroupStorageSize": 49152},
        device_features=("subgroups", "chromium-experimental-subgroup-matrix"), probes={"subgroup_matrix_i8": "ok"}),
    # the same with --enable-dawn-features=vulkan_enable_f16_on_nvidia: shader-f16 and the f16 configs
    "h200-chromium-f16": AdapterReport(
        backend="browser", info={"description": "NVIDIA H200", "subgroupMinSize": 32, "subgroupMaxSize": 32,
                                 "subgroupMatrixConfigs": [SGMAT_I8, SGMAT_F16]},
        features=(), limits={**BIG, "maxComputeWorkgroupStorageSize": 49152},
        device_features=("subgroups", "shader-f16", "chromium-experimental-subgroup-matrix"),
        probes={"subgroup_matrix_i8": "ok", "subgroup_matrix_f16": "ok"}),
    "h200-no-subgroups": AdapterReport(backend="browser", info={"description": "NVIDIA H200"}, features=(),
                                       limits=BIG, device_features=()),
    "other-sg32": AdapterReport(backend="browser", info={"vendor": "intel", "subgroupMaxSize": 32}, features=(),
                                limits=BIG, device_features=("subgroups",)),
    "other-plain": AdapterReport(backend="native", info={}, features=(), limits=BIG, device_features=()),
    "small": AdapterReport(backend="native", info={}, features=(), device_features=(),
                           limits={"maxComputeInvocationsPerWorkgroup": 128, "maxComputeWorkgroupStorageSize": 16384}),
}
KS = (64, 128, 1024, 2048, 3072, 4096, 8192, 12288)
NS = (36, 64, 512, 1024, 2048, 3072, 8192, 8193, 65536, 128256, 151936)     # 8193: wide but not vec4-aligned


def _t(name, numel, dtype="f32"):
    return Tensor(name, (numel,), dtype, 0)


def _weight(k, n, gs, rows_copy):
    return Q4Weight(_t("w", n * k // 8, "u32"), _t("s", k // gs * n), k, n, gs,
                    scales_rows=_t("r", k // gs * n) if rows_copy else None)


def _reachable() -> set[str]:
    """Every kernel the linear routes build over a grid of shapes, flags and adapters."""
    seen = set()
    for adapter, k, n, gs in itertools.product(ADAPTERS.values(), KS, NS, (32, 64, 128)):
        if k % gs:
            continue
        x = Tensor("x", (2, k), "f32", 0)
        act = Int8Activations(x, _t("xq", k // 4, "u32"), _t("xs", k // 16), gs)
        every_row = Int8Activations(x, Tensor("xq", (2, k // 4), "u32", 0), Tensor("xs", (2, k // 16), "f32", 0), gs)
        ops = []
        for rows_copy in (False, True):
            w = _weight(k, n, gs, rows_copy)
            out = Tensor("o", (2, n), "f32", 0)
            ops += [q4_linear(x=x, weight=w, out=out, adapter=adapter, int8=int8) for int8 in (False, True, act, every_row)]
            ops.append(q4_linear(x=x, weight=w, out=out, adapter=adapter, int8=every_row,      # K split, small grids
                                 partials=Tensor("partials", (split_k_room(),), "f32", 0, "scratch")))
            ops.append(q4_linear(x=x, weight=w, out=out, adapter=adapter, half=True))
            ops.append(q4_linear(x=x, weight=w, out=out, adapter=adapter, bias=_t("b", n), int8=act))
            if n % 2 == 0:
                glu_out = Tensor("g", (2, n // 2), "f32", 0)
                ops.append(q4_linear_glu(act=act, weight=w, out=glu_out, adapter=adapter))
                ops.append(q4_linear_glu(act=every_row, weight=w, out=glu_out, adapter=adapter))    # + its prefill GEMM
                if n // 2 % gs == 0:        # its output quantized for down: the q8 route or the plain GLU
                    out_act = Int8Activations(glu_out, _t("gq", n // 8, "u32"), _t("gs", n // 32), gs)
                    ops.append(q4_linear_glu(act=act, weight=w, out=glu_out, adapter=adapter, int8_out=out_act))
                    ops.append(q4_linear_glu(act=act, weight=w, out=glu_out, adapter=adapter, int8_out=out_act,
                                             norm=NormPrologue(x=x, weight=_t("nw", k), eps=1e-5)))
            n_kv = n // 4
            qkv_outs = (Tensor("q", (2, n), "f32", 0), Tensor("k", (2, n_kv), "f32", 0), Tensor("v", (2, n_kv), "f32", 0))
            wq = _weight(k, n + 2 * n_kv, gs, rows_copy)
            ops += [q4_linear_qkv(x=x, weight=wq, outs=qkv_outs, adapter=adapter, int8=int8)
                    for int8 in (None, act, every_row)]
            for dim, layout in itertools.product((32, 64, 128), LAYOUTS):       # RoPE + the cache write too
                if n % dim or n_kv % dim:
                    continue
                cache = KVCache(Tensor("kc", (8, n_kv // dim, dim // 2), "u32", 0),
                                Tensor("vc", (8, n_kv // dim, dim // 2), "u32", 0), Tensor("off", (1,), "u32", 0),
                                8, n_kv // dim, dim)
                for qk_norm in (None, (_t("qn", dim), _t("kn", dim))):     # Qwen3's q/k norm before RoPE
                    rope = QKVRope(q_out=Tensor("qr", (2, n // dim, dim), "f32", 0),
                                   table=Tensor("t", (8, dim // 2, 2), "f32", 0), cache=cache, layout=layout,
                                   qk_norm=qk_norm)
                    ops.append(q4_linear_qkv(x=x, weight=wq, outs=qkv_outs, adapter=adapter, int8=act, rope=rope))
                    ops.append(q4_linear_qkv(x=x, weight=wq, outs=qkv_outs, adapter=adapter, int8=act, rope=rope,
                                             norm=NormPrologue(x=x, weight=_t("nw", k), eps=1e-5)))
        seen |= {call.kernel for op in ops for call in op}
    return seen


def test_every_shipped_linear_kernel_is_reachable_and_no_route_reaches_a_sweep_kernel():
    reachable = _reachable()
    shipped = {name for name in kernel_names(tier="shipped") if kernel(name).source in LINEAR_SOURCES}
    assert sorted(reachable - shipped) == []            # a route never picks a benchmark-only variant
    assert sorted(shipped - reachable) == []            # and nothing ships that no route can pick


def test_the_ci_check_pins_every_shipped_gemv_and_dp4a_gemm_variant():
    """Each shipped (kind, shape) has a CI case that pins it, so CI runs it on every adapter whose
    reduction guard picks that kernel (the sg or wg form)."""
    pinned = set()
    for case in PRESETS["ci"]:
        if case.gemm_shape is not None:
            pinned.add(("q4gsw_gemm_dp4a", case.gemm_shape))
        if case.split_k:                        # (the _sk form of the route's own tile)
            pinned.add(("q4gsw_gemm_dp4a_sk", GEMM_DP4A_SHAPE))
        if case.n_kv and case.dp4a and any(-(-(case.n + 2 * case.n_kv) // 64) * -(-m // 64) >= 256 for m in case.rows):
            pinned.add(("q4gsw_gemm_dp4a_qkv", GEMM_DP4A_SHAPE))     # (the fused QKV, where its grid is large)
        if case.glu and case.dp4a and any(-(-case.n // 64) * -(-m // 64) >= 256 for m in case.rows):
            pinned.add(("q4gsw_gemm_dp4a_glu", GEMM_DP4A_SHAPE))     # (the fused gate/up + SwiGLU, likewise)
        if case.gemv_shape is None:
            continue
        pinned.add((case.gemv_kind or "q4gsw_gemv", case.gemv_shape))
    shipped = set()
    for name in kernel_names(tier="shipped"):
        for family in ("q4gsw_gemm_dp4a", "q4gsw_gemv_i8x", "q4gsw_gemv"):
            if name.startswith(family + "_"):
                kind, _, shape = name.rpartition("_")
                shipped.add((kind.removesuffix("_sg").removesuffix("_wg"), shape))
                break
    assert sorted(shipped - pinned) == []


def test_the_tuning_table_follows_the_adapter_and_can_be_named():
    assert tuning_for(ADAPTERS["h200-chromium"]).name == "h200"
    assert tuning_for(ADAPTERS["h200-native"]).name == "h200-native"     # (wgpu-native names its backend)
    assert tuning_for(ADAPTERS["other-sg32"]).name == "portable"
    assert tuning_for(ADAPTERS["other-sg32"], "h200").name == "h200"
    # the H100 takes the H200's picks in Chromium, where they were measured against the portable ones, not natively
    h100 = {"description": "NVIDIA H100 80GB HBM3", "subgroupMaxSize": 32}
    assert tuning_for(replace(ADAPTERS["h200-chromium"], info=h100)).name == "h200"
    h100_native = {"device": "NVIDIA H100 80GB HBM3", "backend_type": "Vulkan"}
    assert tuning_for(replace(ADAPTERS["h200-native"], info=h100_native)).name == "portable"
    known = "\\['h200-native', 'h200', 'swiftshader', 'portable'\\]"
    with pytest.raises(ValueError, match=f"unknown tuning table 'a100'; known: {known}"):
        tuning_for(ADAPTERS["other-sg32"], "a100")


def test_a_choice_explains_itself_and_forcing_keeps_the_guards():
    adapter = ADAPTERS["other-plain"]
    x, out = Tensor("x", (7, 2048), "f32", 0), Tensor("out", (7, 100), "f32", 0)
    op = q4_linear(x=x, weight=_weight(2048, 100, 64, False), out=out, adapter=adapter, int8=True)
    assert [call.route for call in op] == ["q4_gemv_int8", "q4_gemm_tiled"]
    why = op.explain()
    assert "not q4_gemv_int8x: no pre-quantized activations given" in why
    assert "not q4_gemm_bk64: K x N 2048 x 100 is not one the BK64 GEMM was built for" in why
    assert [call.route for call in op.at(1)] == ["q4_gemv_int8"] and [c.route for c in op.at(7)] == ["q4_gemm_tiled"]
    with pytest.raises(RouteUnavailable, match="route 'q4_gemv_subgroup' cannot run here: needs the 'subgroups'"):
        q4_linear(x=x, weight=_weight(2048, 100, 64, False), out=out, adapter=adapter, force="q4_gemv_subgroup")
    with pytest.raises(RouteUnavailable, match="no route 'q4_gemv_fast'"):
        q4_linear(x=x, weight=_weight(2048, 100, 64, False), out=out, adapter=adapter, force="q4_gemv_fast")
    forced = q4_linear(x=x, weight=_weight(2048, 100, 64, False), out=out, adapter=adapter, force="q4_linear_generic")
    assert [call.route for call in forced] == ["q4_linear_generic"] and "(forced)" in forced.explain()
    small = q4_linear(x=x, weight=_weight(2048, 100, 64, False), out=out, adapter=ADAPTERS["small"])
    assert [call.route for call in small] == ["q4_linear_generic"]
    assert "the GEMV workgroups are 256 invocations; the adapter allows 128" in small.explain()


def test_rms_norm_takes_subgroups_where_the_device_has_them():
    x, w, y = Tensor("x", (4, 64), "f32", 0), Tensor("w", (64,), "f32", 0), Tensor("y", (4, 64), "f32", 0)
    assert rms_norm(x=x, weight=w, out=y, eps=1e-5, adapter=ADAPTERS["other-sg32"]).call.route == "rms_norm_subgroup"
    plain = rms_norm(x=x, weight=w, out=y, eps=1e-5, adapter=ADAPTERS["other-plain"])
    assert plain.call.route == "rms_norm" and "not rms_norm_subgroup: needs the 'subgroups' feature" in plain.explain()
    with pytest.raises(RouteUnavailable, match="cannot run here"):
        rms_norm(x=x, weight=w, out=y, eps=1e-5, adapter=ADAPTERS["other-plain"], force="rms_norm_subgroup")


def test_a_pinned_variant_decides_between_the_int8_and_f32_gemvs():
    adapter = ADAPTERS["other-plain"]
    x, out = Tensor("x", (1, 2048), "f32", 0), Tensor("out", (1, 100), "f32", 0)
    w = _weight(2048, 100, 64, False)
    pinned_f32 = q4_linear(x=x, weight=w, out=out, adapter=adapter, int8=True, gemv_shape="r4s2m")
    assert pinned_f32.at(1)[0].kernel == "q4gsw_gemv_wg_r4s2m"
    assert "the pinned variant 'r4s2m' is an f32 GEMV" in pinned_f32.explain()
    pinned_int8 = q4_linear(x=x, weight=w, out=out, adapter=adapter, gemv_shape="i8r2s2g64")
    assert [c.route for c in pinned_int8.at(1)] == ["q4_gemv_int8"]
    with pytest.raises(ValueError, match="'i8r4g32' is an int8 GEMV for another group size than 64"):
        q4_linear(x=x, weight=w, out=out, adapter=adapter, gemv_shape="i8r4g32")
    with pytest.raises(ValueError, match="unknown GEMV shape 'r99'"):
        q4_linear(x=x, weight=w, out=out, adapter=adapter, gemv_shape="r99")


def test_every_shipped_flash_split_variant_is_reachable_and_none_is_a_sweep_kernel():
    from py_runtime.checks.attention import GEOMETRIES
    from py_runtime.models.config import MODELS
    from py_runtime.ops.attention import subgroup_flash_split

    configs = [*MODELS.values(), *GEOMETRIES.values()]      # (the checks' SmolLM2 geometry: G 3)
    reachable = {subgroup_flash_split(config.heads // config.kv_heads, config.head_dim, adapter.info)
                 for config in configs for adapter in ADAPTERS.values()} - {None}
    shipped = {name for name in kernel_names(tier="shipped") if name.startswith("sdpa_flash_split_sg_")}
    assert {name for name, _ in reachable} == shipped
    assert all(workgroups > 0 for _, workgroups in reachable)


def test_every_shipped_subgroup_prefill_variant_is_reachable_and_fits_the_adapter_it_is_picked_for():
    from py_runtime.ops.attention import subgroup_prefill_kernel

    picks = {(dim, name): subgroup_prefill_kernel(dim, adapter.info) for dim in (64, 128)
             for name, adapter in ADAPTERS.items()}
    shipped = {name for name in kernel_names(tier="shipped") if name.startswith("sdpa_prefill_sg_")}
    assert set(picks.values()) == shipped
    for (dim, name), pick in picks.items():
        values = kernel(pick).template_values
        assert 8 * values["SUB"] * values["W"] == dim
        assert values["SUB"] <= (ADAPTERS[name].info.get("subgroupMinSize") or 4), (name, pick)
    assert subgroup_prefill_kernel(80, ADAPTERS["h200-chromium"].info) is None


def test_the_dp4a_gemm_takes_the_prefill_only_where_every_row_is_quantized():
    """Activations of one row keep the prefill on the f32 GEMMs; of every row, the DP4A GEMM runs (and a
    pinned tile); too few rows fall back to the f32 GEMMs, and a device without the tile's memory (less
    than the f32 tiles need) to the generic linear. A QKV of every row runs three DP4A GEMMs, not Llama's
    fused f32 GEMM."""
    k, n = 2048, 2048
    w = _weight(k, n, 64, False)
    x, out = Tensor("x", (128, k), "f32", 0), Tensor("out", (128, n), "f32", 0)

    def act(rows):
        shape = (rows, k // 4) if rows > 1 else (k // 4,)
        return Int8Activations(x, Tensor("xq", shape, "u32", 0), Tensor("xs", shape[:-1] + (k // 16,), "f32", 0), 64)

    adapter = ADAPTERS["other-plain"]
    decode_only = q4_linear(x=x, weight=w, out=out, adapter=adapter, int8=act(1))
    assert [call.route for call in decode_only] == ["q4_gemv_int8x", "q4_gemm_bk64"]
    assert "not q4_gemm_dp4a: no int8 activations of the prefill rows given" in decode_only.explain()
    every_row = q4_linear(x=x, weight=w, out=out, adapter=adapter, int8=act(128))
    assert [call.route for call in every_row] == ["q4_gemv_int8x", "q4_gemm_dp4a"]
    assert [call.kernel for call in every_row.at(128)] == ["q4gsw_gemm_dp4a_m64k64p"]
    pinned = q4_linear(x=x, weight=w, out=out, adapter=adapter, int8=act(128), gemm_shape="m128k32")
    assert [call.kernel for call in pinned.at(7)] == ["q4gsw_gemm_dp4a_m128k32"]
    too_few = q4_linear(x=x, weight=w, out=out, adapter=adapter, int8=act(64))
    assert [call.route for call in too_few.at(64)] == ["q4_gemm_bk64"]
    assert "the int8 activations hold 64 rows; x and the outputs hold 128" in too_few.explain()
    small = AdapterReport(backend="native", info={}, features=(), device_features=(),
                          limits={"maxComputeInvocationsPerWorkgroup": 256, "maxComputeWorkgroupStorageSize": 8192})
    fallback = q4_linear(x=x, weight=w, out=out, adapter=small, int8=act(128))
    assert [call.route for call in fallback.at(128)] == ["q4_linear_generic"]
    assert "the m64k64p tile needs 9216 bytes of workgroup memory and 256 invocations" in fallback.explain()
    wq = _weight(k, 3072, 64, False)
    outs = (Tensor("q", (128, 2048), "f32", 0), Tensor("k", (128, 512), "f32", 0), Tensor("v", (128, 512), "f32", 0))
    assert [c.route for c in q4_linear_qkv(x=x, weight=wq, outs=outs, adapter=adapter, int8=act(1)).at(128)] == \
        ["q4_qkv_fused_bk64"]
    qkv = q4_linear_qkv(x=x, weight=wq, outs=outs, adapter=adapter, int8=act(128))
    assert [call.route for call in qkv.at(128)] == ["q4_gemm_dp4a"] * 3
    assert [call.route for call in qkv.at(1)] == ["q4_gemv_int8x_qkv"]
    assert "not q4_qkv_fused_bk64: int8 activations of every row: the separate linears take an int8 GEMM" in qkv.explain()
    with pytest.raises(ValueError, match="unknown GEMM tile 'm32k32'"):
        q4_linear(x=x, weight=w, out=out, adapter=adapter, int8=act(128), gemm_shape="m32k32")
    with pytest.raises(ValueError, match="x holds 128"):
        act(129)


def test_the_subgroup_matrix_gemm_takes_the_int8_prefill_where_the_device_allows_it():
    """With the feature, the i8 config listed, the probe compiled and 32-wide subgroups, the int8 prefill
    runs on subgroup matrices (a pinned tile of either family picks its kernel); each missing condition
    falls back to the DP4A GEMM, saying which; a forced subgroup-matrix route that cannot run is refused."""
    k, n = 2048, 2048
    w = _weight(k, n, 64, False)
    x, out = Tensor("x", (128, k), "f32", 0), Tensor("out", (128, n), "f32", 0)
    act = Int8Activations(x, Tensor("xq", (128, k // 4), "u32", 0), Tensor("xs", (128, k // 16), "f32", 0), 64)
    able = ADAPTERS["h200-chromium-sgmat"]

    def prefill(adapter, **pins):
        op = q4_linear(x=x, weight=w, out=out, adapter=adapter, int8=act, **pins)
        return [call.kernel for call in op.at(128)], op.explain()

    assert prefill(able)[0] == ["q4gsw_gemm_sgmat_m32n64w4p"]
    assert not [shape for shape in gemm_sgmat_shapes() if "f16" in shape]     # the f16 family is another route's
    # both recorded; at a large grid (>= 256 DP4A tiles) the DP4A one runs and the other idles
    both = q4_linear(x=x, weight=w, out=out, adapter=able, int8=act)
    assert [call.route for call in both] == ["q4_gemv_int8x", "q4_gemm_sgmat_i8", "q4_gemm_dp4a"]
    wide = _weight(k, 16384, 64, False)
    wide_out = Tensor("wide", (128, 16384), "f32", 0)
    assert [call.kernel for call in q4_linear(x=x, weight=wide, out=wide_out, adapter=able, int8=act).at(128)] == \
        ["q4gsw_gemm_dp4a_m64k64p"]                             # 256 x 2 = 512 tiles
    assert [call.kernel for call in q4_linear(x=x, weight=wide, out=wide_out, adapter=able, int8=act).at(64)] == \
        ["q4gsw_gemm_dp4a_m64k64p"]                             # 256 tiles
    assert [call.kernel for call in q4_linear(x=x, weight=w, out=out, adapter=able, int8=act).at(64)] == \
        ["q4gsw_gemm_sgmat_m32n64w4p"]                          # 32 tiles
    assert prefill(able, gemm_shape="m32n64w4")[0] == ["q4gsw_gemm_sgmat_m32n64w4"]
    assert prefill(able, gemm_shape="m64k64")[0] == ["q4gsw_gemm_dp4a_m64k64"]
    assert "not q4_gemm_sgmat_i8: the pinned tile 'm64k64' is not an int8 subgroup-matrix one" in \
        prefill(able, gemm_shape="m64k64")[1]
    # a pinned tile that does not fit is refused with its size (and the pin refuses DP4A too)
    assert kernel("q4gsw_gemm_sgmat_m64n64").workgroup_bytes == 88 * (64 + 64) + 4 * 64 * 64 == 27648
    squeezed = replace(able, limits={**BIG, "maxComputeWorkgroupStorageSize": 24576})
    assert "the m64n64 tile needs 27648 bytes of workgroup memory" in prefill(squeezed, gemm_shape="m64n64")[1]
    assert prefill(squeezed, gemm_shape="m64n64")[0] == ["q4gsw_gemm_bk32"]         # (BK64 needs 32 KiB too)
    assert prefill(able, force="q4_gemm_dp4a")[0] == ["q4gsw_gemm_dp4a_m64k64p"]
    missing = {
        "no int8 subgroup-matrix config": replace(able, info={**able.info, "subgroupMatrixConfigs": [{**SGMAT_I8, "K": 16}]}),
        "the subgroup_matrix_i8 probe kernel did not compile: error: unresolved":
            replace(able, probes={"subgroup_matrix_i8": "error: unresolved type 'subgroup_matrix_left'"}),
        "the kernel lays its tile out over 32-wide subgroups; the adapter's are 32..64":
            replace(able, info={**able.info, "subgroupMaxSize": 64}),
        "the m32n64w4p tile needs 16640 bytes of workgroup memory":
            replace(able, limits={**BIG, "maxComputeWorkgroupStorageSize": 16384}),
        "no int8 subgroup-matrix config (i8 x i8 -> i32, 16x16x32; the feature": replace(able, device_features=("subgroups",)),
    }
    for why, adapter in missing.items():
        kernels, explained = prefill(adapter)
        assert kernels == ["q4gsw_gemm_dp4a_m64k64p"] and why in explained, (why, explained)
        with pytest.raises(RouteUnavailable, match="route 'q4_gemm_sgmat_i8' cannot run here"):
            q4_linear(x=x, weight=w, out=out, adapter=adapter, int8=act, force="q4_gemm_sgmat_i8")


def test_k_splits_take_whole_groups_and_tiles_within_the_room_and_only_where_the_grid_is_small():
    room = split_k_room()
    sgmat, dp4a = GemmTile.of("q4gsw_gemm_sgmat_sk_m32n64w4p"), GemmTile.of("q4gsw_gemm_dp4a_sk_m64k64")
    for tile in (sgmat, dp4a, GemmTile.of("q4gsw_gemm_dp4a_sk_m64k128")):
        target = 512 * 128 // tile.invocations         # workgroups wanted: 512 of 128 invocations' worth
        for k, n, gs in ((2048, 2048, 64), (2048, 512, 64), (8192, 2048, 64), (3072, 1024, 64), (1024, 40, 128),
                         (2048, 100, 32), (160, 131, 32), (1088, 72, 64)):
            for m in (2, 7, 128, 129, 512, 2048):
                splits, per_split = k_splits(k, n, gs, m, tile, room)
                chunks, tiles = k // 32, -(-n // tile.n) * -(-m // tile.m)
                assert 1 <= splits <= 8 and (splits - 1) * per_split < chunks <= splits * per_split, (k, n, m)
                if splits > 1:      # whole groups and K tiles, 8 chunks at least; no more than the grid needs
                    assert per_split % tile.chunks == 0 and per_split % max(1, gs // 32) == 0 and per_split >= 8
                    assert splits * m * n <= room and (splits - 1) * tiles < target
                else:
                    assert per_split == chunks
    assert k_splits(2048, 2048, 64, 128, sgmat, room) == (4, 16)       # 128 tiles: 512 workgroups
    assert k_splits(2048, 2048, 64, 128, dp4a, room) == (4, 16)        # 64 tiles of 256: the same invocations
    assert k_splits(2048, 2048, 64, 512, sgmat, room)[0] == 1          # 512 tiles already
    assert k_splits(2048, 2048, 64, 128, sgmat, 3 * 128 * 2048)[0] == 3    # the scratch holds 3


def test_large_prefill_grids_fuse_the_qkv_and_the_glu_into_one_dp4a_gemm_each():
    """Where the stacked QKV's DP4A grid (or the gate's own) reaches SGMAT_UNTIL_DP4A_TILES tiles, one GEMM
    does the work of the separate linears (and the swiglu), which idle there and run below it."""
    from py_runtime.dispatch import idle_where
    from py_runtime.ops.swiglu import swiglu

    k, n_q, n_kv, f = 2048, 2048, 512, 8192
    x = Tensor("x", (512, k), "f32", 0, "x")
    act = Int8Activations(x, Tensor("xq", (512, k // 4), "u32", 0), Tensor("xs", (512, k // 16), "f32", 0), 64)
    partials = Tensor("partials", (split_k_room(),), "f32", 0, "scratch")
    outs = tuple(Tensor(name, (512, width), "f32", 0, name) for name, width in (("q", n_q), ("k", n_kv), ("v", n_kv)))
    able = ADAPTERS["h200-chromium-sgmat"]
    qkv = q4_linear_qkv(x=x, weight=_weight(k, n_q + 2 * n_kv, 64, False), outs=outs, adapter=able, int8=act,
                        partials=partials)
    assert [call.kernel for call in qkv.at(512)] == ["q4gsw_gemm_dp4a_qkv_m64k64p"]      # 48 x 8 tiles
    assert [call.kernel for call in qkv.at(384)] == ["q4gsw_gemm_dp4a_qkv_m64k64p"]      # 48 x 6
    assert "q4_qkv_fused_dp4a" not in [call.route for call in qkv.at(320)]                 # 48 x 5
    assert sorted({call.route for call in qkv.at(128)}) == ["q4_gemm_sgmat_i8", "q4_gemm_split_k"]
    fused = next(call for call in qkv if call.route == "q4_qkv_fused_dp4a")
    assert fused.sizing(kernel(fused.kernel), {"tokens": 128}).workgroups == (0, 0, 0)
    assert fused.sizing(kernel(fused.kernel), {"tokens": 512}).workgroups == (48, 8, 1)
    idled = next(call for call in qkv if call.route == "q4_gemm_sgmat_i8")
    assert idled.sizing(kernel(idled.kernel), {"tokens": 512}).workgroups == (0, 0, 0)
    # one row of int8 activations: no prefill GEMM is fused, and the op says why
    single = Int8Activations(x, _t("xq1", k // 4, "u32"), _t("xs1", k // 16), 64)
    assert "q4_qkv_fused_dp4a" not in [c.route for c in q4_linear_qkv(x=x, weight=_weight(k, n_q + 2 * n_kv, 64, False),
                                                                      outs=outs, adapter=able, int8=single)]

    gate_up = _weight(k, 2 * f, 64, False)
    act_out = Tensor("act", (512, f), "f32", 0, "act")
    glu = q4_linear_glu(act=act, weight=gate_up, out=act_out, adapter=able)
    assert [call.route for call in glu] == ["q4_gemv_int8x_glu", "q4_glu_dp4a"]
    prefill = glu.calls[1]
    assert [call.kernel for call in glu.at(128)] == ["q4gsw_gemm_dp4a_glu_m64k64p"]      # the gate's 128 x 2 tiles
    assert prefill.sizing(kernel(prefill.kernel), {"tokens": 128}).workgroups == (256, 2, 1)
    assert glu.at(64) == () and glu.at(1)[0].route == "q4_gemv_int8x_glu"
    gate = q4_linear(x=x, weight=gate_up.rows(0, f), out=Tensor("g", (512, f), "f32", 0), adapter=able, int8=act)
    apart = idle_where(gate, prefill)
    assert apart.at(128) == () and [c.kernel for c in apart.at(64)] == ["q4gsw_gemm_sgmat_m32n64w4p"]
    assert idle_where(swiglu(gate=act_out, up=act_out, out=act_out), prefill).at(128) == ()


def test_a_small_int8_gemm_grid_splits_k_and_a_reduce_adds_the_splits():
    """With a partials scratch the int8 GEMMs run their _sk forms: the subgroup-matrix one at M 128 (128 tiles
    of 32 x 64) in 4 splits over grid z with the reduce pass after it, at M 512 (512 tiles) one split and the
    reduce idles; the large-grid DP4A GEMM beside it never splits; where the adapter has no subgroup matrices
    the DP4A GEMM splits its small grids the same way."""
    k, n = 2048, 2048
    w = _weight(k, n, 64, False)
    x, out = Tensor("x", (512, k), "f32", 0, "x"), Tensor("out", (512, n), "f32", 0, "out")
    act = Int8Activations(x, Tensor("xq", (512, k // 4), "u32", 0), Tensor("xs", (512, k // 16), "f32", 0), 64)
    partials = Tensor("partials", (split_k_room(),), "f32", 0, "scratch")
    op = q4_linear(x=x, weight=w, out=out, adapter=ADAPTERS["h200-chromium-sgmat"], int8=act, partials=partials,
                   accumulate=True)
    assert [call.route for call in op] == ["q4_gemv_int8x", "q4_gemm_sgmat_i8", "q4_gemm_dp4a", "q4_gemm_split_k"]
    gemm, large, reduce = op.calls[1:]
    assert gemm.kernel == "q4gsw_gemm_sgmat_sk_m32n64w4p" and gemm.tensors["partials"] is partials
    assert large.kernel == "q4gsw_gemm_dp4a_m64k64p" and "partials" not in large.tensors

    def grid(call, m):
        return call.sizing(kernel(call.kernel), {"tokens": m}).workgroups

    assert grid(gemm, 128) == (32, 4, 4) and grid(reduce, 128) == (1024, 1, 1)     # 128 x 2048 outputs
    assert grid(gemm, 256) == (32, 8, 2) and grid(large, 256) == (0, 0, 0)        # 128 DP4A tiles
    assert grid(gemm, 512) == (0, 0, 0) and grid(large, 512) == (32, 8, 1) and grid(reduce, 512) == (0, 0, 0)
    plain = q4_linear(x=x, weight=w, out=out, adapter=ADAPTERS["other-sg32"], int8=act, partials=partials)
    assert [call.kernel for call in plain.at(128)] == ["q4gsw_gemm_dp4a_sk_m64k64p", "q4gsw_gemm_split_reduce"]
    assert grid(plain.calls[1], 128) == (32, 2, 4) and grid(plain.calls[2], 2048 // 4) == (0, 0, 0)
    with pytest.raises(ValueError, match="partials .* must be an f32 scratch of its own"):
        q4_linear(x=x, weight=w, out=out, adapter=ADAPTERS["h200-chromium-sgmat"], int8=act, partials=out)


def test_the_f16_subgroup_matrix_gemm_takes_an_f32_prefill_only_when_asked_and_possible():
    """half=True and a device with shader-f16, the f16 config and its probe: the f32 prefill runs on f16
    subgroup matrices; without half, or without any of those, the f32 GEMMs run, saying why; int8
    activations of every row keep their own routes."""
    k, n = 2048, 2048
    w = _weight(k, n, 64, False)
    x, out = Tensor("x", (128, k), "f32", 0), Tensor("out", (128, n), "f32", 0)
    able = ADAPTERS["h200-chromium-f16"]

    def prefill(adapter, **options):
        op = q4_linear(x=x, weight=w, out=out, adapter=adapter, **options)
        return [call.route for call in op.at(128)], op.explain()

    assert prefill(able, half=True)[0] == ["q4_gemm_sgmat_f16"]
    assert prefill(able)[0] == ["q4_gemm_bk64"]
    assert "not q4_gemm_sgmat_f16: f16 rounding not asked for (half=True)" in prefill(able)[1]
    act = Int8Activations(x, Tensor("xq", (128, k // 4), "u32", 0), Tensor("xs", (128, k // 16), "f32", 0), 64)
    assert prefill(able, half=True, int8=act)[0] == ["q4_gemm_sgmat_i8"]
    for why, adapter in {
        "the device has no f16 subgroup-matrix config": ADAPTERS["h200-chromium-sgmat"],
        "the subgroup_matrix_f16 probe kernel did not compile: nope":
            replace(able, probes={"subgroup_matrix_i8": "ok", "subgroup_matrix_f16": "nope"}),
        "32-wide subgroups": replace(able, info={**able.info, "subgroupMinSize": 8}),
    }.items():
        routes, explained = prefill(adapter, half=True)
        assert routes == ["q4_gemm_bk64"] and why in explained, (why, explained)
    # a pinned f16 tile runs where it fits, else the f32 GEMM says why; an int8 tile is not f16's
    kernels = lambda adapter, shape: [c.kernel for c in q4_linear(x=x, weight=w, out=out, adapter=adapter, half=True,  # noqa: E731
                                                                 gemm_shape=shape).at(128)]
    assert kernels(able, "m64n64w4") == ["q4gsw_gemm_sgmat_f16_m64n64w4"]
    # (staged rows and columns of 72 halves, and one 16 x 16 f32 result matrix per subgroup of 32)
    assert kernel("q4gsw_gemm_sgmat_f16_m128n128w8").workgroup_bytes == 144 * (128 + 128) + 1024 * 8 == 45056
    # (k-major weights: 64 rows of k, each TN + 8 halves)
    assert kernel("q4gsw_gemm_sgmat_f16_m128n128w8k").workgroup_bytes == 144 * 128 + 2 * 64 * 136 + 1024 * 8
    small = replace(able, limits={**BIG, "maxComputeWorkgroupStorageSize": 32768})
    assert kernels(small, "m64n64w4") == ["q4gsw_gemm_sgmat_f16_m64n64w4"]
    assert kernels(small, "m128n128w8") == ["q4gsw_gemm_bk64"]
    assert "the m128n128w8 tile needs 45056 bytes of workgroup memory" in \
        q4_linear(x=x, weight=w, out=out, adapter=small, half=True, gemm_shape="m128n128w8").explain()
    assert "the pinned tile 'm32n64w4p' is not an f16 subgroup-matrix one" in \
        q4_linear(x=x, weight=w, out=out, adapter=able, half=True, gemm_shape="m32n64w4p").explain()
    # unpinned, the tile follows the live M's grid (SGMAT_F16_TIERS), among those the adapter's memory holds
    roomy = replace(able, limits={**BIG, "maxComputeWorkgroupStorageSize": 49152})
    tall = Tensor("x", (512, k), "f32", 0)
    for weight, adapter, m, tile in ((_weight(k, 3072, 64, False), roomy, 512, "m128n128w8k"),  # 96 tiles of 128
                                     (w, roomy, 512, "m64n128w8k"),                             # 64, then 128
                                     (_weight(k, 8192, 64, False), roomy, 128, "m64n128w8k"),
                                     (w, roomy, 128, "m64n64w8"),                               # 16, then 32
                                     (_weight(k, 8192, 64, False), small, 512, "m64n64w8")):    # 44, 35 KB: past 32
        wide = Tensor("out", (512, weight.n), "f32", 0)
        op = q4_linear(x=tall, weight=weight, out=wide, adapter=adapter, half=True)
        assert [call.kernel for call in op.at(m)] == [f"q4gsw_gemm_sgmat_f16_{tile}"], (weight.n, m, tile)
        assert len(op.calls) == 1 + (3 if adapter is roomy else 1)  # the decode GEMV and a dispatch per tier


def _attention_stubs(heads: int, kv_heads: int, dim: int, capacity: int):
    """Tensors (never allocated) for sdpa's route choice: q, out, a KV cache and its scratch."""
    from py_runtime.ops.attention import AttentionScratch
    from py_runtime.tensors import Tensor

    f32 = lambda name, *shape: Tensor(name, shape, "f32", 0)                 # noqa: E731
    u32 = lambda name, *shape: Tensor(name, shape, "u32", 0)                 # noqa: E731
    cache = KVCache(u32("k", capacity, kv_heads, dim // 2), u32("v", capacity, kv_heads, dim // 2), u32("offset", 1),
                    capacity, kv_heads, dim)
    scratch = AttentionScratch(f32("s", heads, capacity), f32("ml", heads * 256, 2), f32("o", heads * 256, dim), 1,
                               capacity)
    return f32("q", 1, heads, dim), f32("out", 1, heads, dim), cache, scratch


@pytest.mark.parametrize("adapter, dim, expected", [
    ("h200-chromium", 64, ("sdpa_decode_subgroup", 1024)), ("h200-chromium", 128, ("sdpa_decode_subgroup", 512)),
    ("h200-native", 64, ("sdpa_decode_subgroup", 1024)), ("h200-native", 128, ("sdpa_flash_subgroup", None)),
    ("other-sg32", 128, ("sdpa_decode_subgroup", 512)), ("h200-no-subgroups", 64, ("sdpa_flash_decode", None)),
    ("swiftshader", 64, ("sdpa_flash_subgroup", None))])
def test_the_decode_attention_follows_the_tuning_table_and_records_flash_decoding_past_its_reach(adapter, dim, expected):
    """The one pass where the adapter's table runs it (not natively for heads of 128 on the H200, where Naga's
    code lost), recorded beside FlashDecoding on subgroups; which runs follows the context bound (CONTEXT
    where the position is on the GPU)."""
    from py_runtime.dispatch import CONTEXT, TOKENS
    from py_runtime.ops.attention import one_pass_decode, sdpa

    heads = 2 * 8
    q, out, cache, scratch = _attention_stubs(heads, 8, dim, 4096)
    op = sdpa(q=q, cache=cache, out=out, scratch=scratch, heads=heads, adapter=ADAPTERS[adapter], pos=0,
              gpu_position=True)
    route, reach = expected
    decode = {call.route for call in op.calls if call.phase == "decode"}
    one = one_pass_decode(dim, ADAPTERS[adapter].info)
    if "subgroups" in ADAPTERS[adapter].device_features:       # (the table's pick; the route's guard wants subgroups)
        assert (one[1] if one else None) == reach
    if reach is None:
        assert decode == {route}
        return
    assert decode == {"sdpa_decode_subgroup", "sdpa_flash_subgroup"}

    def running(band):
        live = {TOKENS: 1, "pos": 0, CONTEXT: band, "max_workgroups_per_dim": 65535}
        return {call.route for call in op.calls if call.sizing(kernel(call.kernel), live).workgroups != (0, 0, 0)}
    assert running(reach) == {"sdpa_decode_subgroup"} and running(2 * reach) == {"sdpa_flash_subgroup"}
    assert running(64) == {"sdpa_decode_subgroup"}


@pytest.mark.parametrize("dim, short", [(64, 160), (128, 192)])
def test_short_prompts_take_the_subgroup_prefill_where_the_table_measured_it_faster_than_the_tensor_cores(dim, short):
    """On the H200 with half=True both prefills are recorded: the subgroup one runs through the table's length
    for the head_dim, the f16 subgroup-matrix one above it, one of them at any live token count (a decode
    step neither). A pinned variant or a forced route records that route alone; another adapter's table
    (no measurement) keeps the subgroup-matrix route at every length."""
    from py_runtime.dispatch import TOKENS
    from py_runtime.ops.attention import sdpa
    from py_runtime.tensors import Tensor

    heads = 4 * 8 if dim == 64 else 2 * 8
    _, _, cache, scratch = _attention_stubs(heads, 8, dim, 4096)
    q = out = Tensor("q", (1024, heads, dim), "f32", 0)

    def prefills(adapter, **options):
        op = sdpa(q=q, cache=cache, out=out, scratch=scratch, heads=heads, adapter=adapter, half=True, **options)
        return op, [call for call in op.calls if call.phase == "prefill"]

    op, calls = prefills(ADAPTERS["h200-chromium-f16"])
    assert [call.route for call in calls] == ["sdpa_prefill_subgroup", "sdpa_prefill_sgmat_f16"]
    assert f"prefill through {short} tokens" in op.explain()

    def running(tokens):
        live = {TOKENS: tokens, "pos": 0, "max_workgroups_per_dim": 65535}
        return [call.route for call in calls if call.sizing(kernel(call.kernel), live).workgroups != (0, 0, 0)]
    assert running(2) == running(short) == ["sdpa_prefill_subgroup"]
    assert running(short + 1) == running(1024) == ["sdpa_prefill_sgmat_f16"]
    assert running(1) == []
    # the attention oracle restates the choice (it judges the attested route against its own)
    from py_runtime.host.oracle.attention import expected_attention_route
    case = {"force": None, "heads": heads, "kv_heads": 8, "head_dim": dim, "half": True}
    report = ADAPTERS["h200-chromium-f16"].to_json()
    assert [expected_attention_route(case, t, report) for t in (2, short, short + 1)] == [
        "sdpa_prefill_subgroup", "sdpa_prefill_subgroup", "sdpa_prefill_sgmat_f16"]
    assert expected_attention_route({**case, "short_prompts": False}, 2, report) == "sdpa_prefill_sgmat_f16"
    for options in ({"prefill_kernel": f"sdpa_prefill_sgmat_d{dim}w4m16k32"}, {"prefill_route": "sdpa_prefill_sgmat_f16"},
                    {"short_prefill": False}):
        assert [call.route for call in prefills(ADAPTERS["h200-chromium-f16"], **options)[1]] == ["sdpa_prefill_sgmat_f16"]
    other = replace(ADAPTERS["h200-chromium-f16"], info={**ADAPTERS["h200-chromium-f16"].info, "device": "0x1234",
                                                         "description": "another GPU"})
    assert [call.route for call in prefills(other)[1]] == ["sdpa_prefill_sgmat_f16"]


def test_a_forced_one_pass_runs_where_the_tuning_table_keeps_flash_decoding():
    """SwiftShader's table keeps FlashDecoding (the one pass measured slower there), but the route is still a
    correct choice to force (checks, benchmarks): the portable table's variant runs."""
    from py_runtime.ops.attention import sdpa

    q, out, cache, scratch = _attention_stubs(4, 2, 64, 64)
    auto = sdpa(q=q, cache=cache, out=out, scratch=scratch, heads=4, adapter=ADAPTERS["swiftshader"])
    assert "the tuning table 'swiftshader' runs FlashDecoding at every context here" in auto.explain()
    forced = sdpa(q=q, cache=cache, out=out, scratch=scratch, heads=4, adapter=ADAPTERS["swiftshader"],
                  force="sdpa_decode_subgroup")
    assert [call.kernel for call in forced.calls] == ["sdpa_decode_sg_w2u2p"]
    with pytest.raises(RouteUnavailable, match="needs the 'subgroups' feature"):
        sdpa(q=q, cache=cache, out=out, scratch=scratch, heads=4, adapter=ADAPTERS["h200-no-subgroups"],
             force="sdpa_decode_subgroup")


def test_the_f16_subgroup_matrix_prefill_attention_runs_only_when_asked_and_possible():
    """half=True on a device with shader-f16, the f16 config, its probe and 32-wide subgroups: the prefill's
    attention runs on f16 subgroup matrices (the tables' variant for the head_dim); without half, or with any
    of those missing, a group larger than its rows or its workgroup memory over
    the device's, the subgroup prefill runs and the choice says why. A pinned variant of either family goes
    to its own route."""
    from py_runtime.ops.attention import sdpa

    able = ADAPTERS["h200-chromium-f16"]

    def prefill(adapter, heads=32, dim=64, capacity=4096, **options):
        q, out, cache, scratch = _attention_stubs(heads, 8, dim, capacity)
        op = sdpa(q=q, cache=cache, out=out, scratch=scratch, heads=heads, adapter=adapter, **options)
        return [call.kernel for call in op.calls if call.phase == "prefill"], op.explain()

    # (the H200's table records the subgroup route for short prompts beside it: the next test)
    assert prefill(able, half=True)[0] == ["sdpa_prefill_sg_d64s4w2u2pk4", "sdpa_prefill_sgmat_d64w4m16k32"]
    assert prefill(able, heads=16, dim=128, half=True)[0] == ["sdpa_prefill_sg_d128s8w2u2pk4",
                                                              "sdpa_prefill_sgmat_d128w4m16k32"]
    assert prefill(able)[0] == ["sdpa_prefill_sg_d64s4w2u2pk4"]
    assert "not sdpa_prefill_sgmat_f16: f16 rounding of the queries and probabilities not asked for" in prefill(able)[1]
    for why, adapter, options in (
            ("the device has no f16 subgroup-matrix config", ADAPTERS["h200-chromium-sgmat"], {}),
            ("32-wide subgroups", replace(able, info={**able.info, "subgroupMinSize": 8}), {}),
            ("65 query heads per KV head exceed sdpa_prefill_sgmat_d64w4m16k32's 64 rows", able, {"heads": 65 * 8}),
            ("no variant for head_dim 80", able, {"dim": 80}),
            ("needs 23568 bytes of workgroup memory; the device allows 16384",
             replace(able, limits={**BIG, "maxComputeWorkgroupStorageSize": 16384}), {})):
        kernels, explained = prefill(adapter, half=True, **options)
        assert not any(k.startswith("sdpa_prefill_sgmat_") for k in kernels) and why in explained, (why, explained)
    # (the tile's 32 K and 32 V rows of 72 halves, f32 scores and f16 probabilities of 64 rows, the rescale flag)
    assert kernel("sdpa_prefill_sgmat_d64w4m16k32").workgroup_bytes == 2 * 2 * 32 * 72 + 64 * (4 * 36 + 2 * 40) + 16
    assert prefill(able, half=True, prefill_kernel="sdpa_prefill_sgmat_d64w2m32k32")[0] == ["sdpa_prefill_sgmat_d64w2m32k32"]
    assert prefill(able, half=True, prefill_kernel="sdpa_prefill_sg_d64s4w2u2p")[0] == ["sdpa_prefill_sgmat_d64w4m16k32"]
    assert prefill(able, prefill_kernel="sdpa_prefill_sgmat_d64w2m32k32")[0] == ["sdpa_prefill_sg_d64s4w2u2pk4"]
    with pytest.raises(ValueError, match="prefill kernel for head_dim 128"):
        prefill(able, heads=16, dim=128, half=True, prefill_kernel="sdpa_prefill_sgmat_d64w4m16k32")


def _storage(adapter: AdapterReport, size: int) -> AdapterReport:
    return replace(adapter, limits={**adapter.limits, "maxComputeWorkgroupStorageSize": size})


@pytest.mark.parametrize("adapter,options", [("other-plain", {}), ("other-plain", {"int8": True}),
                                             ("h200-chromium-sgmat", {"int8": True}),
                                             ("h200-chromium-f16", {"half": True})])
def test_each_prefill_gemm_guard_admits_exactly_its_kernels_workgroup_bytes(adapter, options):
    """The guards read the registry's workgroup_bytes (derived from the WGSL): a device with exactly that
    much runs the kernel; one byte less falls back, naming the size."""
    k, n = 2048, 2048
    w = _weight(k, n, 64, False)
    x, out = Tensor("x", (128, k), "f32", 0), Tensor("out", (128, n), "f32", 0)
    if options.pop("int8", False):
        options["int8"] = Int8Activations(x, Tensor("xq", (128, k // 4), "u32", 0), Tensor("xs", (128, k // 16), "f32", 0),
                                          64)

    def prefill(device):
        op = q4_linear(x=x, weight=w, out=out, adapter=device, **options)
        return [call.kernel for call in op.at(128)], op.explain()

    roomy = _storage(ADAPTERS[adapter], 65536)
    [name] = prefill(roomy)[0]
    need = kernel(name).workgroup_bytes
    assert prefill(_storage(roomy, need))[0] == [name]
    kernels, explained = prefill(_storage(roomy, need - 1))
    assert name not in kernels and f" {need} bytes of workgroup memory" in explained, (name, explained)


def test_the_attention_prefill_guards_admit_exactly_their_kernels_workgroup_bytes():
    from py_runtime.ops.attention import AttentionScratch, sdpa

    f32 = lambda name, *shape: Tensor(name, shape, "f32", 0)                 # noqa: E731
    u32 = lambda name, *shape: Tensor(name, shape, "u32", 0)                 # noqa: E731
    cache = KVCache(u32("k", 64, 8, 64), u32("v", 64, 8, 64), u32("offset", 1), 64, 8, 128)
    scratch = AttentionScratch(f32("s", 16 * 16, 64), f32("ml", 16 * 256, 2), f32("o", 16 * 256, 128), 16, 64)
    q, out = f32("q", 16, 16, 128), f32("out", 16, 16, 128)
    plain = AdapterReport(backend="native", info={}, features=(), device_features=(),
                          limits={"maxComputeInvocationsPerWorkgroup": 256})

    def prefill(device, **options):
        op = sdpa(q=q, cache=cache, out=out, scratch=scratch, heads=16, adapter=device, **options)
        return [call.kernel for call in op.calls if call.phase == "prefill"], op.explain()

    need = kernel("sdpa_q32").workgroup_bytes
    assert prefill(_storage(plain, need), q32=True)[0] == ["sdpa_q32"]
    kernels, explained = prefill(_storage(plain, need - 1), q32=True)
    assert kernels == ["sdpa_q16"] and f"not sdpa_q32: needs {need} bytes of workgroup memory" in explained

    able = ADAPTERS["h200-chromium-f16"]
    [name] = [k for k in prefill(able, half=True)[0] if k.startswith("sdpa_prefill_sgmat_")]
    need = kernel(name).workgroup_bytes
    assert name in prefill(_storage(able, need), half=True)[0]
    kernels, explained = prefill(_storage(able, need - 1), half=True)
    assert name not in kernels and f"{name} needs {need} bytes of workgroup memory" in explained
