"""Q4 quantizer and linear routes inside Pyodide in Chromium, outputs checked on the host."""

from __future__ import annotations

from py_runtime.host.oracle import verify_q4_report

from .conftest import assert_clean


def test_every_route_at_real_and_awkward_shapes_matches_the_oracle(lab, run_id):
    upload = f"{run_id}-q4"
    run = lab.run_page({"suite": "q4", "preset": "browser", "upload": upload}, timeout_s=900)
    assert_clean(run)
    folder = lab.server.results_root / upload
    # The page judges nothing here (the oracle below does): it shows "not checked", never FAIL.
    assert run.report["result"] == "not checked" and run.status_text.startswith("NOT CHECKED:"), run.status_text
    verify_q4_report(run.report, lambda name: (folder / name).read_bytes())
    routes = {r for case in run.report["cases"] for run_ in case["runs"] for r in run_["routes"]}
    # SwiftShader's subgroups are 4 wide: the subgroup GEMV is the decode route in the browser.
    assert {"q4_gemm_tiled", "q4_gemm_bk64", "q4_qkv_fused_bk64", "q4_linear_generic", "q4_gemv_int8",
            "int8_activations", "q4_gemv_int8x", "q4_gemv_int8x_qkv", "q4_gemv_int8x_glu", "q4_gemv_int8x_glu_q8",
            "rms_norm_int8x", "q4_gemm_dp4a", "q4_gemv_int8x_qkv_rope"} <= routes
    assert routes & {"q4_gemv_subgroup", "q4_gemv_workgroup"}


def test_the_fused_glu_quantizes_its_output_as_quantize_activations_in_the_page(lab, run_id):
    """The fused gate/up + SwiGLU writing its output quantized for down (q4_gemv_int8x_glu_q8) on
    SwiftShader's 4-wide subgroups: bit for bit quantize_activations' of the same output, Llama's and
    Qwen's shapes and groups of 32 (verify_q4_report's _verify_glu_q8)."""
    upload = f"{run_id}-q4-glu-q8"
    only = ["int8x.glu_q8.llama", "int8x.rows.glu_q8.qwen", "int8x.glu_q8_gs32"]
    run = lab.run_page({"suite": "q4", "only": ",".join(only), "upload": upload}, timeout_s=600)
    assert_clean(run)
    folder = lab.server.results_root / upload
    verify_q4_report(run.report, lambda name: (folder / name).read_bytes())
    assert [case["name"] for case in run.report["cases"]] == only
    assert all(case["runs"][0]["routes"][-1] == "q4_gemv_int8x_glu_q8" for case in run.report["cases"])
    assert all("_glu_q8_" in case["kernels"][0] and "_sg_" in case["kernels"][0] for case in run.report["cases"])


def test_the_fused_qkv_applies_rope_and_writes_the_cache_as_rope_kv_cache_write_in_the_page(lab, run_id):
    """The fused QKV applying RoPE and writing the KV cache (q4_gemv_int8x_qkv_rope) on SwiftShader:
    its rotated q and both caches bit for bit rope_kv_cache_write's of the plain QKV's q, k, v, Llama's
    shape and each layout's variants (verify_q4_report's _verify_qkv_rope)."""
    upload = f"{run_id}-q4-qkv-rope"
    only = ["int8x.rows.llama.qkv_rope", "gemv.qkv_rope_half.r8u1w8.k2048", "gemv.rows.qkv_rope_interleaved.r8u1w8"]
    run = lab.run_page({"suite": "q4", "only": ",".join(only), "upload": upload}, timeout_s=600)
    assert_clean(run)
    folder = lab.server.results_root / upload
    verify_q4_report(run.report, lambda name: (folder / name).read_bytes())
    assert [case["name"] for case in run.report["cases"]] == only
    assert all(case["runs"][0]["routes"][-1] == "q4_gemv_int8x_qkv_rope" for case in run.report["cases"])
