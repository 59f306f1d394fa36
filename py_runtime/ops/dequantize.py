"""A checkpoint's stored tensor decoded to f32 on the GPU (the `dequantize` kernel family).

The raw bytes of a tensor (or of a run of its rows starting at a block boundary) are written to a u32
buffer as they are in the file; one dispatch writes their f32 values, exactly (the kernel's comment
says why each format is exact). f32 tensors need no kernel: their bytes are written as they are.
"""

from __future__ import annotations

from ..dispatch import Op, OpCall, Sizing, linear_grid, live_limit, single
from ..tensors import Tensor

__all__ = ["DEQUANTIZE_FORMATS", "dequantize"]

# stored format -> (kernel, elements per block, bytes per block)
DEQUANTIZE_FORMATS = {
    "f16": ("dequantize_f16", 1, 2),
    "bf16": ("dequantize_bf16", 1, 2),
    "q4_0": ("dequantize_q4_0", 32, 18),
    "q4_1": ("dequantize_q4_1", 32, 20),
    "q8_0": ("dequantize_q8_0", 32, 34),
}


def dequantize(*, src: Tensor, out: Tensor, stored: str, count: int | None = None) -> Op:
    """out[e] = element e of the `stored`-format bytes in `src` (u32 words), e < count (default: all of out)."""
    if stored not in DEQUANTIZE_FORMATS:
        raise ValueError(f"dequantize: no kernel for stored format {stored!r}; known: {', '.join(DEQUANTIZE_FORMATS)}")
    kernel, block, block_bytes = DEQUANTIZE_FORMATS[stored]
    count = out.numel if count is None else count
    problems = []
    if src.dtype != "u32" or out.dtype != "f32":
        problems.append(f"src {src!r} must be u32 words and out {out!r} f32")
    if count % block or not 0 < count <= out.numel:
        problems.append(f"{count} elements must be whole blocks of {block}, at most out's {out.numel}")
    elif count // block * block_bytes > src.nbytes:
        problems.append(f"{count} {stored} elements need {count // block * block_bytes} bytes; src holds {src.nbytes}")
    if problems:
        raise ValueError(f"dequantize({out.name}, {stored}): " + "; ".join(problems))

    def sizing(spec, live) -> Sizing:
        return Sizing(workgroups=linear_grid(count, spec.invocations, live_limit(live)),
                      params=spec.pack_params(count=count),
                      bytes_moved=count // block * block_bytes + 4 * count)

    return single(OpCall(label=f"dequantize({out.name}, {stored})", kernel=kernel, route="dequantize",
                         tensors={"src": src, "out": out}, sizing=sizing))
