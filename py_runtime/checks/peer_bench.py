"""Our engine beside a peer (ONNX Runtime Web on WebGPU) in one page: same model, weights, prompt ids, lengths.

The peer runs the peer build of our synthetic model (host/peer.py: the same Q4 levels and scales, made by
`webgpu-llm-lab peer build`), served under vendor/peer/<key>/; web/peer/ort_web.mjs drives it.

  checked   each engine once with its logits kept (the first `checked` decode steps, default all): ours the prefill's last row and each decode step's
            (as the model suite), the peer's the same rows; both go to the sink for the transformers oracle
            (`ours_logits_{i}.f32`, `peer_logits_{i}.f32`), and the report says whether the tokens agree
  timed     `trials` rounds after one warm-up of each, the engines alternating (which goes first alternates
            too); per engine and round:
              prefill_s  from the call until the first generated id is on the host (ours: the prefill
                         and the readback of its id; the peer: session.run over the prompt, its last
                         logits row read back, argmax)
              decode_s   from then until the last id is on the host (ours: steps submitted back to back,
                         ids read every `batch` steps; the peer: a session.run per step, each step's
                         logits row read back for its argmax, as its greedy loop needs)
            medians over the rounds, and ours / the peer's
Nothing is judged here: the host judges both engines' logits (host/oracle/model.py judge_logits).
"""

from __future__ import annotations

import statistics
import time

from ..models.config import model_config
from ..models.decoder import Decoder
from ..runtime import Runtime
from .model_run import prompt_ids
from .outcome import NOT_CHECKED, no_progress

__all__ = ["run_peer_bench", "compare_with_peer", "PEERS", "FLAVOURS", "PEER_DEVICES", "peer_shares_device"]

PEERS = ("ort-web",)
# Where the peer runs: on our GPUDevice, on one of its own without the subgroups feature, or "auto": ours
# unless the adapter's subgroups are narrower than MIN_SUBGROUP. On SwiftShader (subgroups of 4) ORT-web's
# GroupQueryAttention on our device (subgroups on) gave prefill logits 1.25 sigma off transformers at a
# 128-token prompt (tiny, 2 layers; right at 16 tokens); with its GQA nodes forced to ORT's CPU provider the
# rest (MatMulNBits on subgroups among it) was right, and so was everything on a device without subgroups.
PEER_DEVICES = ("auto", "shared", "own")
MIN_SUBGROUP = 8
FLAVOURS = ("asyncify", "jspi")         # ORT-web's wasm builds (web/vendor/ort/<flavour>/)
_ENTRY = {"asyncify": "ort.webgpu.mjs", "jspi": "ort.jspi.mjs"}


def peer_shares_device(adapter, peer_device: str) -> bool:
    if peer_device not in PEER_DEVICES:
        raise ValueError(f"peer_device {peer_device!r}: one of {list(PEER_DEVICES)}")
    if peer_device != "auto":
        return peer_device == "shared"
    narrowest = adapter.info.get("subgroupMinSize")
    return "subgroups" not in adapter.device_features or narrowest is None or narrowest >= MIN_SUBGROUP


async def _fetch_json(url: str) -> dict:
    import json

    from ..gpu.browser import fetch_bytes     # the page only: the peer runs in the browser
    return json.loads(await fetch_bytes(url))


async def _peer_build(config, seed: int, key: str | None) -> tuple[str, dict]:
    """The peer build's folder name and peer.json: `key`, or the build of this model, depth and seed that
    vendor/peer/index.json names (written by `webgpu-llm-lab peer build`)."""
    if not key:
        name = f"{config.key}-L{config.layers}-s{seed}"
        try:
            index = await _fetch_json("vendor/peer/index.json")
        except FileNotFoundError:
            index = {}
        if name not in index:
            raise ValueError(f"no peer build of {name} is served: run `webgpu-llm-lab peer build --model "
                             f"{config.key} --layers {config.layers} --seed {seed}`")
        key = index[name]
    build = await _fetch_json(f"vendor/peer/{key}/peer.json")
    wanted = {"model": config.key, "layers": config.layers, "seed": seed}
    found = {name: build.get(name) for name in wanted}
    if found != wanted:
        raise ValueError(f"peer build {key} is {found}, this run wants {wanted}")
    return key, build


