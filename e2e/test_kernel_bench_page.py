"""The kernel bench in the page: its JSON report, and what the page renders from it (the per-pass
table, the decode-chain table and its chart, the prefill rows against the probes; the decode-step table)."""

from __future__ import annotations

from .conftest import assert_clean


def test_kernel_bench_page_shows_the_decode_chain(lab):
    run = lab.run_page({"suite": "kernel_bench", "preset": "tiny", "repeats": 2, "trials": 1,
                        "chain_bytes": 1 << 19}, timeout_s=300)
    assert_clean(run)
    # A benchmark checks nothing, and the page says so (not PASS, not FAIL); progress per case.
    assert run.report["result"] == "not checked" and run.status_text.startswith("NOT CHECKED:"), run.status_text
    assert run.progress == {"boot": {"done": 5, "total": 5}, "kernel bench cases": {"done": 5, "total": 5}}, run.progress
    assert "kernel bench cases: 5/5" in run.page_text
    rows = run.report["rows"]
    assert [r["route"] for r in rows][1] == "q4_gemv_int8"
    decode = [r for r in rows if r["rows"] == 1]
    assert decode and all(r["chain_copies"] > 1 and r["chain_ns"] > 0 and r["chain_stream_ns"] > 0 for r in decode)
    text = run.page_text
    assert "Decode chain: one pass" in text and "Decode chain: % of a streaming read" in text
    assert "stream+store µs" in text
    assert "Prefill arithmetic" in text and "% of dp4a" in text and "dp4a probe" in text
    assert all(r["case"] in text for r in rows)


def test_kernel_bench_page_charts_the_prefill_gemms_against_their_probes_without_a_decode_chain(lab):
    run = lab.run_page({"suite": "kernel_bench", "preset": "tiny", "only": "gemm", "repeats": 2, "trials": 1,
                        "chain_bytes": 0}, timeout_s=300)
    assert_clean(run)
    rows = run.report["rows"]
    # each GEMM against its own instruction's probe (SwiftShader has no subgroup matrices: none measured)
    assert [(r["route"], r["probe"]) for r in rows] == [("q4_gemm_tiled", "fma"), ("q4_gemm_dp4a", "dp4a")]
    assert set(run.report["probes"]) == {"dp4a", "fma"}
    assert "Prefill: % of the probe of each GEMM's instruction" in run.page_text
    assert "% of fma" in run.page_text and "Decode chain" not in run.page_text


def test_kernel_bench_page_shows_a_decode_step(lab):
    run = lab.run_page({"suite": "kernel_bench", "preset": "tiny_step", "trials": 1}, timeout_s=300)
    assert_clean(run)
    step = run.report["step"]
    assert step["routes"]["int8"]["routes"][1:] == ["q4_gemv_int8", "swiglu_fused"]
    assert step["routes"]["int8"]["routes"][0] in ("rms_norm", "rms_norm_subgroup")
    # the tiny model: 2 layers x (norm, q, k, v, o, norm, gate, up, swiglu, down) + norm, lm_head
    assert step["routes"]["f32"]["dispatches"] == 22
    assert {"rms_norm_int8x", "q4_gemv_int8x_qkv", "q4_gemv_int8x_glu_q8"} <= set(step["routes"]["int8x"]["routes"])
    assert step["routes"]["int8x"]["dispatches"] == 16      # down's input quantized by the GLU: one fewer per layer
    assert ("decode token: 15 linears, the swiglu and the RMSNorms in one pass" in run.page_text
            and "Decode step: GB/s" in run.page_text)
