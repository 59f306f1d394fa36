"""The page's `chat` view: a real checkpoint answering a text prompt, its text streamed as the ids are read back.

The model is a GGUF file read in ranges (never whole into Python's memory): `model_file=smollm2` is the vendored
SmolLM2-135M-Instruct the dev server serves, a relative URL ending in .gguf is any file under web/, and
`model_file=picked` the file the user chose with "Load a model file" (a Blob read by slices). The prompt is
tokenized in the page by the GGUF's own tokenizer (and chat template with `chat`), decoded on the GPU greedily or,
with `temperature` > 0, sampled with top_k, top_p and a seed (ops/sample.py; models/generation.py), stopping at
EOS or end of turn. Nothing is judged here: the report carries the prompt ids and every generated id, which the
e2e test compares with the native run and transformers.
"""

from __future__ import annotations

import time

from ..models.checkpoint_weights import open_gguf
from ..models.generation import generate_checkpoint
from ..ops.sample import Sampling
from .outcome import NOT_CHECKED, no_progress

__all__ = ["VENDORED", "model_url", "run_chat"]

VENDORED = {"smollm2": "vendor/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"}
PICKED = "picked"
READ_TIMEOUT_S = 60.0           # one ranged read (a tensor's rows, at most the upload's chunk)


def model_url(model_file: str) -> str | None:
    """The URL of `model_file` relative to the page (None for the picked file); a value that is neither
    vendored, picked nor a plain relative .gguf path is refused with what the option takes."""
    if model_file == PICKED:
        return None
    if model_file in VENDORED:
        return VENDORED[model_file]
    plain = not model_file.startswith("/") and "//" not in model_file and ":" not in model_file
    if model_file.endswith(".gguf") and plain and ".." not in model_file.split("/"):
        return model_file
    raise ValueError(f"model_file={model_file!r} is not one of {sorted(VENDORED)}, {PICKED!r} (the file picked in "
                     f"the page) or a relative path to a .gguf file the page's server serves")


async def run_chat(runtime, options: dict, sink=None, progress=no_progress) -> dict:
    from ..gpu.browser import ModelFileSource       # the browser backend: imported only where it runs
    adapter = runtime.device.adapter
    url = model_url(options["model_file"])
    sampling = Sampling.or_greedy(temperature=options["temperature"], top_k=options["top_k"], top_p=options["top_p"],
                                  seed=options["seed"])
    started = time.perf_counter()
    progress("file", 0, 1)
    source = await ModelFileSource.open(url, picked=url is None, timeout_s=READ_TIMEOUT_S)
    try:
        config, weights, extras = await open_gguf(source, key="chat")
        progress("file", 1, 1, {"text": f"{source.name}: {source.size / 1e6:.1f} MB, {config.layers} layers, "
                                        f"hidden {config.hidden}, vocab {config.vocab}"})
        opened_s = time.perf_counter() - started
        result = await generate_checkpoint(runtime, config, weights, extras, options["prompt"],
                                           steps=options["steps"], chat=options["chat"],
                                           system=options["system"] or None, policy=options["policy"],
                                           batch=options["batch"], sampling=sampling, write=lambda text: None,
                                           progress=progress)
    finally:
        source.close()
    return {
        "suite": "chat",
        "adapter": adapter.to_json(),
        "options": options,
        "file": {"name": source.name, "bytes": source.size, "url": url},
        **result,
        "open_s": round(opened_s, 3),
        "wall_s": round(time.perf_counter() - started, 3),
        "result": NOT_CHECKED,
    }
