"""`webgpu-llm-lab generate`: a checkpoint's continuation of a prompt (greedy, or sampled with a seed), natively,
with the text streamed as the ids are read back (the loop is models/generation.py's, shared with the page).

The model is a .gguf file or an HF folder (models/checkpoint_weights.py open_checkpoint).
"""

from __future__ import annotations

import json
import time

from ..models.checkpoint_weights import open_checkpoint
from ..models.generation import END_OF_TURN, generate_checkpoint, load_tokenizer

__all__ = ["END_OF_TURN", "load_tokenizer", "generate_text"]


async def generate_text(runtime, path, prompt: str, *, steps: int = 64, chat: bool = False, system: str | None = None,
                        policy: str = "f32", batch: int = 8, sampling=None, write=print) -> dict:
    """Open, load, prefill, decode; `write(text)` hears the text as it arrives. Returns the ids, the text and the
    timings (load, from opening the file, prefill with its tok/s, decode with its tok/s)."""
    started = time.perf_counter()
    config, weights, extras = await open_checkpoint(path)
    opened = time.perf_counter() - started
    result = await generate_checkpoint(runtime, config, weights, extras, prompt, steps=steps, chat=chat, system=system,
                                       policy=policy, batch=batch, sampling=sampling, write=write)
    return {**result, "load_s": result["load_s"] + opened}


def summary(result: dict) -> str:
    return json.dumps({k: result[k] for k in ("model", "load_s", "prefill_s", "prefill_tok_s", "decode_steps",
                                              "decode_s", "decode_tok_s", "stopped")})
