"""Chat templates of Llama 3.1/3.2 and Qwen3, written out in Python for their common cases.

The models ship these as Jinja templates in tokenizer_config.json; Pyodide has no Jinja, and a Jinja
engine is far more than the few branches these need. Each function renders what the shipped template
renders for system, user and assistant messages and add_generation_prompt (tests/test_chat_templates.py
renders the shipped templates with jinja2 on the host and compares). Tools, tool calls and tool or
ipython messages are refused with an error rather than rendered approximately.

Messages are plain JSON: [{"role": "system" | "user" | "assistant", "content": str}, ...]; a Qwen3
assistant message may carry "reasoning_content".
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

__all__ = ["llama3", "qwen3", "CHAT_TEMPLATES", "ChatTemplateError", "template_for", "encode_chat",
           "default_system"]

_ROLES = ("system", "user", "assistant")


class ChatTemplateError(ValueError):
    pass


def _checked(template: str, messages: Sequence[Mapping]) -> list[Mapping]:
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in _ROLES or "tool_calls" in message or not isinstance(message.get("content"), str):
            message_text = (f"{template} chat template: message {index} (role {role!r}) is not supported: only "
                            f"{', '.join(_ROLES)} messages with string content, without tool calls")
            raise ChatTemplateError(message_text)
    return list(messages)


def llama3(messages: Sequence[Mapping], *, add_generation_prompt: bool = False,
           bos_token: str = "<|begin_of_text|>", date_string: str = "26 Jul 2024") -> str:
    """Llama 3.1/3.2's template. The system block always appears (empty system message if none) with a
    knowledge-cutoff line and today's date; `date_string` defaults to the template's own fallback, where
    transformers passes the current date (strftime_now). Contents are stripped of surrounding whitespace."""
    messages = _checked("llama3", messages)
    system = ""
    if messages and messages[0]["role"] == "system":
        system, messages = messages[0]["content"].strip(), messages[1:]
    parts = [bos_token, "<|start_header_id|>system<|end_header_id|>\n\n",
             "Cutting Knowledge Date: December 2023\n", f"Today Date: {date_string}\n\n", system, "<|eot_id|>"]
    for message in messages:
        parts.append(f"<|start_header_id|>{message['role']}<|end_header_id|>\n\n{message['content'].strip()}<|eot_id|>")
    if add_generation_prompt:
        parts.append("<|start_header_id|>assistant<|end_header_id|>\n\n")
    return "".join(parts)


def _last_query_index(messages: list[Mapping]) -> int:
    """The last user message that is not a wrapped tool response (the template's multi_step_tool scan):
    assistant turns after it keep their reasoning."""
    for index in range(len(messages) - 1, -1, -1):
        content = messages[index]["content"]
        if messages[index]["role"] == "user" and not (
                content.startswith("<tool_response>") and content.endswith("</tool_response>")):
            return index
    return len(messages) - 1


def _split_reasoning(message: Mapping) -> tuple[str, str]:
    """(content, reasoning): an explicit reasoning_content, else what a '<think>...</think>' prefix holds."""
    content = message["content"]
    if message.get("reasoning_content") is not None:
        return content, message["reasoning_content"]
    if "</think>" in content:
        before, after = content.split("</think>")[0], content.split("</think>")[-1]
        return after.lstrip("\n"), before.rstrip("\n").split("<think>")[-1].lstrip("\n")
    return content, ""


def qwen3(messages: Sequence[Mapping], *, add_generation_prompt: bool = False,
          enable_thinking: bool | None = None) -> str:
    """Qwen3's template (ChatML). Assistant turns after the last user query show their reasoning in a
    <think> block (the final turn always does, empty if none); earlier turns drop it. enable_thinking=False
    with add_generation_prompt pre-fills an empty think block, which turns thinking off."""
    messages = _checked("qwen3", messages)
    parts = []
    if messages and messages[0]["role"] == "system":
        parts.append(f"<|im_start|>system\n{messages[0]['content']}<|im_end|>\n")
    last_query = _last_query_index(messages)
    for index, message in enumerate(messages):
        role = message["role"]
        if role == "user" or (role == "system" and index > 0):
            parts.append(f"<|im_start|>{role}\n{message['content']}<|im_end|>\n")
        elif role == "assistant":
            content, reasoning = _split_reasoning(message)
            if index > last_query and (index == len(messages) - 1 or reasoning):
                reasoning = reasoning.strip("\n")
                parts.append(f"<|im_start|>assistant\n<think>\n{reasoning}\n</think>\n\n{content.lstrip(chr(10))}")
            else:
                parts.append(f"<|im_start|>assistant\n{content}")
            parts.append("<|im_end|>\n")
    if add_generation_prompt:
        parts.append("<|im_start|>assistant\n")
        if enable_thinking is False:
            parts.append("<think>\n\n</think>\n\n")
    return "".join(parts)


def chatml(messages: Sequence[Mapping], *, add_generation_prompt: bool = False) -> str:
    """Plain ChatML (SmolLM2's template): each message as <|im_start|>role, newline, content, <|im_end|>,
    newline; the generation prompt opens an assistant turn. No system message is added here: SmolLM2's own
    template adds its default one when the first message is not a system message (default_system finds it)."""
    parts = [f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in _checked("chatml", messages)]
    if add_generation_prompt:
        parts.append("<|im_start|>assistant\n")
    return "".join(parts)


CHAT_TEMPLATES = {"llama3": llama3, "qwen3": qwen3, "chatml": chatml}

# A ChatML system turn written out as a string literal of the Jinja source: the message the template adds
# when the conversation brings none (SmolLM2's "You are a helpful AI assistant named SmolLM, ...").
_LITERAL_SYSTEM = re.compile(r"""['"]<\|im_start\|>system(?:\n|\\n)([^'"{}<>]+)<\|im_end\|>""")


def default_system(jinja_source: str | None) -> str | None:
    """The system message a ChatML Jinja template (a GGUF's tokenizer.chat_template) renders when the first
    message is not a system message, or None when it has none."""
    found = _LITERAL_SYSTEM.search(jinja_source or "")
    return found.group(1) if found else None


def template_for(tokenizer) -> str:
    """The chat template a vocabulary was trained with, told by its special tokens."""
    if tokenizer.token_to_id("<|start_header_id|>") is not None and tokenizer.token_to_id("<|eot_id|>") is not None:
        return "llama3"
    if tokenizer.token_to_id("<|im_start|>") is not None and tokenizer.token_to_id("<think>") is not None:
        return "qwen3"
    if tokenizer.token_to_id("<|im_start|>") is not None and tokenizer.token_to_id("<|im_end|>") is not None:
        return "chatml"
    raise ChatTemplateError(f"no known chat template for this vocabulary (known: {', '.join(CHAT_TEMPLATES)})")


def encode_chat(tokenizer, messages: Sequence[Mapping], *, template: str | None = None,
                add_generation_prompt: bool = True, **options) -> list[int]:
    """The ids of a rendered conversation. The template writes its own BOS, so the post-processor's is
    not added again (as transformers' apply_chat_template(tokenize=True) does)."""
    name = template or template_for(tokenizer)
    if name not in CHAT_TEMPLATES:
        raise ChatTemplateError(f"unknown chat template {name!r} (known: {', '.join(CHAT_TEMPLATES)})")
    text = CHAT_TEMPLATES[name](messages, add_generation_prompt=add_generation_prompt, **options)
    return tokenizer.encode(text, add_special_tokens=False)
