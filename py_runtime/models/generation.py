"""A checkpoint's continuation of a prompt (greedy, or sampled on the GPU with a seed), with the text streamed as
the ids are read back: the loop the command line (`webgpu-llm-lab generate`) and the page (`?suite=chat`) share.

The prompt is tokenized by the checkpoint's own tokenizer (tokenizer.json or the GGUF's metadata); with `chat`
it is one user message (after `system`, or else the system message the checkpoint's own chat template adds
by default: SmolLM2's) rendered by the vocabulary's chat template. Decoding stops
after `steps` tokens or at an end token: the checkpoint's EOS ids and the chat templates' end-of-turn tokens
where the vocabulary has them. Decode steps are submitted `batch` at a time and their ids read after each
batch, so up to batch - 1 steps may run past an end token (their ids are dropped).
"""

from __future__ import annotations

import time

from ..text import DecodeStream, Tokenizer, encode_chat, tokenizer_spec_from_gguf
from ..text.chat import default_system
from ..ops.sample import Sampling
from .decoder import Decoder

__all__ = ["END_OF_TURN", "load_tokenizer", "prompt_ids", "stop_ids", "generate_checkpoint"]

END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<|end_of_text|>")


def load_tokenizer(extras: dict) -> Tokenizer:
    """The checkpoint's tokenizer from open_checkpoint's (or open_gguf's) extras."""
    if extras.get("tokenizer_json"):
        return Tokenizer.from_file(extras["tokenizer_json"])
    if extras.get("gguf_metadata"):
        return Tokenizer(tokenizer_spec_from_gguf(extras["gguf_metadata"]))
    raise FileNotFoundError("the model has no tokenizer: an HF folder needs tokenizer.json beside config.json")


def prompt_ids(tokenizer: Tokenizer, prompt: str, *, chat: bool, system: str | None,
               extras: dict | None = None) -> list[int]:
    """The prompt's ids; with `chat`, one user message after `system` (None: the template's default one, which
    the GGUF's own Jinja template names, if any)."""
    if not chat:
        return tokenizer.encode(prompt)
    if system is None:
        system = default_system(((extras or {}).get("gguf_metadata") or {}).get("tokenizer.chat_template"))
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    return encode_chat(tokenizer, messages)


def stop_ids(tokenizer: Tokenizer, extras: dict) -> set[int]:
    return set(extras.get("eos_ids") or ()) | {i for i in map(tokenizer.token_to_id, END_OF_TURN) if i is not None}


async def generate_checkpoint(runtime, config, weights, extras: dict, prompt: str, *, steps: int = 64,
                              chat: bool = False, system: str | None = None, policy: str = "f32", batch: int = 8,
                              sampling: Sampling | None = None, write=print, progress=None) -> dict:
    """Build the decoder on the checkpoint's weights, prefill, decode; `write(text)` hears the text as it
    arrives and `progress(stage, done, total, detail)` the stages (detail: the text so far and tok/s). Returns
    the ids, the text and the timings (load, prefill with its tok/s, decode with its tok/s). `sampling` None
    decodes greedily."""
    report = progress or (lambda *args: None)
    started = time.perf_counter()
    tokenizer = load_tokenizer(extras)
    ids = prompt_ids(tokenizer, prompt, chat=chat, system=system, extras=extras)
    stops = stop_ids(tokenizer, extras)
    decoder = await Decoder.create(runtime, config, checkpoint=weights, max_prompt=len(ids),
                                   capacity=len(ids) + steps + 1, policy=policy, sampling=sampling, progress=progress)
    loaded = time.perf_counter()
    text: list[str] = []
    try:
        report("prefill", 0, 1)
        await decoder.prefill(ids)
        generated = await decoder.tokens(len(ids), len(ids) + 1)
        prefilled = time.perf_counter()
        report("prefill", 1, 1, {"text": f"{len(ids)} tokens, {len(ids) / (prefilled - loaded):.1f} tok/s, first token "
                                         f"after {1000 * (prefilled - loaded):.0f} ms"})
        stream = DecodeStream(tokenizer, skip_special_tokens=True)
        shown = 0

        def show(new_ids):
            nonlocal shown
            for token in new_ids:
                if token in stops:
                    return True
                piece = stream.step(token)
                text.append(piece)
                write(piece)
                shown += 1
            return False

        stopped = show(generated)
        while not stopped and len(generated) < steps + 1:
            run = await decoder.decode(min(batch, steps + 1 - len(generated)), batch=batch)
            generated += run.ids
            stopped = show(run.ids)
            elapsed = time.perf_counter() - prefilled
            report("decode", len(generated) - 1, steps, {"text": f"{(len(generated) - 1) / elapsed:.2f} tok/s",
                                                         "answer": "".join(text)})
        tail = stream.finish()
        text.append(tail)
        write(tail)
        finished = time.perf_counter()
    finally:
        decoder.release()
    kept = generated[:shown]
    decode_tokens = len(generated) - 1
    return {"model": config.name, "config": config.to_json(), "prompt_ids": ids, "ids": kept,
            "sampling": sampling.to_json() if sampling is not None else "greedy",
            "generated_ids": generated, "text": tokenizer.decode(kept, skip_special_tokens=True), "stopped": stopped,
            "load_s": loaded - started, "prefill_s": prefilled - loaded,
            "prefill_tok_s": len(ids) / (prefilled - loaded), "decode_steps": decode_tokens,
            "decode_s": finished - prefilled,
            "decode_tok_s": decode_tokens / (finished - prefilled) if decode_tokens else None}
