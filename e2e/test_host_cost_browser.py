"""In the page: replayed output is bit-identical to naive per-call encoding from Python, on the
per-token path too: after resizes (counts pushed to JS, params uploaded by the step) and after the
wasm heap grew under JS's long-lived view of the params shadow."""

from __future__ import annotations

from .conftest import assert_clean


def test_replay_matches_naive_encoding_bit_for_bit_in_the_browser(lab):
    run = lab.run_page({"suite": "host_cost", "dispatches": 23, "steps": 2}, timeout_s=120)
    assert_clean(run)
    report = run.report
    assert report["bit_identical"] is True
    assert report["adapter"]["backend"] == "browser"
    path = report["replay_path"]
    assert path["checks"] == {"waited": True, "step": True, "shrink": True, "grow_heap": True, "long": True}, path
    assert path["idle_dispatches"] > 0
    # The ballast did grow the heap (else the check proves nothing), and the step re-acquired its view.
    assert path["heap_view_renewed"] is True, path["param_views"]
    breakdown = report["replay_upload"]["breakdown"]
    assert breakdown["steps"] == 2 and breakdown["timer_step_us"] > 0
