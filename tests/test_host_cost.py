"""The host-cost benchmark's correctness half: replayed output is bit-identical to naive encoding,
on the per-token path too, across resizes and with idle dispatches skipped by the native encoder.
(Its speed figures are printed by `webgpu-llm-lab bench host`, not asserted.)"""

from __future__ import annotations

import asyncio

from py_runtime.app import run


def test_replay_matches_naive_encoding_bit_for_bit_natively():
    report = asyncio.run(run("native", {"suite": "host_cost", "dispatches": 23, "steps": 2}))
    assert report["bit_identical"] is True
    for way in ("naive", "replay", "replay_upload"):
        result = report[way]
        assert result["host_us_per_dispatch"] > 0 and result["steps"] == 2, (way, result)
        assert 0 < result["median_us_per_step"] <= result["p90_us_per_step"], (way, result)
    # The native step times its phases; every replay_upload step uploaded.
    breakdown = report["replay_upload"]["breakdown"]
    assert breakdown["steps"] == 2 and breakdown["upload_us_per_step"] > 0 and breakdown["finish_us_per_step"] > 0


def test_replay_path_survives_resizes_and_skips_idle_dispatches_natively():
    path = asyncio.run(run("native", {"suite": "host_cost", "dispatches": 4, "steps": 1}))["replay_path"]
    assert path["checks"] == {"waited": True, "step": True, "shrink": True, "grow_heap": True, "long": True}, path
    assert path["idle_dispatches"] > 0 and path["passed"] is True
    assert path["heap_view_renewed"] is None        # no wasm heap natively
