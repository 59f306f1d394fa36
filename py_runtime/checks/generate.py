"""The page's model views: one model generating (`generate`), or two settings alternating (`compare`).

A run: Decoder.create (pipelines per layer, then the weights generated on the GPU), a short warm-up,
then the timed pass:
  prefill_tok_s   prompt tokens / the prefill's wall time (submitted, waited)
  ttft_ms         the prefill plus the readback of the first generated id
  decode_tok_s    decode steps / their wall time: steps submitted back to back, the ids read every
                  `batch` steps (each readback reports the tokens so far and the live tok/s)
then, with `profile`, one profiled prefill and decode step for each kernel's share of the step.

Nothing is judged here: the prefill's logits and the last step's are handed to the sink with the
prompt and every generated token, and the page asks the dev server's transformers oracle
(host/oracle/model.py verify_generation) to judge them; without an oracle the run stays "not checked".

Sizes: `size=auto` takes `small` on a CPU adapter (SwiftShader, lavapipe: a tiny model that finishes in
seconds) and `full` on a GPU (Llama-3.2-1B at full depth); any option given explicitly wins.
"""

from __future__ import annotations

import time
from dataclasses import replace

from ..gpu.device import adapter_name, software_adapter
from ..models.config import model_config
from ..models.decoder import POLICIES, Decoder
from .model_bench import POSITIONS, kernel_rows
from .model_run import prompt_ids
from .outcome import NOT_CHECKED, no_progress

__all__ = ["SIZES", "COMPARE_SIZES", "software_adapter", "resolve_size", "run_generate", "run_compare"]

SIZES = {
    "small": {"model": "tiny", "layers": 2, "prompt": 32, "decode": 32, "policy": "int8x"},
    "full": {"model": "llama", "layers": None, "prompt": 128, "decode": 64, "policy": "int8x"},
}
COMPARE_SIZES = {
    "small": {"model": "tiny", "layers": 2, "prompt": 16, "decode": 8},
    "full": {"model": "llama", "layers": None, "prompt": 128, "decode": 64},
}
WARMUP_STEPS = 2


def resolve_size(options: dict, info: dict, sizes: dict) -> tuple[dict, dict]:
    """(the options with every None filled from the size, what was chosen and why)."""
    size, why = options["size"], "asked for in the options"
    if size == "auto":
        software = software_adapter(info)
        size = "small" if software else "full"
        why = (f"{software}: a small model that finishes in seconds there (size=full for the real geometry)"
               if software else f"{adapter_name(info)} is a GPU: the real geometry at full depth (size=small "
                                f"for the tiny model)")
    filled = dict(options)
    auto = [name for name, value in sizes[size].items() if options.get(name) is None]
    for name in auto:
        filled[name] = sizes[size][name]
    return filled, {"size": size, "why": why, "filled": auto}


def _prefixed(progress, prefix: str):
    if not prefix:
        return progress

    def relay(stage, done, total, detail=None):
        if detail is None:
            progress(f"{prefix} {stage}", done, total)
        else:
            progress(f"{prefix} {stage}", done, total, detail)
    return relay


