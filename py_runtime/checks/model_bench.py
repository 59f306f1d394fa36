"""A whole model's speed: prefill and decode (greedy, or sampled on the GPU) of one Decoder (models/decoder.py), timed unprofiled,
then one profiled decode step (where the measured steps ended: their context) and one profiled prefill for
each kernel's share of the step.

  prefill_tok_s   prompt tokens / the prefill's wall time (submit to GPU done, waited), median of 3
  ttft_ms         the prefill submitted, then the readback of the first generated id (one round trip),
                  median of 3
  decode_tok_s    decode steps / their wall time: steps submitted back to back (no readback between
                  them), the generated ids read every `batch` steps and once at the end
  host_ms_per_token  host time of a decode step's calls (resize + replay's submit), GPU not waited on
  prefill_host_ms the prefill's host time, GPU not waited on: "call" (an unmeasured prefill of the same prompt,
                  its writes, re-sizing and submit), "submit" (its encoding and submitting), "resize" (the
                  plan from the decode step to the prompt's length, seen before: remembered), and
                  "resize_new_length" (to a length it has not seen: one layer's prefill dispatches sized)
  decode_span_us  GPU time of one decode step's single pass (two timestamps around it; median of 5, at the
                  context the measured steps reached),
                  where the adapter has timestamp queries: the step's GPU cost without the submits
  prefill_span_us the same for the prefill (median of 3): prefill_tok_s's wall time less this is the host's
                  and the round trips' share
  decode_floor_us the decode step's floor as a chain of dependent dispatches: each of its dispatches as a
                  streaming read of the bytes it moves, back to back in one pass over memory not in the
                  cache (kernel_bench.stream_chain_ns); decode_span_us against it is how far its kernels
                  are from reading their bytes at a streaming read's pace
  context         decode measured at a long context: after the prompt, unmeasured steps run until the
                  measured `decode` steps end at position `context`
  temperature, top_k, top_p  sampling on the GPU (ops/sample.py, seeded with `seed`); temperature 0 (the
                  default) or top_k 1 is greedy (argmax)
  position        where the sequence's position lives between decode steps: "gpu" (nothing re-sized per
                  step), "host" (the position's dispatches re-sized before each step), "auto" (the GPU
                  wherever the plan allows; the report's position_on_gpu says which ran)
Everything runs once first (pipelines compiled, the GPU's clocks up). Nothing here is checked: the
model suite (checks/model_run.py) and its oracle judge the same plan's outputs.
"""

from __future__ import annotations

import time

from ..models.config import model_config
from ..models.decoder import SUBMIT_STEPS, Decoder
from ..ops.sample import Sampling
from ..runtime import Runtime
from .kernel_bench import stream_chain_ns
from .model_run import prompt_ids
from .outcome import NOT_CHECKED, no_progress

__all__ = ["run_model_bench", "kernel_rows", "POSITIONS"]

POSITIONS = {"auto": None, "gpu": True, "host": False}
PREFILL_TRIALS = 3
PROFILED_STEPS = 6          # one profiled decode step, then five timed as single passes (decode_span_us)


def kernel_rows(execution, phase: str) -> list[dict]:
    """One row per kernel of a profiled step: dispatches, GPU ns, bytes moved, flops and share of the step."""
    by_kernel: dict[tuple[str, str], dict] = {}
    for row in execution.rows:
        entry = by_kernel.setdefault((row.kernel, row.route), {"phase": phase, "kernel": row.kernel,
                                                               "route": row.route, "dispatches": 0, "ns": 0,
                                                               "bytes": 0, "flops": 0})
        entry["dispatches"] += 1
        entry["ns"] += row.ns
        entry["bytes"] += row.bytes_moved
        entry["flops"] += row.flops
    total = sum(entry["ns"] for entry in by_kernel.values()) or 1
    rows = sorted(by_kernel.values(), key=lambda entry: -entry["ns"])
    for entry in rows:
        entry["share"] = entry["ns"] / total
    return rows


