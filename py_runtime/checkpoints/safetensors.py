"""Hugging Face safetensors checkpoints, one file or sharded with model.safetensors.index.json.

A file is an 8-byte little-endian header length N, N bytes of JSON ({tensor name: {"dtype", "shape",
"data_offsets": [begin, end)}, optionally "__metadata__"}), then the data, offsets counted from its
start. Only the header is read on opening; each tensor's bytes are read when asked for (tensor.py).
Floating-point tensors of f32, f16 and bf16 are accepted; any other dtype is refused naming the tensor,
as are a byte range that does not match the shape, ranges past the end of the file (a truncated file),
and a sharded index naming a tensor its shard does not hold.
"""

from __future__ import annotations

import json
import struct

from .source import CheckpointError
from .tensor import StoredTensor

__all__ = ["DTYPES", "SafetensorsCheckpoint", "INDEX_NAME"]

DTYPES = {"F32": "f32", "F16": "f16", "BF16": "bf16"}      # safetensors dtype -> our format
_ITEM_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
               "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "U32": 4, "U64": 8}
INDEX_NAME = "model.safetensors.index.json"
MAX_HEADER = 100 << 20


class SafetensorsCheckpoint:
    """Tensors by name (`tensors`), with the file-level `metadata` of the first file."""

    def __init__(self, tensors: dict[str, StoredTensor], metadata: dict):
        self.tensors = tensors
        self.metadata = metadata

    @classmethod
    async def open(cls, source) -> "SafetensorsCheckpoint":
        """Read one file's header and validate every entry against it."""
        if source.size < 8:
            raise CheckpointError(f"{source.name}: {source.size} bytes, too short for a safetensors header")
        (length,) = struct.unpack("<Q", await source.read(0, 8))
        if length > MAX_HEADER or 8 + length > source.size:
            raise CheckpointError(f"{source.name}: a header of {length} bytes does not fit the file's {source.size} "
                                  f"(not safetensors, or truncated)")
        try:
            header = json.loads(await source.read(8, length))
        except ValueError as error:
            raise CheckpointError(f"{source.name}: the safetensors header is not JSON: {error}") from None
        data_start = 8 + length
        metadata = header.pop("__metadata__", None) or {}
        tensors, problems = {}, []
        for name, entry in header.items():
            dtype, shape = entry.get("dtype"), tuple(entry.get("shape", ()))
            begin, end = entry.get("data_offsets", (0, -1))
            if dtype not in DTYPES:
                problems.append(f"tensor {name!r} is {dtype}; only {', '.join(DTYPES)} are read")
                continue
            numel = 1
            for dim in shape:
                numel *= dim
            if end - begin != numel * _ITEM_BYTES[dtype]:
                problems.append(f"tensor {name!r} {list(shape)} {dtype} spans {end - begin} bytes, "
                                f"not {numel * _ITEM_BYTES[dtype]}")
                continue
            if data_start + end > source.size:
                problems.append(f"tensor {name!r} needs bytes up to {data_start + end} but the file has "
                                f"{source.size}: it is truncated")
                continue
            tensors[name] = StoredTensor(name=name, format=DTYPES[dtype], shape=shape, offset=data_start + begin,
                                         source=source)
        if problems:
            raise CheckpointError(f"{source.name}: " + "; ".join(problems[:8]) +
                                  (f" (and {len(problems) - 8} more)" if len(problems) > 8 else ""))
        return cls(tensors, metadata)

    @classmethod
    async def open_sharded(cls, index: bytes | str | dict, open_shard) -> "SafetensorsCheckpoint":
        """A sharded checkpoint from its index (model.safetensors.index.json's content) and `open_shard(file
        name)`, which returns (or awaits to) that shard's source. Every tensor of the weight map must be in
        the shard it names."""
        spec = index if isinstance(index, dict) else json.loads(index)
        weight_map = spec.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise CheckpointError(f"{INDEX_NAME}: no weight_map")
        shards, tensors, problems = {}, {}, []
        for file_name in sorted(set(weight_map.values())):
            source = open_shard(file_name)
            if hasattr(source, "__await__"):
                source = await source
            shards[file_name] = await cls.open(source)
        for name, file_name in weight_map.items():
            held = shards[file_name].tensors.get(name)
            if held is None:
                problems.append(f"tensor {name!r} is not in its shard {file_name}")
            else:
                tensors[name] = held
        if problems:
            raise CheckpointError(f"{INDEX_NAME}: " + "; ".join(problems[:8]))
        first = shards[min(shards)]
        return cls(tensors, first.metadata)
