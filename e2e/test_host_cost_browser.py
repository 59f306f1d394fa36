"""In the page: replayed output is bit-identical to naive per-call encoding from Python."""

from __future__ import annotations

from .conftest import assert_clean


def test_replay_matches_naive_encoding_bit_for_bit_in_the_browser(lab):
    run = lab.run_page({"suite": "host_cost", "dispatches": 23, "steps": 2}, timeout_s=120)
    assert_clean(run)
    assert run.report["bit_identical"] is True
    assert run.report["adapter"]["backend"] == "browser"
