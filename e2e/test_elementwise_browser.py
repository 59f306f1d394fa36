"""The elementwise families inside Pyodide in headless Chromium: the workload tests/test_native_elementwise.py
runs natively, every uploaded tensor checked by the same host verifier."""

from __future__ import annotations

import json

from py_runtime.host.oracle import verify_elementwise_report

from .conftest import assert_clean

SEED = 21


def test_every_elementwise_variant_matches_the_float64_oracle_in_the_browser(lab, run_id, results_dir):
    upload = f"{run_id}-elementwise"
    run = lab.run_page({"suite": "elementwise", "seed": SEED, "upload": upload}, timeout_s=300)
    assert_clean(run)
    report = run.report
    assert report["adapter"]["backend"] == "browser"
    assert report["options"]["seed"] == SEED
    folder = lab.server.results_root / upload
    artifacts = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert json.loads(artifacts["report.json"]) == report
    summary = verify_elementwise_report(report, artifacts)      # first: it names the failing elements
    assert run.status_text.startswith("PASS:") and "elementwise cases" in run.status_text, run.status_text
    (results_dir / "elementwise_summary.json").write_text(json.dumps(
        {"adapter": report["adapter"]["info"], "wall_ms": report["wall_ms"], "kernels": summary}, indent=1) + "\n")
    assert summary["binary_floor_divide"]["near_integer_quotients"] > 100
    assert summary["to_copy_f32_i32"]["clamped"] > 100