async def _create_engine(device, config, key: str, flavour: str, share_device: bool):
    folder = f"vendor/peer/{key}/"
    return await device.create_peer(
        module_url="peer/ort_web.mjs", share_device=share_device,
        options={"ortUrl": f"vendor/ort/{flavour}/{_ENTRY[flavour]}", "modelUrl": folder + "model.onnx",
                 "dataUrl": folder + "model.onnx.data", "layers": config.layers, "kvHeads": config.kv_heads,
                 "headDim": config.head_dim, "vocab": config.vocab})


def _medians(rounds: list[dict], prompt: int, decode: int) -> dict:
    prefill = statistics.median(r["prefill_s"] for r in rounds)
    decode_s = statistics.median(r["decode_s"] for r in rounds)
    return {"prefill_s": prefill, "decode_s": decode_s, "prefill_tok_s": prompt / prefill,
            "decode_tok_s": decode / decode_s if decode else None}


async def run_peer_bench(runtime: Runtime, *, peer: str = "ort-web", key: str = "", model: str = "llama",
                         layers: int | None = None, prompt: int = 32, decode: int = 8, policy: str = "f32",
                         seed: int = 7, batch: int = 16, trials: int = 3, flavour: str = "jspi",
                         peer_device: str = "auto", checked: int | None = None, artifacts: bool = True, sink=None,
                         progress=no_progress) -> dict:
    if peer not in PEERS:
        raise ValueError(f"peer {peer!r}: one of {list(PEERS)}")
    if runtime.device.adapter.backend != "browser":
        raise ValueError("the peer engine (ONNX Runtime Web) runs in the page only: use --backend browser")
    config = model_config(model, layers)
    share_device = peer_shares_device(runtime.device.adapter, peer_device)
    key, build = await _peer_build(config, seed, key)
    if prompt + decode > build["capacity"]:
        raise ValueError(f"prompt {prompt} + decode {decode} exceed the peer build's {build['capacity']} positions")
    ids = prompt_ids(config.vocab, seed, prompt)
    started = time.perf_counter()
    checked_steps = decode if checked is None else min(checked, decode)
    stages = 4 + 2 * trials
    progress("peer compare", 0, stages)
    device = runtime.device
    decoder = await Decoder.create(runtime, config, seed=seed, max_prompt=prompt, capacity=prompt + decode,
                                   policy=policy)
    engine = None
    try:
        progress("peer compare", 1, stages)
        engine = await _create_engine(device, config, key, flavour, share_device)
        progress("peer compare", 2, stages)

        # checked: ours as the model suite runs it, the peer with its logits rows kept
        ours_logits = []
        await decoder.prefill(ids)
        ours_logits.append(await decoder.read_logits())
        for _ in range(checked_steps):
            await decoder.step(wait=True)
            ours_logits.append(await decoder.read_logits())
        ours_tokens = (await decoder.tokens())[prompt:]
        kept = await device.peer_generate(engine, ids, checked_steps, True)
        peer_tokens, peer_logits = kept["tokens"], kept["logits"]
        if sink is not None and artifacts:
            for index, data in enumerate(ours_logits):
                await sink(f"ours_logits_{index}.f32", data)
            for index, data in enumerate(peer_logits):
                await sink(f"peer_logits_{index}.f32", data)
        progress("peer compare", 3, stages)

        # timed: one warm-up each, then alternating rounds
        await decoder.generate(ids, decode, batch=batch)
        await device.peer_generate(engine, ids, decode, False)
        rounds = {"ours": [], "peer": []}
        done = 3
        for trial in range(trials):
            order = ("ours", "peer") if trial % 2 == 0 else ("peer", "ours")
            for who in order:
                if who == "ours":
                    run = await decoder.generate(ids, decode, batch=batch)
                    rounds["ours"].append({"prefill_s": run["prefill_s"], "decode_s": run["decode_s"],
                                           "tokens": run["ids"]})
                else:
                    run = await device.peer_generate(engine, ids, decode, False)
                    rounds["peer"].append({"prefill_s": run["prefill_ms"] / 1e3, "decode_s": run["decode_ms"] / 1e3,
                                           "tokens": run["tokens"]})
                done += 1
                progress("peer compare", done, stages)
        peer_info = device.peer_info(engine)
    finally:
        if engine is not None:
            await device.release_peer(engine)
        decoder.release()
    ours, theirs = _medians(rounds["ours"], prompt, decode), _medians(rounds["peer"], prompt, decode)
    ratio = {"prefill": ours["prefill_tok_s"] / theirs["prefill_tok_s"],
             "decode": ours["decode_tok_s"] / theirs["decode_tok_s"] if decode else None}
    agree = sum(1 for a, b in zip(ours_tokens, peer_tokens) if a == b)
    progress("peer compare", stages, stages)
    return {
        "suite": "peer_bench",
        "adapter": runtime.device.adapter.to_json(),
        "config": config.to_json(),
        "options": {"peer": peer, "key": key, "model": config.key, "layers": config.layers, "prompt": prompt,
                    "decode": decode, "policy": policy, "seed": seed, "batch": batch, "trials": trials,
                    "flavour": flavour, "peer_device": peer_device, "share_device": share_device,
                    "checked": checked_steps},
        "prompt_ids": ids,
        "peer_build": build,
        "peer_info": peer_info,
        "engines": {
            "ours": {**ours, "tokens": ours_tokens,
                     "logits_artifacts": [f"ours_logits_{i}.f32" for i in range(len(ours_logits))],
                     "rounds": [{k: r[k] for k in ("prefill_s", "decode_s")} for r in rounds["ours"]],
                     "timed_tokens_agree": all(r["tokens"][:len(ours_tokens)] == ours_tokens for r in rounds["ours"])},
            "peer": {**theirs, "tokens": peer_tokens,
                     "logits_artifacts": [f"peer_logits_{i}.f32" for i in range(len(peer_logits))],
                     "rounds": [{k: r[k] for k in ("prefill_s", "decode_s")} for r in rounds["peer"]],
                     "timed_tokens_agree": all(r["tokens"][:len(peer_tokens)] == peer_tokens
                                               for r in rounds["peer"])},
        },
        "ratio": ratio,
        "tokens_agree": {"same": agree, "of": len(ours_tokens)},
        "measured": "wall clock until the ids are on the host; medians of alternating rounds",
        "wall_s": round(time.perf_counter() - started, 3),
        "result": NOT_CHECKED,
    }


