"""Text: a byte-level BPE tokenizer read from tokenizer.json, and the Llama 3 and Qwen3 chat templates.

Plain data-level code in pure Python (standard library only), so the page runs it in Pyodide exactly
as the host does; nothing here knows about the GPU.
"""

from .pretokenize import UnsupportedPattern
from .tokenizer import AddedToken, Tokenizer, TokenizerError

__all__ = ["Tokenizer", "AddedToken", "TokenizerError", "UnsupportedPattern"]
