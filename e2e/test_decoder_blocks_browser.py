"""Decoder building blocks inside Pyodide in Chromium (SwiftShader here): the workload and the host
verifier tests/test_native_decoder_blocks.py uses natively, fed by the page's uploads."""

from __future__ import annotations

from py_runtime.host.oracle import verify_decoder_blocks_report

from .conftest import assert_clean


def test_every_block_at_model_shapes_matches_the_float64_oracle(lab, run_id):
    upload = f"{run_id}-decoder-blocks"
    run = lab.run_page({"suite": "decoder_blocks", "upload": upload}, timeout_s=420)
    assert_clean(run)
    report = run.report
    assert report["adapter"]["backend"] == "browser"
    assert report["result"] == "passed", "the in-page structural checks failed"
    folder = lab.server.results_root / upload
    artifacts = {p.name: p.read_bytes() for p in folder.iterdir() if p.suffix == ".f32"}
    worst = verify_decoder_blocks_report(report, artifacts)
    # Both RMSNorm routes when the adapter has subgroups (SwiftShader does, 4 lanes wide).
    if report["subgroups"]:
        assert all(m["kernels"]["rms_norm_subgroup"].startswith("rms_norm_subgroup_wg") for m in report["models"])
        assert {"rms_norm_subgroup", "qk_norm_subgroup"} <= set(worst)
    assert {"rms_norm", "qk_norm", "rope_interleaved", "rope_half", "swiglu"} <= set(worst)
    assert "decoder blocks" in run.status_text and run.status_text.startswith("PASS")