async def run_model_bench(runtime: Runtime, *, model: str = "llama", layers: int | None = None, prompt: int = 128,
                          decode: int = 64, policy: str = "f32", seed: int = 7, batch: int = 16,
                          profile: bool = True, context: int = 0, position: str = "auto", fuse_norm: bool = True,
                          attention: str = "auto", per_submit: int = 0, kv: str = "packed",
                          temperature: float = 0.0, top_k: int = 50, top_p: float = 1.0,
                          progress=no_progress) -> dict:
    config = model_config(model, layers)
    sampling = Sampling.or_greedy(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
    if position not in POSITIONS:
        raise ValueError(f"position {position!r}: one of {list(POSITIONS)}")
    if context and context < prompt + decode:
        raise ValueError(f"context {context} must hold the prompt ({prompt}) and the measured steps ({decode})")
    fill = context - prompt - decode if context else 0          # unmeasured steps before the measured ones
    ids = prompt_ids(config.vocab, seed, prompt)
    progress("model bench", 0, 4)
    started = time.perf_counter()
    # (PROFILED_STEPS more positions: the profiled decode steps run where the measured ones ended)
    decoder = await Decoder.create(runtime, config, seed=seed, max_prompt=prompt,
                                   capacity=prompt + fill + decode + PROFILED_STEPS,
                                   policy=policy, gpu_position=POSITIONS[position], fuse_norm=fuse_norm,
                                   attention=attention, kv=kv, sampling=sampling)
    try:
        build_s = time.perf_counter() - started
        progress("model bench", 1, 4)
        await decoder.generate(ids, min(decode, 4), batch=batch)            # warm-up
        progress("model bench", 2, 4)

        began = time.perf_counter_ns()
        unwaited = await decoder.prefill(ids, wait=False)
        prefill_host_ns = time.perf_counter_ns() - began
        await runtime.device.on_submitted_work_done()
        prefill_host = {"call": prefill_host_ns / 1e6, "submit": unwaited.host_ns / 1e6}
        for name, tokens in (("resize", prompt), ("resize_new_length", prompt - 1)):
            if tokens > 1:
                decoder.plan.resize(tokens=1, fed=0)
                began = time.perf_counter_ns()
                decoder.plan.resize(tokens=tokens, fed=tokens, pos=0)
                prefill_host[name] = (time.perf_counter_ns() - began) / 1e6

        prefill_runs, ttft_runs = [], []
        for _ in range(PREFILL_TRIALS):         # each starts the sequence again
            began = time.perf_counter()
            prefill = await decoder.prefill(ids, wait=False)
            await runtime.device.on_submitted_work_done()
            prefill_runs.append(time.perf_counter() - began)
            began = time.perf_counter()
            await decoder.prefill(ids, wait=False)
            generated = await decoder.tokens(prompt, prompt + 1)
            ttft_runs.append(time.perf_counter() - began)
        prefill_s, ttft_s = sorted(prefill_runs)[PREFILL_TRIALS // 2], sorted(ttft_runs)[PREFILL_TRIALS // 2]
        prefill_dispatches = decoder.plan.active_dispatches
        submits = per_submit or None
        generated += (await decoder.decode(fill, batch=batch, per_submit=submits)).ids   # read back as measured below
        began = time.perf_counter()
        run = await decoder.decode(decode, batch=batch, per_submit=submits)
        decode_s = time.perf_counter() - began
        generated += run.ids
        host_ns, decode_routes = run.host_ns, list(run.execution.routes) if run.execution else []
        decode_dispatches = decoder.plan.active_dispatches
        progress("model bench", 3, 4)

        kernels, quantized, decode_span_us, prefill_span_us, decode_floor_us = [], None, None, None, None
        if profile and "timestamp-query" in runtime.device.adapter.device_features:
            # the decode first, at the context the measured steps reached
            profiled_step = await decoder.step(profile=True)
            spans = sorted([(await decoder.step(profile="span")).span_ns for _ in range(PROFILED_STEPS - 1)])
            decode_span_us = spans[len(spans) // 2] / 1e3
            spans = sorted([(await decoder.prefill(ids, profile="span")).span_ns for _ in range(PREFILL_TRIALS)])
            prefill_span_us = spans[PREFILL_TRIALS // 2] / 1e3
            profiled = await decoder.prefill(ids, profile=True)
            kernels += kernel_rows(profiled, "prefill") + kernel_rows(profiled_step, "decode")
            decode_floor_us = await stream_chain_ns(runtime, [row.bytes_moved for row in profiled_step.rows],
                                                    PREFILL_TRIALS) / 1e3
            quantized = bool(profiled.quantized or profiled_step.quantized)
        progress("model bench", 4, 4)
        recorded, position_on_gpu, kv_f16_refused = len(decoder.plan), decoder.position_on_gpu, decoder.kv_f16_refused
    finally:
        decoder.release()
    return {
        "suite": "model_bench",
        "adapter": runtime.device.adapter.to_json(),
        "config": config.to_json(),
        "options": {"model": model, "layers": config.layers, "prompt": prompt, "decode": decode, "policy": policy,
                    "seed": seed, "batch": batch, "context": prompt + fill + decode, "position": position,
                    "fuse_norm": fuse_norm, "attention": attention, "per_submit": per_submit or SUBMIT_STEPS,
                    "kv": kv, "sampling": sampling.to_json() if sampling else None},
        "kv_f16_refused": kv_f16_refused,
        "position_on_gpu": position_on_gpu,
        "build_s": round(build_s, 3),
        "prefill_tok_s": prompt / prefill_s,
        "ttft_ms": 1000 * ttft_s,
        "decode_tok_s": decode / decode_s if decode else None,
        "host_ms_per_token": host_ns / 1e6 / decode if decode else None,
        "prefill_host_ms": prefill_host,
        "decode_span_us": decode_span_us,
        "prefill_span_us": prefill_span_us,
        "decode_floor_us": decode_floor_us,
        "dispatches": {"prefill": prefill_dispatches, "decode": decode_dispatches, "recorded": recorded},
        "routes": {"prefill": list(prefill.routes), "decode": decode_routes},
        "kernels": kernels,
        "timestamps_quantized": quantized,
        "generated": generated,
        "result": NOT_CHECKED,
    }
