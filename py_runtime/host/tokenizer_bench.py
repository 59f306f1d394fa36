"""How fast the pure-Python tokenizer encodes in CPython, beside the `tokenizers` package on the same
text: a printed figure, not a pass/fail timing.

    .venv/bin/python -m py_runtime.host.tokenizer_bench [--vocabulary llama3_2 qwen3] [--repeat 3]

The text is this repository's Markdown (English prose, code, tables) plus the oracle's corpus
(accented Latin, CJK, emoji, whitespace runs). Encoding it the first time runs BPE on every distinct
pre-token (cold: an empty per-word cache); later passes find most words cached (warm), the steady state
of a page that tokenizes prompts about the same things. One unbroken CJK run of 20,000 characters
(one pre-token) shows the merge loop stays O(n log n) on long words.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from ..text import Tokenizer
from .oracle.tokenizer import corpus_strings, reference_tokenizer
from .vendor import TOKENIZERS, tokenizer_dir

__all__ = ["bench_tokenizer", "main"]


def _text(root: Path) -> str:
    markdown = [path.read_text() for path in sorted([root / "README.md", *(root / "docs").glob("*.md")])]
    return "\n\n".join(markdown + corpus_strings())


def bench_tokenizer(root: Path, name: str, *, repeat: int = 3) -> dict:
    path = tokenizer_dir(root, name) / "tokenizer.json"
    started = time.perf_counter()
    ours = Tokenizer(json.loads(path.read_bytes()))
    load_s = time.perf_counter() - started
    reference = reference_tokenizer(path)
    text = _text(root)
    passes = []
    for _ in range(repeat):
        started = time.perf_counter()
        ids = ours.encode(text)
        passes.append(time.perf_counter() - started)
    reference_passes = []
    for _ in range(repeat):
        started = time.perf_counter()
        want = reference.encode(text).ids
        reference_passes.append(time.perf_counter() - started)
    long_word = "自然语言处理是人工智能的一个分支" * 1250
    ours.bpe._cache.clear()
    started = time.perf_counter()
    long_ids = ours.encode(long_word, add_special_tokens=False)
    long_s = time.perf_counter() - started
    return {"vocabulary": name, "load_s": load_s, "characters": len(text), "tokens": len(ids),
            "equal": ids == want, "cold_tok_s": len(ids) / passes[0],
            "warm_tok_s": len(ids) / min(passes[1:] or passes),
            "reference_tok_s": len(want) / min(reference_passes), "long_word_chars": len(long_word),
            "long_word_tokens": len(long_ids), "long_word_s": long_s,
            "long_word_equal": long_ids == reference.encode(long_word, add_special_tokens=False).ids}


def main(argv: list[str] | None = None) -> int:
    from .codegen import repo_root

    parser = argparse.ArgumentParser(prog="python -m py_runtime.host.tokenizer_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocabulary", nargs="+", choices=tuple(TOKENIZERS), default=list(TOKENIZERS))
    parser.add_argument("--repeat", type=int, default=3, help="encode passes (the first is cold)")
    args = parser.parse_args(argv)
    for name in args.vocabulary:
        r = bench_tokenizer(repo_root(), name, repeat=max(args.repeat, 1))
        print(f"{name}: load {r['load_s']:.2f} s; {r['characters']:,} characters -> {r['tokens']:,} tokens "
              f"({'ids equal to' if r['equal'] else 'IDS DIFFER FROM'} tokenizers); encode "
              f"{r['cold_tok_s']:,.0f} tok/s cold, {r['warm_tok_s']:,.0f} tok/s warm "
              f"(tokenizers, best pass: {r['reference_tok_s']:,.0f} tok/s); one {r['long_word_chars']:,}-character CJK word "
              f"-> {r['long_word_tokens']:,} tokens in {r['long_word_s'] * 1000:.0f} ms"
              f"{'' if r['long_word_equal'] else ' (IDS DIFFER)'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
