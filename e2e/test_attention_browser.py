"""The KV cache and attention routes inside Pyodide in Chromium, outputs checked on the host."""

from __future__ import annotations

from py_runtime.host.oracle import verify_attention_report

from .conftest import assert_clean


def test_every_route_and_geometry_matches_the_oracle(lab, run_id):
    upload = f"{run_id}-attention"
    run = lab.run_page({"suite": "attention", "upload": upload}, timeout_s=600)
    assert_clean(run)
    folder = lab.server.results_root / upload
    assert run.report["result"] == "not checked" and run.status_text.startswith("NOT CHECKED:"), run.status_text
    worst = verify_attention_report(run.report, lambda name: (folder / name).read_bytes())
    assert all(0 <= ratio <= 1 for ratio in worst.values()), worst
    routes = {step["routes"][-1] for case in run.report["cases"] for step in case["steps"]}
    assert routes == {"sdpa_materialized", "sdpa_flash_subgroup", "sdpa_flash_decode", "sdpa_prefill_subgroup",
                      "sdpa_k16", "sdpa_q16", "sdpa_q32", "sdpa_decode_subgroup"}
    assert "Attention steps (attested routes)" in run.page_text
    # the kv_f16 cases: SwiftShader has no shader-f16, so their caches fall back to the packed kernels and say
    # why (the verifier checked the spelling of every subgroup pass either way)
    spelled = [case for case in run.report["cases"] if case["kv_f16"]]
    assert len(spelled) == 5
    if "shader-f16" not in run.report["adapter"]["device_features"]:
        assert all("no 'shader-f16'" in case["kv_f16_refused"] for case in spelled)
        assert not any("kv_f16" in step["routes"] for case in run.report["cases"] for step in case["steps"])