async def compare_with_peer(runtime: Runtime, options: dict, choice: dict, sink, progress) -> dict:
    """The page's compare view with side b the peer (b=ort-web): side a is ours as the view runs it
    (checks/generate.py), side b ONNX Runtime Web on the same prompt ids; rounds alternate; the oracle judges
    both sides' logits at the prompt's last position and the last step (the peer with the int8x tolerance)."""
    from .generate import (_build, _kernel_deltas, _median, _oracle_run, _profiled, _setting_name, _summary,
                           _timed_pass, _warm_up)

    config = model_config(options["model"], options["layers"])
    prompt = prompt_ids(config.vocab, options["seed"], options["prompt"])
    decode, rounds = options["decode"], options["rounds"]
    key, build = await _peer_build(config, options["seed"], options.get("peer_key"))
    setting = {"policy": options["a"], "position": options["a_position"], "attention": options["a_attention"],
               "fused": options["a_fused"], "kv": options["a_kv"]}
    share_device = peer_shares_device(runtime.device.adapter, options.get("peer_device", "auto"))
    started = time.perf_counter()
    decoder = await _build(runtime, config, options, setting, progress)
    engine = None
    try:
        await _warm_up(decoder, prompt, decode, progress)
        progress("peer", 0, 1)
        engine = await _create_engine(runtime.device, config, key, options.get("flavour", "jspi"), share_device)
        await runtime.device.peer_generate(engine, prompt, min(decode, 2), False)
        progress("peer", 1, 1)
        build_s = time.perf_counter() - started
        ours, theirs = [], []
        for index in range(rounds):
            progress("rounds", index, rounds)
            ours.append(await _timed_pass(decoder, prompt, decode, options["batch"], progress))
            run = await runtime.device.peer_generate(engine, prompt, decode, [0, decode])
            theirs.append({"prefill_tok_s": len(prompt) / (run["prefill_ms"] / 1e3), "ttft_ms": run["prefill_ms"],
                           "decode_tok_s": decode / (run["decode_ms"] / 1e3), "tokens": run["tokens"],
                           "logits": dict(zip(sorted({0, decode}), run["logits"]))})
        progress("rounds", rounds, rounds)
        kernels, unprofiled = [], "profile=0"
        if options["profile"]:
            kernels, _, unprofiled = await _profiled(decoder, prompt, runtime)
        position_on_gpu, peer_info = decoder.position_on_gpu, runtime.device.peer_info(engine)
        kv_f16_refused = decoder.kv_f16_refused
    finally:
        if engine is not None:
            await runtime.device.release_peer(engine)
        decoder.release()
    last_a, last_b = ours[-1], theirs[-1]
    runs = [_oracle_run("a", config, options, setting["policy"], prompt, last_a),
            _oracle_run("b", config, options, "int8x", prompt, last_b)]
    if sink is not None:
        for run, timed in zip(runs, (last_a, last_b)):
            for step, data in timed["logits"].items():
                await sink(run["logits"][str(step)], data)
    peer_name = f"{options['b']} (ONNX Runtime Web {peer_info.get('ortVersion') or ''}, {options.get('flavour', 'jspi')})"
    sides = {
        "a": {**setting, "setting": _setting_name(setting, kv_f16_refused), "position_on_gpu": position_on_gpu,
              "kv_f16_refused": kv_f16_refused, **_summary(last_a),
              "prefill_tok_s": _median([p["prefill_tok_s"] for p in ours]),
              "ttft_ms": _median([p["ttft_ms"] for p in ours]),
              "decode_tok_s": _median([p["decode_tok_s"] for p in ours]),
              "rounds_decode_tok_s": [p["decode_tok_s"] for p in ours],
              "tokens_repeat": all(p["tokens"] == last_a["tokens"] for p in ours), "kernels": kernels},
        "b": {"policy": options["b"], "position": "host", "setting": peer_name, "engine": options["b"],
              "position_on_gpu": False, "tokens": last_b["tokens"], "routes": {"prefill": [], "decode": []},
              "host_ms_per_token": None,
              # the peer's prefill is timed to its first id on the host (its time to first token)
              "prefill_tok_s": _median([p["prefill_tok_s"] for p in theirs]),
              "ttft_ms": _median([p["ttft_ms"] for p in theirs]),
              "decode_tok_s": _median([p["decode_tok_s"] for p in theirs]),
              "rounds_decode_tok_s": [p["decode_tok_s"] for p in theirs],
              "tokens_repeat": all(p["tokens"] == last_b["tokens"] for p in theirs), "kernels": [],
              "share_device": share_device, "peer_build": build},
    }
    a, b = sides["a"]["tokens"], sides["b"]["tokens"]
    agree = sum(x == y for x, y in zip(a, b))
    first_difference = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    return {
        "suite": "compare",
        "adapter": runtime.device.adapter.to_json(),
        "config": config.to_json(),
        "options": options,
        "choice": choice,
        "prompt_ids": prompt,
        "sides": sides,
        "peer": {"engine": options["b"], "key": key, "share_device": share_device, "info": peer_info},
        "tokens_agree": {"same": agree, "of": len(a), "first_difference": first_difference},
        "routes_differ": {phase: {"only_a": sorted(set(sides["a"]["routes"][phase])), "only_b": []}
                          for phase in ("prefill", "decode")},
        "kernel_deltas": _kernel_deltas(kernels, []),
        "unprofiled": unprofiled if not kernels else None,
        "build_s": round(build_s, 3),
        "wall_s": round(time.perf_counter() - started, 3),
        "oracle_runs": runs if options["oracle"] else [],
        "oracle": {"verdict": "pending" if options["oracle"] else NOT_CHECKED,
                   "reason": None if options["oracle"] else "oracle=0"},
        "result": NOT_CHECKED,
    }
