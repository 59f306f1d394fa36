"""A whole model's prefill and greedy decode, run identically in the page and natively, for the
transformers oracle (host/oracle/model.py) to judge.

One Decoder (models/decoder.py) with synthetic weights runs a seeded prompt twice:
  checked  the prefill and each decode step waited on, the step's logits handed to the sink
           (`logits_{i}.f32`: i = 0 the prefill's last position, i = 1.. the decode steps)
  free     the same prompt again, decode steps submitted back to back with no readback, the
           generated ids read back in batches at the end
In the runtime it checks that both passes chose the same tokens (the greedy loop is deterministic
and needs no host help); the oracle checks every logit and token against HF transformers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..models.config import MODELS, model_config
from ..models.decoder import ATTENTION, KV_SPELLINGS, POLICIES, Decoder
from ..ops.synth import synth_hash
from ..runtime import Runtime
from .outcome import FAILED, NOT_CHECKED, no_progress

__all__ = ["ModelRunOptions", "MODEL_KEYS", "POLICIES", "ATTENTION", "KV_SPELLINGS", "prompt_ids", "run_model_check"]

MODEL_KEYS = tuple(MODELS)
PROMPT_STREAM = 77


@dataclass(frozen=True, kw_only=True)
class ModelRunOptions:
    model: str = "llama"
    layers: int = 2
    prompt: int = 32            # prompt tokens
    decode: int = 8             # greedy decode steps after the prefill
    policy: str = "f32"
    seed: int = 7
    batch: int = 4              # generated ids read back every `batch` steps in the free pass
    attention: str = "auto"     # models/decoder.py ATTENTION
    fused: bool = True          # the fused QKV and gate/up + SwiGLU routes where they apply
    fuse_norm: bool = True      # int8x: the decode norms inside the GEMVs that read them where they apply
    kv: str = "packed"          # models/decoder.py KV_SPELLINGS
    artifacts: bool = True


def prompt_ids(vocab: int, seed: int, length: int) -> list[int]:
    """A seeded prompt of ids in the vocabulary."""
    return [synth_hash(seed, PROMPT_STREAM, i) % vocab for i in range(length)]


async def run_model_check(runtime: Runtime, options: ModelRunOptions, sink=None, progress=no_progress) -> dict:
    config = model_config(options.model, options.layers)
    prompt = prompt_ids(config.vocab, options.seed, options.prompt)
    stages = 2 + options.decode
    progress("model", 0, stages)
    started = time.perf_counter()
    decoder = await Decoder.create(runtime, config, seed=options.seed, max_prompt=options.prompt,
                                   capacity=options.prompt + options.decode, policy=options.policy,
                                   attention=options.attention, fused=options.fused,
                                   fuse_norm=options.fuse_norm, kv=options.kv)
    try:
        build_s = time.perf_counter() - started
        progress("model", 1, stages)
        steps, logits = [], []
        execution = await decoder.prefill(prompt)
        steps.append({"tokens": len(prompt), "pos": 0, "routes": list(execution.routes),
                      "attention_conflicts": execution.attention_conflicts})
        logits.append(await decoder.read_logits())
        for index in range(options.decode):
            pos = decoder.position
            execution = await decoder.step(wait=True)
            steps.append({"tokens": 1, "pos": pos, "routes": list(execution.routes),
                          "attention_conflicts": execution.attention_conflicts})
            logits.append(await decoder.read_logits())
            progress("model", 2 + index, stages)
        checked = (await decoder.tokens())[len(prompt):]
        free = await decoder.generate(prompt, options.decode, batch=options.batch)
        progress("model", stages, stages)
        if sink and options.artifacts:
            for index, data in enumerate(logits):
                await sink(f"logits_{index}.f32", data)
        decisions = [decision.to_json() for op in decoder.ops for decision in op.decisions]
        # (the plan is at a decode step's sizes after the free-running pass, unless it made none)
        dispatches = {"recorded": len(decoder.plan), "decode_step": decoder.plan.active_dispatches
                      if options.decode else None}
    finally:
        decoder.release()
    return {
        "suite": "model",
        "adapter": runtime.device.adapter.to_json(),
        "config": config.to_json(),
        "options": {"model": options.model, "layers": options.layers, "prompt": options.prompt,
                    "decode": options.decode, "policy": options.policy, "seed": options.seed, "batch": options.batch,
                    "attention": options.attention, "fused": options.fused,
                    "fuse_norm": options.fuse_norm, "kv": options.kv},
        "kv_f16_refused": decoder.kv_f16_refused,
        "prompt_ids": prompt,
        "tokens": checked,                  # one per logits artifact: the greedy token each step chose
        "free_tokens": free["ids"],
        "steps": steps,
        "position_on_gpu": decoder.position_on_gpu,
        "decisions": decisions,
        "dispatches": dispatches,
        "logits_artifacts": [f"logits_{i}.f32" for i in range(len(logits))],
        "build_s": round(build_s, 3),
        "free_prefill_s": round(free["prefill_s"], 4),
        "free_decode_s": round(free["decode_s"], 4),
        "wall_s": round(time.perf_counter() - started, 3),
        # The runtime checks the two passes agree; logits and tokens are judged by the host oracle.
        "checked_in_page": "the free-running pass chose the checked pass's tokens; logits: host oracle",
        "result": NOT_CHECKED if free["ids"] == checked else FAILED,
    }
