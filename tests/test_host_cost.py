"""The host-cost benchmark's correctness half: replayed output is bit-identical to naive encoding.
(Its speed figures are printed by `webgpu-llm-lab bench host`, not asserted.)"""

from __future__ import annotations

import asyncio

from py_runtime.app import run


def test_replay_matches_naive_encoding_bit_for_bit_natively():
    report = asyncio.run(run("native", {"suite": "host_cost", "dispatches": 23, "steps": 2}))
    assert report["bit_identical"] is True
    assert report["naive"]["host_us_per_dispatch"] > 0 and report["replay"]["host_us_per_dispatch"] > 0