async def _timed_pass(decoder: Decoder, prompt: list[int], decode: int, batch: int, progress) -> dict:
    """Prefill, then `decode` greedy steps back to back; tokens read every `batch` steps."""
    s = len(prompt)
    progress("prefill", 0, 1)
    began = time.perf_counter()
    prefill = await decoder.prefill(prompt, wait=False)
    await decoder.runtime.device.on_submitted_work_done()
    prefill_s = time.perf_counter() - began
    generated = await decoder.tokens(s, s + 1)
    ttft_s = time.perf_counter() - began
    progress("prefill", 1, 1, {"text": f"{s} tokens, {s / prefill_s:.1f} tok/s, first token after "
                                       f"{1000 * ttft_s:.0f} ms", "tokens": list(generated)})
    prefill_logits = await decoder.read_logits()
    began = time.perf_counter()

    def on_batch(done, ids):
        elapsed = time.perf_counter() - began
        progress("decode", done, decode, {"text": f"{done} tokens, {done / elapsed:.1f} tok/s",
                                          "tokens": generated + ids})

    run = await decoder.decode(decode, batch=batch, on_batch=on_batch)
    decode_s = time.perf_counter() - began
    generated += run.ids
    decode_routes, host_ns = list(run.execution.routes) if run.execution else [], run.host_ns
    last_logits = await decoder.read_logits() if decode else prefill_logits
    return {"prefill_tok_s": s / prefill_s, "ttft_ms": 1000 * ttft_s,
            "decode_tok_s": decode / decode_s if decode else None,
            "host_ms_per_token": host_ns / 1e6 / decode if decode else None,
            "tokens": generated, "routes": {"prefill": list(prefill.routes), "decode": decode_routes},
            "logits": {0: prefill_logits, decode: last_logits}}


async def _profiled(decoder: Decoder, prompt: list[int], runtime) -> tuple[list[dict], bool | None, str | None]:
    """Per-kernel rows of one profiled prefill and decode step, or why there are none."""
    if "timestamp-query" not in runtime.device.adapter.device_features:
        return [], None, "the device has no timestamp-query"
    prefill = await decoder.prefill(prompt, profile=True)
    step = await decoder.step(profile=True)
    return (kernel_rows(prefill, "prefill") + kernel_rows(step, "decode"),
            bool(prefill.quantized or step.quantized), None)


async def _build(runtime, config, options: dict, setting: dict, progress) -> Decoder:
    capacity = options["prompt"] + max(options["decode"], WARMUP_STEPS)
    return await Decoder.create(runtime, config, seed=options["seed"], max_prompt=options["prompt"],
                                capacity=capacity, policy=setting["policy"],
                                gpu_position=POSITIONS[setting["position"]], attention=setting["attention"],
                                fused=setting["fused"], kv=setting["kv"], progress=progress)


def _setting_name(setting: dict, kv_f16_refused: str | None) -> str:
    """A side's name on the page: its policy, and the route choices that differ from the defaults (the KV
    cache's as it ran: `kv_f16_refused`, the decoder's, says where f16 was asked for and not given)."""
    return setting["policy"] + ("" if setting["position"] == "auto" else f", position on the {setting['position']}") \
        + ("" if setting["attention"] == "auto" else f", {setting['attention']} attention") \
        + ("" if setting["fused"] else ", nothing fused") \
        + ("" if setting["kv"] != "f16" else ", KV packed (no shader-f16)" if kv_f16_refused
           else ", KV in shader-f16 types")


async def _warm_up(decoder: Decoder, prompt: list[int], steps: int, progress) -> None:
    progress("warm-up", 0, 1)
    await decoder.generate(prompt, min(steps, WARMUP_STEPS), batch=WARMUP_STEPS)
    progress("warm-up", 1, 1)


def _oracle_run(label: str, config, options: dict, policy: str, prompt: list[int], timed: dict) -> dict:
    """What the oracle needs to judge one pass (its logits are artifacts named here)."""
    return {"label": label, "model": options["model"], "layers": config.layers, "seed": options["seed"],
            "policy": policy, "prompt_ids": prompt, "tokens": timed["tokens"],
            "logits": {str(step): f"{label}_logits_{step}.f32" for step in timed["logits"]}}


async def _hand_over(sink, run: dict, timed: dict) -> None:
    if sink is None:
        return
    for step, data in timed["logits"].items():
        await sink(run["logits"][str(step)], data)


def _summary(timed: dict) -> dict:
    return {key: timed[key] for key in ("prefill_tok_s", "ttft_ms", "decode_tok_s", "host_ms_per_token", "tokens",
                                        "routes")}


