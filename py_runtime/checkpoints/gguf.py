"""GGUF checkpoints (llama.cpp): metadata and tensors, read from a ranged source.

Layout (version 2 and 3, little-endian): "GGUF", u32 version, u64 tensor count, u64 metadata count;
the metadata as (string key, u32 value type, value); per tensor (string name, u32 dimension count, u64
dimensions innermost first, u32 ggml type, u64 offset from the data section); the data section starts
at the next multiple of `general.alignment` (default 32). Strings are a u64 length and UTF-8 bytes.

The header (metadata and tensor table, several MB with a tokenizer's vocabulary) is parsed on opening;
tensors are read when asked for. Tensors of F32, F16, BF16, Q4_0, Q4_1 and Q8_0 are readable; any
other type is listed and refused when that tensor is asked for, naming it and its type.
"""

from __future__ import annotations

from .source import CheckpointError, Cursor
from .tensor import FORMATS, StoredTensor

__all__ = ["GGML_TYPES", "GgufCheckpoint"]

# ggml type id -> name; the readable ones map to our format names in _FORMAT_OF
GGML_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1", 10: "Q2_K",
              11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 16: "IQ2_XXS", 17: "IQ2_XS",
              18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS", 24: "I8",
              25: "I16", 26: "I32", 27: "I64", 28: "F64", 29: "IQ1_M", 30: "BF16"}
_FORMAT_OF = {"F32": "f32", "F16": "f16", "BF16": "bf16", "Q4_0": "q4_0", "Q4_1": "q4_1", "Q8_0": "q8_0"}
# metadata value type -> struct code (8: string, 9: array are read apart)
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_MAX_STRING = 1 << 24


async def _string(cursor: Cursor, what: str) -> str:
    length = await cursor.read("Q", what)
    if length > _MAX_STRING:
        raise CheckpointError(f"{cursor.source.name}: {what}: a string of {length} bytes (corrupt header)")
    await cursor.need(length, what)
    return cursor.take(length).decode("utf-8", errors="replace")


async def _value(cursor: Cursor, kind: int, what: str):
    if kind in _SCALARS:
        return await cursor.read(_SCALARS[kind], what)
    if kind == 8:
        return await _string(cursor, what)
    if kind == 9:
        item, count = await cursor.read("IQ", what)
        if item in _SCALARS:
            size = {"B": 1, "b": 1, "?": 1, "H": 2, "h": 2, "I": 4, "i": 4, "f": 4, "Q": 8, "q": 8, "d": 8}[_SCALARS[item]]
            await cursor.need(size * count, what)
            return list(cursor.unpack(f"{count}{_SCALARS[item]}"))
        return [await _value(cursor, item, what) for _ in range(count)]
    raise CheckpointError(f"{cursor.source.name}: {what}: unknown metadata value type {kind}")


class GgufCheckpoint:
    """`metadata` (key -> value: numbers, strings, lists), `tensors` (name -> StoredTensor, shapes
    outermost first) and `unsupported` (name -> ggml type name of tensors stored in other types)."""

    def __init__(self, version: int, metadata: dict, tensors: dict[str, StoredTensor], unsupported: dict[str, str]):
        self.version, self.metadata, self.tensors, self.unsupported = version, metadata, tensors, unsupported

    @classmethod
    async def open(cls, source) -> "GgufCheckpoint":
        cursor = Cursor(source)
        await cursor.need(4, "the magic")
        if cursor.take(4) != b"GGUF":
            raise CheckpointError(f"{source.name}: not a GGUF file (no 'GGUF' magic)")
        version, tensor_count, kv_count = await cursor.read("IQQ")
        if version not in (2, 3):
            raise CheckpointError(f"{source.name}: GGUF version {version}; versions 2 and 3 are read")
        metadata = {}
        for _ in range(kv_count):
            key = await _string(cursor, "a metadata key")
            kind = await cursor.read("I", f"metadata {key!r}")
            metadata[key] = await _value(cursor, kind, f"metadata {key!r}")
        entries = []
        for _ in range(tensor_count):
            name = await _string(cursor, "a tensor name")
            what = f"tensor {name!r}'s header"
            dims = await cursor.read("I", what)
            if dims > 8:
                raise CheckpointError(f"{source.name}: tensor {name!r} has {dims} dimensions (corrupt header)")
            ne = [await cursor.read("Q", what) for _ in range(dims)]
            kind, offset = await cursor.read("IQ", what)
            entries.append((name, tuple(reversed(ne)), kind, offset))
        alignment = metadata.get("general.alignment", 32)
        data_start = -(-cursor.offset // alignment) * alignment
        tensors, unsupported, problems = {}, {}, []
        for name, shape, kind, offset in entries:
            type_name = GGML_TYPES.get(kind, f"type {kind}")
            if type_name not in _FORMAT_OF:
                unsupported[name] = type_name
                continue
            tensor = StoredTensor(name=name, format=_FORMAT_OF[type_name], shape=shape, offset=data_start + offset,
                                  source=source)
            block = FORMATS[tensor.format][0]
            if offset % alignment:
                problems.append(f"tensor {name!r} starts at {offset}, not a multiple of the alignment {alignment}")
            elif tensor.row_length % block:
                problems.append(f"tensor {name!r} {type_name}: rows of {tensor.row_length} are not whole blocks of {block}")
            elif tensor.offset + tensor.nbytes > source.size:
                problems.append(f"tensor {name!r} needs bytes up to {tensor.offset + tensor.nbytes} but the file has "
                                f"{source.size}: it is truncated")
            else:
                tensors[name] = tensor
        if problems:
            raise CheckpointError(f"{source.name}: " + "; ".join(problems[:8]) +
                                  (f" (and {len(problems) - 8} more)" if len(problems) > 8 else ""))
        return cls(version, metadata, tensors, unsupported)
