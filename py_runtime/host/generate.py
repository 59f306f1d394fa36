"""`webgpu-llm-lab generate`: a checkpoint's greedy continuation of a prompt, natively, with the text
streamed as the ids are read back.

The model is a .gguf file or an HF folder (models/checkpoint_weights.py open_checkpoint); its tokenizer
is the folder's tokenizer.json or the GGUF's own metadata (text/gguf_vocab.py). With `chat` the prompt is
one user message (after `system`, if given) rendered by the vocabulary's chat template. Decoding stops
after `steps` tokens or at an end token: the checkpoint's EOS ids and the chat templates' end-of-turn
tokens where the vocabulary has them. Decode steps are submitted `batch` at a time and their ids read
after each batch, so up to batch - 1 steps may run past an end token (their ids are dropped).
"""

from __future__ import annotations

import json
import time

from ..models.checkpoint_weights import open_checkpoint
from ..models.decoder import Decoder
from ..text import DecodeStream, Tokenizer, encode_chat, tokenizer_spec_from_gguf

__all__ = ["END_OF_TURN", "load_tokenizer", "generate_text"]

END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<|end_of_text|>")


def load_tokenizer(extras: dict) -> Tokenizer:
    if extras.get("tokenizer_json"):
        return Tokenizer.from_file(extras["tokenizer_json"])
    if extras.get("gguf_metadata"):
        return Tokenizer(tokenizer_spec_from_gguf(extras["gguf_metadata"]))
    raise FileNotFoundError("the model has no tokenizer: an HF folder needs tokenizer.json beside config.json")


async def generate_text(runtime, path, prompt: str, *, steps: int = 64, chat: bool = False, system: str | None = None,
                        policy: str = "f32", batch: int = 8, write=print) -> dict:
    """Load, prefill, decode; `write(text)` hears the text as it arrives. Returns the ids, the text and the
    timings (load, prefill with its tok/s, decode with its tok/s)."""
    started = time.perf_counter()
    config, weights, extras = await open_checkpoint(path)
    tokenizer = load_tokenizer(extras)
    if chat:
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        ids = encode_chat(tokenizer, messages)
    else:
        ids = tokenizer.encode(prompt)
    stops = set(extras.get("eos_ids") or ()) | {i for i in map(tokenizer.token_to_id, END_OF_TURN) if i is not None}
    decoder = await Decoder.create(runtime, config, checkpoint=weights, max_prompt=len(ids),
                                   capacity=len(ids) + steps + 1, policy=policy)
    loaded = time.perf_counter()
    try:
        await decoder.prefill(ids)
        generated = await decoder.tokens(len(ids), len(ids) + 1)
        prefilled = time.perf_counter()
        stream = DecodeStream(tokenizer, skip_special_tokens=True)
        shown = 0

        def show(new_ids):
            nonlocal shown
            for token in new_ids:
                if token in stops:
                    return True
                write(stream.step(token))
                shown += 1
            return False

        stopped = show(generated)
        while not stopped and len(generated) < steps + 1:
            run = await decoder.decode(min(batch, steps + 1 - len(generated)), batch=batch)
            generated += run.ids
            stopped = show(run.ids)
        write(stream.finish())
        finished = time.perf_counter()
    finally:
        decoder.release()
    kept = generated[:shown]
    decode_tokens = len(generated) - 1
    return {"model": config.name, "config": config.to_json(), "prompt_ids": ids, "ids": kept,
            "text": tokenizer.decode(kept, skip_special_tokens=True), "stopped": stopped,
            "load_s": loaded - started, "prefill_s": prefilled - loaded,
            "prefill_tok_s": len(ids) / (prefilled - loaded), "decode_steps": decode_tokens,
            "decode_s": finished - prefilled,
            "decode_tok_s": decode_tokens / (finished - prefilled) if decode_tokens else None}


def summary(result: dict) -> str:
    return json.dumps({k: result[k] for k in ("model", "load_s", "prefill_s", "prefill_tok_s", "decode_steps",
                                              "decode_s", "decode_tok_s", "stopped")})
