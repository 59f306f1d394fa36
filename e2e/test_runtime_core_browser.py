"""Runtime core inside Pyodide in Chromium: the checks tests/test_runtime_core.py runs natively."""

from __future__ import annotations

from py_runtime.host.oracle import verify_runtime_report


def test_caching_resize_profiler_attestation_and_error_paths(lab, run_id):
    upload = f"{run_id}-runtime"
    run = lab.run_page({"suite": "runtime", "upload": upload}, timeout_s=300)
    # Not assert_clean: the device-loss check destroys the device on purpose, and Chromium logs that.
    assert run.state == "done", (run.stage, run.error)
    assert not run.page_errors, run.page_errors
    folder = lab.server.results_root / upload
    artifacts = {p.name: p.read_bytes() for p in folder.iterdir()}
    verify_runtime_report(run.report, artifacts.__getitem__)
    pages = run.report["params_pages"]
    assert pages["passed"] and pages["pages"][1] > pages["pages"][0] >= 1, pages
    assert run.report["adapter"]["backend"] == "browser"
