"""SmolLM2-135M-Instruct's reference answer (the vendored Q4_1 GGUF), shared by the native and the browser tests.

Both lists are transformers' own: CHAT_PROMPT is what its GGUF tokenizer encodes for the GGUF's chat template
(tokenizer.chat_template) with one user message, "What is the capital of France?", after SYSTEM (the template's
default system prompt) and the generation prompt; ANSWER is its greedy continuation on the dequantized GGUF
(tests/test_native_smollm2.py recomputes it).
"""

from __future__ import annotations

__all__ = ["QUESTION", "SYSTEM", "CHAT_PROMPT", "ANSWER", "ANSWER_TEXT"]

QUESTION = "What is the capital of France?"
SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
CHAT_PROMPT = [1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411, 407, 19712,
               8182, 2, 198, 1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198]
ANSWER = [504, 3575, 282, 4649, 314, 7042]
ANSWER_TEXT = "The capital of France is Paris"