async def run_generate(runtime, options: dict, sink=None, progress=no_progress) -> dict:
    """The `generate` view: one model, timed, profiled, its logits handed over for the oracle."""
    adapter = runtime.device.adapter
    options, choice = resolve_size(options, adapter.info, SIZES)
    config = model_config(options["model"], options["layers"])
    options["layers"] = config.layers
    prompt = prompt_ids(config.vocab, options["seed"], options["prompt"])
    started = time.perf_counter()
    setting = {key: options[key] for key in ("policy", "position", "attention", "fused", "kv")}
    decoder = await _build(runtime, config, options, setting, progress)
    try:
        build_s = time.perf_counter() - started
        await _warm_up(decoder, prompt, options["decode"], progress)
        timed = await _timed_pass(decoder, prompt, options["decode"], options["batch"], progress)
        kernels, quantized, unprofiled = [], None, "profile=0"
        if options["profile"]:
            progress("profile", 0, 1)
            kernels, quantized, unprofiled = await _profiled(decoder, prompt, runtime)
            progress("profile", 1, 1)
        dispatches, position_on_gpu, kv_f16_refused = len(decoder.plan), decoder.position_on_gpu, decoder.kv_f16_refused
    finally:
        decoder.release()
    run = _oracle_run("generate", config, options, options["policy"], prompt, timed)
    await _hand_over(sink, run, timed)
    return {
        "suite": "generate",
        "adapter": adapter.to_json(),
        "config": config.to_json(),
        "options": options,
        "choice": choice,
        "prompt_ids": prompt,
        **_summary(timed),
        "kernels": kernels,
        "unprofiled": unprofiled if not kernels else None,
        "timestamps_quantized": quantized,
        "dispatches_recorded": dispatches,
        "position_on_gpu": position_on_gpu,
        "kv_f16_refused": kv_f16_refused,
        "build_s": round(build_s, 3),
        "wall_s": round(time.perf_counter() - started, 3),
        "oracle_runs": [run] if options["oracle"] else [],
        "oracle": {"verdict": "pending" if options["oracle"] else NOT_CHECKED,
                   "reason": None if options["oracle"] else "oracle=0"},
        "result": NOT_CHECKED,
    }


