"""Reading checkpoints: HF safetensors (one file or sharded) and GGUF, tensor by tensor from a ranged
source, in pure Python (struct and memoryview: it runs in Pyodide as is)."""

from .gguf import GGML_TYPES, GgufCheckpoint
from .safetensors import INDEX_NAME, SafetensorsCheckpoint
from .source import BytesSource, CheckpointError, Cursor, FileSource
from .tensor import FORMATS, StoredTensor, dequantize_values

__all__ = ["BytesSource", "CheckpointError", "Cursor", "FileSource", "FORMATS", "GGML_TYPES", "GgufCheckpoint",
           "INDEX_NAME", "SafetensorsCheckpoint", "StoredTensor", "dequantize_values"]
