"""A long greedy decode, for reliability: the same sequence twice, memory before and after, the end
of the context refused.

  warm-up   one short generate (pipelines compiled, first readbacks)
  run 1, 2  prefill, then `steps` greedy decode steps, the ids read every `batch` steps
  the end   one step past the KV cache, which must be refused before anything is dispatched

Passes when both runs chose the same tokens bit for bit, the context's end was refused (ContextFull),
the GPU buffers we hold (every live tensor and the params pages: WebGPU has no device-memory query)
are the same bytes after as before, and the host heap (the page's JS heap, or the native process's
resident set) grew by at most HEAP_GROWTH_BOUND over both runs: a leak of 1 KiB per step fails it at
10,000 steps.
"""

from __future__ import annotations

import time

from ..models.config import model_config
from ..models.decoder import ContextFull, Decoder
from ..runtime import Runtime
from .model_run import prompt_ids
from .outcome import FAILED, PASSED, no_progress

__all__ = ["run_model_soak", "HEAP_GROWTH_BOUND"]

HEAP_GROWTH_BOUND = 8 << 20


def _gpu_bytes(runtime: Runtime) -> int:
    return runtime.tensors.allocated_bytes + runtime.params.page_size * len(runtime.params.pages)


async def run_model_soak(runtime: Runtime, *, model: str = "tiny", layers: int | None = None, prompt: int = 16,
                         steps: int = 10000, policy: str = "int8x", seed: int = 7, batch: int = 256,
                         progress=no_progress) -> dict:
    config = model_config(model, layers)
    ids = prompt_ids(config.vocab, seed, prompt)
    started = time.perf_counter()
    decoder = await Decoder.create(runtime, config, seed=seed, max_prompt=prompt, capacity=prompt + steps,
                                   policy=policy)
    try:
        await decoder.generate(ids, min(steps, batch), batch=batch)
        before = {"gpu_bytes": _gpu_bytes(runtime), "host_heap_bytes": runtime.device.host_heap_bytes()}
        runs = []
        for run in (1, 2):
            began = time.perf_counter()
            sequence = await decoder.generate(ids, steps, batch=batch,
                                              on_batch=lambda done, _, run=run: progress(f"run {run}", done, steps))
            runs.append({"tokens": sequence["ids"], "decode_s": round(time.perf_counter() - began, 3)})
        after = {"gpu_bytes": _gpu_bytes(runtime), "host_heap_bytes": runtime.device.host_heap_bytes()}
        try:
            await decoder.step()
            refused = None
        except ContextFull as error:
            refused = str(error)
        position_on_gpu = decoder.position_on_gpu
    finally:
        decoder.release()
    heap_growth = (after["host_heap_bytes"] - before["host_heap_bytes"]
                   if None not in (after["host_heap_bytes"], before["host_heap_bytes"]) else None)
    identical = runs[0]["tokens"] == runs[1]["tokens"] and len(runs[0]["tokens"]) == steps + 1
    problems = [what for what, bad in (
        ("the two runs chose different tokens", not identical),
        ("a step past the KV cache was not refused", refused is None),
        (f"the GPU buffers grew from {before['gpu_bytes']:,} to {after['gpu_bytes']:,} bytes",
         after["gpu_bytes"] != before["gpu_bytes"]),
        (f"the host heap grew by {heap_growth:,} bytes (bound {HEAP_GROWTH_BOUND:,})",
         heap_growth is not None and heap_growth > HEAP_GROWTH_BOUND)) if bad]
    return {
        "suite": "model_soak",
        "adapter": runtime.device.adapter.to_json(),
        "config": config.to_json(),
        "options": {"model": model, "layers": config.layers, "prompt": prompt, "steps": steps, "policy": policy,
                    "seed": seed, "batch": batch},
        "position_on_gpu": position_on_gpu,
        "runs": [{"decode_s": r["decode_s"], "decode_tok_s": steps / r["decode_s"] if r["decode_s"] else None,
                  "distinct_tokens": len(set(r["tokens"]))} for r in runs],
        "tokens_identical": identical,
        "memory": {"before": before, "after": after, "host_heap_growth": heap_growth,
                   "host_heap_bound": HEAP_GROWTH_BOUND},
        "context_end_refused": refused,
        "problems": problems,
        "wall_s": round(time.perf_counter() - started, 3),
        "result": FAILED if problems else PASSED,
    }
