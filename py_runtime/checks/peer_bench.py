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

__all__ = ["run_peer_bench", "PEERS", "FLAVOURS", "PEER_DEVICES", "peer_shares_device"]

PEERS = ("ort-web",)
# Where the peer runs: on our GPUDevice, on one of its own without the subgroups feature, or "auto": ours
# unless the adapter's subgroups are narrower than MIN_SUBGROUP. On SwiftShader (subgroups of 4) ORT-web's
# subgroup kernels gave prefill logits 1.25 sigma off transformers at a 128-token prompt (tiny, 2 layers;
# right at 16 tokens), and right ones on a device without subgroups.
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


def _medians(rounds: list[dict], prompt: int, decode: int) -> dict:
    prefill = statistics.median(r["prefill_s"] for r in rounds)
    decode_s = statistics.median(r["decode_s"] for r in rounds)
    return {"prefill_s": prefill, "decode_s": decode_s, "prefill_tok_s": prompt / prefill,
            "decode_tok_s": decode / decode_s if decode else None}


async def run_peer_bench(runtime: Runtime, *, peer: str = "ort-web", key: str = "", model: str = "llama",
                         layers: int | None = 2, prompt: int = 32, decode: int = 8, policy: str = "f32",
                         seed: int = 7, batch: int = 16, trials: int = 3, flavour: str = "jspi",
                         peer_device: str = "auto", checked: int | None = None, artifacts: bool = True, sink=None,
                         progress=no_progress) -> dict:
    if peer not in PEERS:
        raise ValueError(f"peer {peer!r}: one of {list(PEERS)}")
    if runtime.device.adapter.backend != "browser":
        raise ValueError("the peer engine (ONNX Runtime Web) runs in the page only: use --backend browser")
    config = model_config(model, layers)
    share_device = peer_shares_device(runtime.device.adapter, peer_device)
    if not key:
        raise ValueError("key: the peer build's folder under vendor/peer/ (`webgpu-llm-lab peer build` prints it)")
    folder = f"vendor/peer/{key}/"
    build = await _fetch_json(folder + "peer.json")
    wanted = {"model": config.key, "layers": config.layers, "seed": seed}
    found = {name: build.get(name) for name in wanted}
    if found != wanted:
        raise ValueError(f"peer build {key} is {found}, this run wants {wanted}")
    if prompt + decode > build["capacity"]:
        raise ValueError(f"prompt {prompt} + decode {decode} exceed the peer build's {build['capacity']} positions")
    ids = prompt_ids(config.vocab, seed, prompt)
    checked_steps = decode if checked is None else min(checked, decode)
    stages = 4 + 2 * trials
    progress("peer compare", 0, stages)
    device = runtime.device
    decoder = await Decoder.create(runtime, config, seed=seed, max_prompt=prompt, capacity=prompt + decode,
                                   policy=policy)
    engine = None
    try:
        progress("peer compare", 1, stages)
        engine = await device.create_peer(
            module_url="peer/ort_web.mjs", share_device=share_device,
            options={"ortUrl": f"vendor/ort/{flavour}/{_ENTRY[flavour]}", "modelUrl": folder + "model.onnx",
                     "dataUrl": folder + "model.onnx.data", "layers": config.layers, "kvHeads": config.kv_heads,
                     "headDim": config.head_dim, "vocab": config.vocab})
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
        "wall_s": None,
        "result": NOT_CHECKED,
    }
