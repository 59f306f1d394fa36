"""The model bench in the page: its JSON report, and what the page renders from it (the summary table, the
decode step against its floor as dependent dispatches, each kernel's share)."""

from __future__ import annotations

from .conftest import assert_clean


def test_model_bench_page_shows_the_step_against_its_floor(lab):
    run = lab.run_page({"suite": "model_bench", "model": "tiny", "prompt": 8, "decode": 3}, timeout_s=300)
    assert_clean(run)
    report = run.report
    assert run.report["result"] == "not checked" and run.status_text.startswith("NOT CHECKED:"), run.status_text
    # SwiftShader has timestamp queries: the step's GPU time, its floor and each kernel's share are measured
    assert report["decode_span_us"] > 0 and report["decode_floor_us"] > 0 and report["kernels"]
    text = run.page_text
    assert f"The decode step's floor as {report['dispatches']['decode']} dependent dispatches" in text
    assert "Decode step: share of GPU time per kernel" in text
    assert all(r["kernel"] in text for r in report["kernels"])
