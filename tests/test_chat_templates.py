"""The Python chat templates (py_runtime/text/chat.py) render what the Jinja templates shipped in each
tokenizer_config.json render, as transformers runs them (jinja2, trim_blocks and lstrip_blocks), for
the conversations they support; the ids of a rendered chat are the reference's; the rest is refused."""

from __future__ import annotations

import json

import pytest

from py_runtime.text.chat import ChatTemplateError, encode_chat, llama3, qwen3, template_for

CONVERSATIONS = {
    "user only": [{"role": "user", "content": "What is the capital of France?"}],
    "system and user": [{"role": "system", "content": "  You are terse.\n"},
                        {"role": "user", "content": "Name a prime.\n\n"}],
    "multi-turn": [{"role": "system", "content": "Be kind."},
                   {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"},
                   {"role": "user", "content": "Count to 3."}, {"role": "assistant", "content": "1, 2, 3."}],
    "late system": [{"role": "user", "content": "a"}, {"role": "system", "content": "b"},
                    {"role": "user", "content": "c"}],
    "reasoning in content": [{"role": "user", "content": "2+2?"},
                             {"role": "assistant", "content": "<think>\nadd them\n</think>\n\n4"},
                             {"role": "user", "content": "and 3+3?"},
                             {"role": "assistant", "content": "<think>\n\nagain\n\n</think>\n\n\n6"}],
    "reasoning field": [{"role": "user", "content": "q"},
                        {"role": "assistant", "content": "answer", "reasoning_content": "\nthoughts\n"},
                        {"role": "assistant", "content": "more"}],
    "unicode": [{"role": "user", "content": "Résumé 東京 😀 <b>x</b>"}],
}


def _jinja(name: str, vendored_tokenizers):
    jinja2 = pytest.importorskip("jinja2")
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    config = json.loads((vendored_tokenizers.path(name).parent / "tokenizer_config.json").read_text())
    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                extensions=[jinja2.ext.loopcontrols])
    environment.filters["tojson"] = lambda value, indent=None: json.dumps(value, indent=indent)
    return environment.from_string(config["chat_template"]), config


@pytest.mark.parametrize("generation_prompt", [True, False])
@pytest.mark.parametrize("conversation", CONVERSATIONS)
def test_llama3_renders_as_the_shipped_template(vendored_tokenizers, conversation, generation_prompt):
    template, config = _jinja("llama3_2", vendored_tokenizers)
    messages = CONVERSATIONS[conversation]
    want = template.render(messages=messages, add_generation_prompt=generation_prompt,
                           bos_token=config["bos_token"], date_string="01 Dec 2026")
    assert llama3(messages, add_generation_prompt=generation_prompt, date_string="01 Dec 2026") == want


@pytest.mark.parametrize("thinking", [None, True, False])
@pytest.mark.parametrize("generation_prompt", [True, False])
@pytest.mark.parametrize("conversation", CONVERSATIONS)
def test_qwen3_renders_as_the_shipped_template(vendored_tokenizers, conversation, generation_prompt, thinking):
    template, _ = _jinja("qwen3", vendored_tokenizers)
    messages = CONVERSATIONS[conversation]
    extra = {} if thinking is None else {"enable_thinking": thinking}
    want = template.render(messages=messages, add_generation_prompt=generation_prompt, **extra)
    assert qwen3(messages, add_generation_prompt=generation_prompt, enable_thinking=thinking) == want


@pytest.mark.parametrize("name", ["llama3_2", "qwen3"])
def test_a_chat_encodes_to_the_reference_ids_without_a_second_bos(vendored_tokenizers, name):
    ours, reference = vendored_tokenizers.ours(name), vendored_tokenizers.reference(name)
    messages = CONVERSATIONS["multi-turn"]
    render = llama3 if template_for(ours) == "llama3" else qwen3
    text = render(messages, add_generation_prompt=True)
    ids = encode_chat(ours, messages)
    assert ids == reference.encode(text, add_special_tokens=False).ids
    assert ids.count(128000) == (1 if name == "llama3_2" else 0)
    assert ours.decode(ids) == text


def test_tools_and_tool_messages_are_refused():
    with pytest.raises(ChatTemplateError, match="message 1 \\(role 'tool'\\) is not supported"):
        qwen3([{"role": "user", "content": "x"}, {"role": "tool", "content": "42"}])
    with pytest.raises(ChatTemplateError, match="message 0 \\(role 'assistant'\\) is not supported"):
        llama3([{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f"}}]}])
