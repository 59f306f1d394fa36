"""The soak check (checks/model_soak.py) natively at CI size: two identical runs, the GPU buffers and the
process's heap flat, the context's end refused; and proof that it fails on a growing heap."""

from __future__ import annotations

import asyncio

from py_runtime.checks.model_soak import HEAP_GROWTH_BOUND, run_model_soak
from py_runtime.runtime import Runtime

OPTIONS = {"model": "tiny", "layers": 1, "prompt": 8, "steps": 48, "batch": 16}


def test_a_long_decode_repeats_its_tokens_with_flat_memory_and_refuses_the_context_end():
    async def main():
        return await run_model_soak(await Runtime.create("native"), **OPTIONS)

    report = asyncio.run(main())
    assert report["result"] == "passed", report["problems"]
    assert report["tokens_identical"] and report["runs"][0]["distinct_tokens"] > 1
    assert report["memory"]["before"]["gpu_bytes"] == report["memory"]["after"]["gpu_bytes"] > 0
    assert "do not fit the 56-position KV cache" in report["context_end_refused"]


def test_a_growing_heap_fails_the_soak():
    async def main():
        runtime = await Runtime.create("native")
        heaps = iter([100 << 20, (100 << 20) + HEAP_GROWTH_BOUND + 1])
        runtime.device.host_heap_bytes = lambda: next(heaps)
        return await run_model_soak(runtime, **OPTIONS)

    report = asyncio.run(main())
    assert report["result"] == "failed"
    assert report["problems"] == [f"the host heap grew by {HEAP_GROWTH_BOUND + 1:,} bytes (bound {HEAP_GROWTH_BOUND:,})"]
