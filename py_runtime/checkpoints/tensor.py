"""A tensor as a checkpoint stores it: its name, format, shape and where its bytes are.

Formats are named as our kernels name them (f32, f16, bf16, and ggml's block formats q4_0, q4_1, q8_0).
A block format packs `block` consecutive elements of a row into `block_bytes` bytes, so a row is
whole blocks and a run of rows is one contiguous byte range: a tensor is read a run of rows at a time.
Shapes are row-major, outermost first, as torch and safetensors write them ([out_features, in_features]
for a linear); GGUF's dimensions, innermost first, are reversed into this order.

`dequantize_values` decodes bytes in pure Python (struct, no numpy): for norm vectors and tests;
the GPU decodes the large tensors (ops/dequantize.py).
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass

from .source import CheckpointError

__all__ = ["FORMATS", "StoredTensor", "dequantize_values"]

# format -> (elements per block, bytes per block)
FORMATS = {"f32": (1, 4), "f16": (1, 2), "bf16": (1, 2), "q4_0": (32, 18), "q4_1": (32, 20), "q8_0": (32, 34)}


@dataclass(frozen=True, kw_only=True)
class StoredTensor:
    name: str
    format: str
    shape: tuple[int, ...]
    offset: int                 # of its first byte in `source`
    source: object              # a ranged source (source.py)

    @property
    def numel(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count

    @property
    def row_length(self) -> int:
        """Elements of one row (the innermost dimension; a vector is one row)."""
        return self.shape[-1] if self.shape else 1

    @property
    def rows(self) -> int:
        return self.numel // self.row_length if self.row_length else 0

    @property
    def row_bytes(self) -> int:
        block, block_bytes = FORMATS[self.format]
        return self.row_length // block * block_bytes

    @property
    def nbytes(self) -> int:
        return self.rows * self.row_bytes

    async def read_rows(self, first: int = 0, count: int | None = None) -> bytes:
        """The stored bytes of rows [first, first + count) (default: to the end)."""
        count = self.rows - first if count is None else count
        if not (0 <= first and 0 <= count and first + count <= self.rows):
            raise CheckpointError(f"{self.source.name}: tensor {self.name!r}: rows [{first}, {first + count}) "
                                  f"outside its {self.rows}")
        start = self.offset + first * self.row_bytes
        length = count * self.row_bytes
        if start + length > self.source.size:
            raise CheckpointError(f"{self.source.name}: tensor {self.name!r} needs bytes [{start}, {start + length}) "
                                  f"but the file has {self.source.size}: it is truncated")
        return await self.source.read(start, length)

    async def values(self) -> array:
        """Every element as f32 (array 'f'), decoded on the host: for small tensors (norm weights)."""
        return dequantize_values(self.format, await self.read_rows(), self.numel)


def _halves(data: bytes, count: int) -> tuple:
    return struct.unpack_from(f"<{count}e", data)


def dequantize_values(fmt: str, data: bytes, count: int) -> array:
    """The f32 values of `count` elements stored in `fmt`, as the GPU kernel computes them (exact)."""
    if fmt not in FORMATS:
        raise CheckpointError(f"no decoder for format {fmt!r}; known: {', '.join(FORMATS)}")
    block, block_bytes = FORMATS[fmt]
    if count % block or len(data) < count // block * block_bytes:
        raise CheckpointError(f"{count} {fmt} elements need {count // block * block_bytes} bytes, got {len(data)}")
    out = array("f")
    if fmt == "f32":
        out.frombytes(data[:4 * count])
    elif fmt == "f16":
        out.extend(_halves(data, count))
    elif fmt == "bf16":
        words = array("I", bytes(4 * count))
        words[:] = array("I", (h << 16 for h in struct.unpack_from(f"<{count}H", data)))
        out.frombytes(words.tobytes())
    else:
        for b in range(count // block):
            base = b * block_bytes
            if fmt == "q8_0":
                (d,) = _halves(data[base:base + 2], 1)
                out.extend(d * q for q in struct.unpack_from("<32b", data, base + 2))
                continue
            (d, m) = _halves(data[base:base + 4], 2) if fmt == "q4_1" else (_halves(data[base:base + 2], 1)[0], 0.0)
            nibbles = data[base + (4 if fmt == "q4_1" else 2):base + block_bytes]
            levels = [q & 0xF for q in nibbles] + [q >> 4 for q in nibbles]
            if fmt == "q4_1":
                out.extend(q * d + m for q in levels)
            else:
                out.extend((q - 8) * d for q in levels)
    return out