def _median(values: list[float | None]) -> float | None:
    present = sorted(v for v in values if v is not None)
    return present[len(present) // 2] if present else None


def _kernel_deltas(a: list[dict], b: list[dict]) -> list[dict]:
    """One row per (phase, kernel) of either side: GPU µs of each and the change from a to b."""
    def by_kernel(rows):
        out: dict = {}
        for row in rows:
            entry = out.setdefault((row["phase"], row["kernel"]), {"ns": 0, "route": row["route"]})
            entry["ns"] += row["ns"]
        return out
    left, right = by_kernel(a), by_kernel(b)
    rows = []
    for key in sorted(set(left) | set(right), key=lambda k: (k[0] != "prefill", -max(left.get(k, {"ns": 0})["ns"],
                                                                                      right.get(k, {"ns": 0})["ns"]))):
        a_us = left[key]["ns"] / 1e3 if key in left else None
        b_us = right[key]["ns"] / 1e3 if key in right else None
        rows.append({"phase": key[0], "kernel": key[1], "a_route": left.get(key, {}).get("route"),
                     "b_route": right.get(key, {}).get("route"), "a_us": a_us, "b_us": b_us,
                     "delta_us": None if a_us is None or b_us is None else b_us - a_us})
    return rows


async def run_compare(runtime, options: dict, sink=None, progress=no_progress) -> dict:
    """The `compare` view: settings a and b (an activation policy, and where the position lives) of one model,
    both resident, their timed passes alternating round by round; tok/s are each side's median over the rounds."""
    adapter = runtime.device.adapter
    options, choice = resolve_size(options, adapter.info, COMPARE_SIZES)
    base = model_config(options["model"], options["layers"])
    options["layers"] = base.layers
    if options["b"] not in POLICIES:         # a peer engine (ONNX Runtime Web) as side b
        from .peer_bench import compare_with_peer
        return await compare_with_peer(runtime, options, choice, sink, progress)
    prompt = prompt_ids(base.vocab, options["seed"], options["prompt"])
    sides = {label: {"policy": options[label], "position": options[f"{label}_position"],
                     "attention": options[f"{label}_attention"], "fused": options[f"{label}_fused"],
                     "kv": options[f"{label}_kv"]}
             for label in ("a", "b")}
    started = time.perf_counter()
    decoders: dict[str, Decoder] = {}
    try:
        for label, setting in sides.items():
            # each side its own resident copy: the tensors are named apart by the config's key
            config = replace(base, key=f"{base.key}.{label}")
            decoders[label] = await _build(runtime, config, options, setting, _prefixed(progress, label))
            await _warm_up(decoders[label], prompt, options["decode"], _prefixed(progress, label))
        build_s = time.perf_counter() - started
        passes: dict[str, list[dict]] = {label: [] for label in sides}
        for round_index in range(options["rounds"]):
            progress("rounds", round_index, options["rounds"])
            for label in sides:
                passes[label].append(await _timed_pass(decoders[label], prompt, options["decode"], options["batch"],
                                                       _prefixed(progress, label)))
        progress("rounds", options["rounds"], options["rounds"])
        on_gpu = {label: decoder.position_on_gpu for label, decoder in decoders.items()}
        refused = {label: decoder.kv_f16_refused for label, decoder in decoders.items()}
        kernels = {label: [] for label in sides}
        unprofiled = "profile=0"
        if options["profile"]:
            for label in sides:
                kernels[label], _, unprofiled = await _profiled(decoders[label], prompt, runtime)
    finally:
        for decoder in decoders.values():
            decoder.release()
    result_sides, runs = {}, []
    for label, setting in sides.items():
        last = passes[label][-1]
        run = _oracle_run(label, base, options, setting["policy"], prompt, last)
        await _hand_over(sink, run, last)
        runs.append(run)
        result_sides[label] = {
            **setting, "setting": _setting_name(setting, refused[label]), "position_on_gpu": on_gpu[label],
            "kv_f16_refused": refused[label], **_summary(last),
            "prefill_tok_s": _median([p["prefill_tok_s"] for p in passes[label]]),
            "ttft_ms": _median([p["ttft_ms"] for p in passes[label]]),
            "decode_tok_s": _median([p["decode_tok_s"] for p in passes[label]]),
            "rounds_decode_tok_s": [p["decode_tok_s"] for p in passes[label]],
            "tokens_repeat": all(p["tokens"] == last["tokens"] for p in passes[label]),
            "kernels": kernels[label],
        }
    a, b = result_sides["a"]["tokens"], result_sides["b"]["tokens"]
    agree = sum(x == y for x, y in zip(a, b))
    first_difference = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    ran = {label: {phase: set(side["routes"][phase]) for phase in ("prefill", "decode")}
           for label, side in result_sides.items()}
    routes = {phase: {"only_a": sorted(ran["a"][phase] - ran["b"][phase]),
                      "only_b": sorted(ran["b"][phase] - ran["a"][phase])} for phase in ("prefill", "decode")}
    return {
        "suite": "compare",
        "adapter": adapter.to_json(),
        "config": base.to_json(),
        "options": options,
        "choice": choice,
        "prompt_ids": prompt,
        "sides": result_sides,
        "tokens_agree": {"same": agree, "of": len(a), "first_difference": first_difference},
        "routes_differ": routes,
        "kernel_deltas": _kernel_deltas(result_sides["a"]["kernels"], result_sides["b"]["kernels"]),
        "unprofiled": unprofiled if not result_sides["a"]["kernels"] else None,
        "build_s": round(build_s, 3),
        "wall_s": round(time.perf_counter() - started, 3),
        "oracle_runs": runs if options["oracle"] else [],
        "oracle": {"verdict": "pending" if options["oracle"] else NOT_CHECKED,
                   "reason": None if options["oracle"] else "oracle=0"},
        "result": NOT_CHECKED,
    }
