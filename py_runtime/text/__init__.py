"""Text: a byte-level BPE tokenizer read from tokenizer.json (or a GGUF file's tokenizer metadata), and the
Llama 3, Qwen3 and plain ChatML chat templates.

Plain data-level code in pure Python (standard library only), so the page runs it in Pyodide exactly
as the host does; nothing here knows about the GPU.
"""

from .chat import CHAT_TEMPLATES, ChatTemplateError, chatml, encode_chat, llama3, qwen3, template_for
from .gguf_vocab import tokenizer_spec_from_gguf
from .pretokenize import UnsupportedPattern
from .tokenizer import AddedToken, DecodeStream, Tokenizer, TokenizerError

__all__ = ["Tokenizer", "AddedToken", "TokenizerError", "DecodeStream", "UnsupportedPattern", "CHAT_TEMPLATES",
           "ChatTemplateError", "encode_chat", "llama3", "qwen3", "chatml", "template_for", "tokenizer_spec_from_gguf"]
