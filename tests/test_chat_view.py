"""The chat view's host side: which model files it takes, and the prompt ids and end tokens it derives from the
GGUF's own tokenizer (the page runs the same code in Pyodide: e2e/test_chat_browser.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from py_runtime.checkpoints import FileSource
from py_runtime.checks.chat import VENDORED, model_url
from py_runtime.host.oracle.smollm2 import CHAT_PROMPT, QUESTION, SYSTEM
from py_runtime.host.vendor import smollm2_gguf
from py_runtime.models.checkpoint_weights import open_gguf
from py_runtime.models.generation import load_tokenizer, prompt_ids, stop_ids

REPO = Path(__file__).resolve().parents[1]


def test_model_file_takes_the_vendored_the_picked_and_plain_relative_gguf_paths_only():
    assert model_url("smollm2") == VENDORED["smollm2"] and model_url("picked") is None
    assert (REPO / "web" / VENDORED["smollm2"]).name == smollm2_gguf(REPO).name
    assert model_url("vendor/models/mine.gguf") == "vendor/models/mine.gguf"
    for refused in ("../secret.gguf", "vendor/../../x.gguf", "/abs.gguf", "http://elsewhere/x.gguf", "//host/x.gguf",
                    "model.bin", ""):
        with pytest.raises(ValueError, match="is not one of"):
            model_url(refused)


def test_the_chat_prompt_and_end_tokens_come_from_the_ggufs_own_tokenizer():
    if not smollm2_gguf(REPO).exists():
        pytest.skip("the SmolLM2 GGUF is vendored by scripts/setup.sh")
    _, _, extras = asyncio.run(open_gguf(FileSource(smollm2_gguf(REPO))))
    tokenizer = load_tokenizer(extras)
    assert prompt_ids(tokenizer, QUESTION, chat=True, system=SYSTEM) == CHAT_PROMPT
    assert prompt_ids(tokenizer, QUESTION, chat=False, system=None) == tokenizer.encode(QUESTION)
    assert tokenizer.token_to_id("<|im_end|>") in stop_ids(tokenizer, extras)
