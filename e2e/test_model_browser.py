"""Whole models inside Pyodide in Chromium (SwiftShader here): Llama-3.2-1B and Qwen3-0.6B at full width and
2 layers, prefill then greedy decode in one plan, judged on the host by the transformers oracle; one family
per activation policy (Qwen3 f32, Llama int8x; natively both run f32, and Llama int8x too). Shorter than the
native runs (an 8-token prompt, 2 greedy steps): SwiftShader takes seconds per decode step at a full
vocabulary (the f32 lm_head GEMV about 10 s at Qwen3's), and every pass runs twice."""

from __future__ import annotations

import pytest

from py_runtime.host.oracle.model import verify_model_report

from .conftest import assert_clean


@pytest.mark.parametrize("model, policy", [("qwen3", "f32"), ("llama", "int8x")])
def test_prefill_and_greedy_decode_match_transformers(lab, run_id, model, policy):
    upload = f"{run_id}-model-{model}-{policy}"
    options = {"suite": "model", "model": model, "policy": policy, "layers": 2, "prompt": 8, "decode": 2,
               "upload": upload}
    run = lab.run_page(options, timeout_s=900)
    assert_clean(run)
    folder = lab.server.results_root / upload
    assert run.report["result"] == "not checked" and run.status_text.startswith("NOT CHECKED:"), run.status_text
    judged = verify_model_report(run.report, lambda name: (folder / name).read_bytes())
    assert judged["worst_of_tolerance"] <= 1, judged
    assert "Steps (one plan, resized; attested routes)" in run.page_text
    if policy == "int8x":       # the prompt's 8 rows: the DP4A GEMMs split K, their reduce after them
        assert {"q4_gemm_dp4a", "q4_gemm_split_k"} <= set(run.report["steps"][0]["routes"])


def test_a_long_decode_in_the_page_repeats_itself_with_flat_memory(lab):
    """The soak check in Pyodide (CI-sized; the H200 runs 10,000 steps): two identical runs, our GPU
    buffers and the page's JS heap measured flat, the context's end refused, all shown on the page."""
    run = lab.run_page({"suite": "model_soak", "model": "tiny", "layers": 1, "prompt": 8, "steps": 32, "batch": 16},
                       timeout_s=600)
    assert_clean(run)
    report = run.report
    assert report["result"] == "passed" and run.status_text.startswith("PASS:"), (run.status_text, report["problems"])
    assert report["memory"]["before"]["host_heap_bytes"] is not None, "Chromium reports performance.memory"
    assert "tokens identical across the runs: yes" in run.page_text and "the context is full" in run.page_text
