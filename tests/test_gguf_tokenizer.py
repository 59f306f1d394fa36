"""The tokenizer a GGUF file carries (SmolLM2's: byte-level BPE, llama.cpp pre-tokenizer "smollm"), turned
into a tokenizer.json spec (text/gguf_vocab.py) for our pure-Python Tokenizer, against transformers' own
GGUF tokenizer (built by its GGUF converter on `tokenizers`) on the same file; ChatML renders SmolLM2's chat
prompt; other tokenizer kinds are refused by name."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from py_runtime.checkpoints import FileSource, GgufCheckpoint
from py_runtime.host.vendor import smollm2_gguf
from py_runtime.models.generation import prompt_ids
from py_runtime.text import Tokenizer, TokenizerError, encode_chat, template_for, tokenizer_spec_from_gguf
from py_runtime.text.chat import default_system

transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")

REPO = Path(__file__).resolve().parents[1]
CORPUS = [
    "The capital of France is Paris.", "Hello world! It's  a   test.\n\nNew   line\tTab  ",
    "Café naïve façade — déjà vu, Ærøskøbing", "東京は日本の首都です。 Привет, мир! مرحبا", "🙂 👩‍👩‍👧 emoji 🇫🇷",
    "def f(x):\n    return x ** 2  # comment\n", "I'M sure they'll've DONE it'S", "     leading and trailing     ",
    "<|im_start|>user\nhi<|im_end|>\n<|endoftext|>", "a<|im_end|>b <|im_start|> c",
]
SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


@pytest.fixture(scope="module")
def metadata():
    return asyncio.run(GgufCheckpoint.open(FileSource(smollm2_gguf(REPO)))).metadata


@pytest.fixture(scope="module")
def tokenizers_pair(metadata):
    path = smollm2_gguf(REPO)
    return Tokenizer(tokenizer_spec_from_gguf(metadata)), \
        transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)


def test_the_gguf_tokenizer_encodes_and_decodes_as_transformers_gguf_tokenizer(tokenizers_pair):
    ours, reference = tokenizers_pair
    assert ours.vocab_size == len(reference) == 49152
    for text in CORPUS:
        ids = ours.encode(text)
        assert ids == reference(text)["input_ids"], text
        assert ours.decode(ids) == reference.decode(ids) == text


def test_smollm2_chat_prompt_is_chatml(tokenizers_pair):
    ours, reference = tokenizers_pair
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    assert template_for(ours) == "chatml"
    ids = encode_chat(ours, [{"role": "system", "content": SMOLLM2_SYSTEM}, *messages])
    expected = reference.apply_chat_template(messages, add_generation_prompt=True)
    assert ids == list(getattr(expected, "input_ids", expected))


def test_a_chat_prompt_without_system_gets_the_templates_default_one_as_transformers_renders_it(tokenizers_pair,
                                                                                                  metadata):
    ours, reference = tokenizers_pair
    assert default_system(metadata["tokenizer.chat_template"]) == SMOLLM2_SYSTEM
    question = "What is the capital of France?"
    expected = reference.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True)
    ids = prompt_ids(ours, question, chat=True, system=None, extras={"gguf_metadata": metadata})
    assert ids == list(getattr(expected, "input_ids", expected))
    # an explicit system message replaces it; a template without a literal one adds none
    assert SMOLLM2_SYSTEM not in ours.decode(prompt_ids(ours, question, chat=True, system="Be brief.",
                                                        extras={"gguf_metadata": metadata}))
    assert default_system("{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n'}}{% endfor %}") is None


def test_other_gguf_tokenizers_are_refused_by_name(metadata):
    with pytest.raises(TokenizerError, match="tokenizer.ggml.model 'llama' is not read"):
        tokenizer_spec_from_gguf({**metadata, "tokenizer.ggml.model": "llama"})
    with pytest.raises(TokenizerError, match="tokenizer.ggml.pre 'deepseek-llm' is not read; known: smollm"):
        tokenizer_spec_from_gguf({**metadata, "tokenizer.ggml.pre": "deepseek-llm"})
