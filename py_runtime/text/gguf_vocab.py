"""A GGUF file's tokenizer metadata as a tokenizer.json spec (Tokenizer(spec) reads it).

Byte-level BPE only (`tokenizer.ggml.model` "gpt2"): the tokens are the vocabulary in id order, the merges
"a b" strings in rank order, tokens of type CONTROL (3) are special added tokens and USER_DEFINED (4)
plain added ones. The pre-tokenizer follows llama.cpp's `tokenizer.ggml.pre` as llama.cpp splits:
  smollm     each digit apart, then GPT-2's pattern (the HF SmolLM2 tokenizer.json's Digits + ByteLevel)
  gpt-2      GPT-2's pattern (ByteLevel)
  llama-bpe  Llama 3's pattern, then bytes
  qwen2      Qwen2's pattern, then bytes
Any other model or pre-tokenizer type is refused by name rather than tokenized differently.
`tokenizer.ggml.add_bos_token` adds the BOS id in front, as Llama's TemplateProcessing does.
"""

from __future__ import annotations

from .pretokenize import LLAMA3, QWEN2
from .tokenizer import TokenizerError

__all__ = ["GGUF_PRE_TOKENIZERS", "tokenizer_spec_from_gguf"]

_BYTES_ONLY = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
_GPT2 = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}


def _split(pattern) -> dict:
    return {"type": "Split", "pattern": {"Regex": pattern.regex}, "behavior": "Isolated", "invert": False}


GGUF_PRE_TOKENIZERS = {
    "smollm": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True}, _GPT2]},
    "gpt-2": _GPT2,
    "llama-bpe": {"type": "Sequence", "pretokenizers": [_split(LLAMA3), _BYTES_ONLY]},
    "qwen2": {"type": "Sequence", "pretokenizers": [_split(QWEN2), _BYTES_ONLY]},
}
_CONTROL, _USER_DEFINED = 3, 4


def tokenizer_spec_from_gguf(metadata: dict) -> dict:
    model, pre = metadata.get("tokenizer.ggml.model"), metadata.get("tokenizer.ggml.pre", "default")
    if model != "gpt2":
        raise TokenizerError(f"GGUF tokenizer.ggml.model {model!r} is not read (only 'gpt2', byte-level BPE)")
    if pre not in GGUF_PRE_TOKENIZERS:
        raise TokenizerError(f"GGUF tokenizer.ggml.pre {pre!r} is not read; known: {', '.join(GGUF_PRE_TOKENIZERS)}")
    tokens = metadata.get("tokenizer.ggml.tokens") or []
    merges = metadata.get("tokenizer.ggml.merges") or []
    types = metadata.get("tokenizer.ggml.token_type") or [1] * len(tokens)
    if not tokens or len(types) != len(tokens):
        raise TokenizerError(f"GGUF tokenizer: {len(tokens)} tokens and {len(types)} token types")
    added = [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": kind == _CONTROL}
             for i, kind in enumerate(types) if kind in (_CONTROL, _USER_DEFINED)]
    post = None
    if metadata.get("tokenizer.ggml.add_bos_token"):
        bos = metadata.get("tokenizer.ggml.bos_token_id")
        if bos is None:
            raise TokenizerError("GGUF tokenizer.ggml.add_bos_token is set but there is no bos_token_id")
        post = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": tokens[bos], "type_id": 0}},
                                                         {"Sequence": {"id": "A", "type_id": 0}}],
                "special_tokens": {tokens[bos]: {"id": tokens[bos], "ids": [bos], "tokens": [tokens[bos]]}}}
    return {"version": "1.0", "added_tokens": added, "normalizer": None, "pre_tokenizer": GGUF_PRE_TOKENIZERS[pre],
            "post_processor": post,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": {token: i for i, token in enumerate(tokens)}, "merges": list(merges)}}
