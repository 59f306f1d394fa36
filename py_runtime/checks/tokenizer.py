"""The tokenizer suite: the pure-Python tokenizer (py_runtime/text) loads the vendored tokenizer.json
files and encodes sample strings where it runs (Pyodide in the page, or CPython natively).

The runtime checks what it can alone: every sample decodes back to its (normalized) text and a rendered
chat decodes back to the template's text. The ids themselves are judged on the host against the
`tokenizers` package (host/oracle/tokenizer.py: verify_tokenizer_report), so the report carries the
strings and ids. It also times loading and encoding, since Pyodide's speed is not CPython's.
The tokenizer.json files come from web/vendor/tokenizers/ (scripts/setup.sh): fetched from the page's
server in the browser, read from the checkout natively.
"""

from __future__ import annotations

import time
import unicodedata
from pathlib import Path

from ..text import Tokenizer, encode_chat, template_for
from ..text.chat import CHAT_TEMPLATES
from .outcome import no_progress, verdict

__all__ = ["VOCABULARIES", "SAMPLES", "run_tokenizer_check"]

VOCABULARIES = ("llama3_2", "qwen3")
ASSET = "vendor/tokenizers/{name}/tokenizer.json"
_WEB_ROOT = Path(__file__).resolve().parents[2] / "web"       # natively: this checkout's web/
SAMPLES = (
    "", "Hello world! It's a test, isn't it? WE'LL SEE.", "café naïve Ångström e\u0301", "東京は日本の首都です。我喜欢机器学习。",
    "def f(x):\n    return x ** 2  # square\n\n\n", "a   b\t\tc\r\n\r\n  \n", "1234567 3.14159 2026-12-01",
    "👨‍👩‍👧‍👦 👍🏽 🇯🇵 ❤️", "<|begin_of_text|>x<|eot_id|> <|im_start|>user\nhi<|im_end|> <think>y</think>",
    "Ελληνικά, русский, العربية", "自然语言处理" * 50,
)
CHAT = ({"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the capital of France?"})
_WARM_PASSES = 20


async def _asset_bytes(runtime, relative: str) -> bytes:
    if runtime.backend == "browser":
        from ..gpu.browser import fetch_bytes     # the browser backend: imported only where it runs

        return await fetch_bytes(relative)
    path = _WEB_ROOT / relative
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run scripts/setup.sh to vendor the tokenizers")
    return path.read_bytes()


def _normalized(tokenizer: Tokenizer, text: str) -> str:
    for form in tokenizer.normal_forms:
        text = unicodedata.normalize(form, text)
    return text


async def _case(runtime, name: str) -> dict:
    data = await _asset_bytes(runtime, ASSET.format(name=name))
    started = time.perf_counter()
    tokenizer = Tokenizer.from_json(data)
    load_ms = (time.perf_counter() - started) * 1e3
    started = time.perf_counter()
    ids = [tokenizer.encode(text) for text in SAMPLES]
    cold_s = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(_WARM_PASSES):
        for text in SAMPLES:
            tokenizer.encode(text)
    warm_s = time.perf_counter() - started
    tokens = sum(map(len, ids))
    round_trips = [tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == _normalized(tokenizer, text)
                   for text in SAMPLES]
    template = template_for(tokenizer)
    chat_text = CHAT_TEMPLATES[template](list(CHAT), add_generation_prompt=True)
    chat_ids = encode_chat(tokenizer, list(CHAT), template=template)
    return {
        "vocabulary": name, "vocab_size": tokenizer.vocab_size, "merges": tokenizer.bpe.merge_count,
        "load_ms": load_ms, "tokens": tokens, "cold_tok_s": tokens / cold_s,
        "warm_tok_s": tokens * _WARM_PASSES / warm_s,
        "strings": list(SAMPLES), "ids": ids,
        "decoded": [tokenizer.decode(i, skip_special_tokens=True) for i in ids], "round_trips": round_trips,
        "chat": {"template": template, "messages": list(CHAT), "text": chat_text, "ids": chat_ids,
                 "round_trip": tokenizer.decode(chat_ids) == chat_text},
    }


async def run_tokenizer_check(runtime, *, vocabularies: tuple[str, ...] = VOCABULARIES,
                              progress=no_progress) -> dict:
    cases = []
    for done, name in enumerate(vocabularies):
        progress(f"tokenizer {name}", done, len(vocabularies))
        cases.append(await _case(runtime, name))
    progress("tokenizers", len(vocabularies), len(vocabularies))
    ok = all(all(c["round_trips"]) and c["chat"]["round_trip"] for c in cases)
    return {"suite": "tokenizer", "adapter": runtime.device.adapter.to_json(), "cases": cases, "result": verdict(ok),
            "judged_on_host": "ids against the tokenizers package"}
