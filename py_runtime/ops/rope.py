"""Rotary position embedding (RoPE) with a live start position, two pair layouts.

  interleaved  (x[2i], x[2i+1]) rotate together: Meta/Llama checkpoints
  half         (x[i], x[i + D/2]) rotate together: HF rotate-half (Qwen3)

Frequencies f_i = theta^(-2i/D), i < D/2, optionally with Llama 3's scaling (factor 32, low 1,
high 4, original context 8192): wavelength 2 pi / f below 8192/4 keeps f, above 8192/1 uses f/32,
and in between s = (8192/wavelength - 1) / (4 - 1) blends f' = (1 - s) f/32 + s f.

Why tables: the kernel reads (cos, sin) of position * f_i from a [positions, D/2] table. Computing the
angle in the kernel would round f_i and position * f_i to f32: an absolute angle error up to
~|angle| 2^-23, i.e. ~5e-4 rad at position 4096 with f_0 = 1 and ~1.6e-2 at 131072 (Llama's context),
growing without bound; and WGSL bounds sin/cos only on [-pi, pi] (2^-11 absolute), so the kernel would
also need its own range reduction. `cos_sin_table_gpu` builds the table on the GPU from two float64
tables of about sqrt(positions) rows (the angle split as (b * block + j) f_i, combined by the angle
addition formulas), so the host's work grows with sqrt(positions), not positions (128K positions:
~23 thousand host evaluations, not 4 million); each entry is then within 4u absolutely (rope_table.wgsl),
and every output within 4u (|a| + |b|) + 2u (|a cos| + |b sin|) of the exact float64 rotation at any
position (u = 2^-24; the products and the difference add the 2u). `cos_sin_table` is the same table
made entirely on the host (each entry rounded once): tests use it as a reference. The price is memory
(positions x D/2 x 8 bytes: 1 MiB per 4096 positions at head_dim 64), once per model.
"""

from __future__ import annotations

import math
from array import array

from ..dispatch import POS, TOKENS, Op, OpCall, Sizing, linear_grid, live_limit, live_value, single
from ..models.config import LAYOUTS, Llama3Scaling
from ..oneshot import run_op
from ..tensors import Tensor

__all__ = ["inverse_frequencies", "cos_sin_table", "cos_sin_table_gpu", "rope"]

def inverse_frequencies(head_dim: int, theta: float, scaling: Llama3Scaling | None = None) -> list[float]:
    """float64 f_i = theta^(-2i/head_dim) for i < head_dim/2, scaled when `scaling` is given."""
    if head_dim < 2 or head_dim % 2:
        raise ValueError(f"RoPE needs an even head_dim, got {head_dim}")
    freqs = [theta ** (-2.0 * i / head_dim) for i in range(head_dim // 2)]
    return [scaling.apply(f) for f in freqs] if scaling else freqs


def cos_sin_table(freqs: list[float], positions: int) -> bytes:
    """f32 (cos, sin) of p * f_i, p < positions, row-major [positions, len(freqs), 2]; float64 until
    the single rounding to f32 (the whole table on the host: cos_sin_table_gpu needs ~sqrt of this)."""
    return _angles_table(freqs, range(positions))


def _angles_table(freqs: list[float], starts) -> bytes:
    """f32 (cos, sin) of p * f for p in starts, float64 until the single rounding."""
    values = array("f")
    for p in starts:
        for f in freqs:
            angle = p * f
            values.append(math.cos(angle))
            values.append(math.sin(angle))
    return values.tobytes()


async def cos_sin_table_gpu(runtime, table: Tensor, freqs: list[float]) -> None:
    """Fill table (f32 [positions, len(freqs), 2]) with (cos, sin) of p * f_i on the GPU, from a coarse
    table of positions b * block and a fine one of positions j < block, block = ceil(sqrt(positions))."""
    half = len(freqs)
    if table.dtype != "f32" or len(table.shape) != 3 or table.shape[1:] != (half, 2):
        raise ValueError(f"cos_sin_table_gpu: table {table!r} must be f32 [positions, {half}, 2]")
    positions = table.shape[0]
    block = max(1, math.isqrt(positions - 1) + 1)
    outer_rows = -(-positions // block)
    tensors = runtime.tensors
    coarse = await tensors.allocate(f"{table.name}.coarse", (outer_rows, half, 2))
    fine = await tensors.allocate(f"{table.name}.fine", (block, half, 2))
    try:
        runtime.device.write_buffer(coarse.buffer, _angles_table(freqs, (b * block for b in range(outer_rows))))
        runtime.device.write_buffer(fine.buffer, _angles_table(freqs, range(block)))

        def sizing(spec, live) -> Sizing:
            entries = positions * half
            return Sizing(workgroups=linear_grid(entries, spec.invocations, live_limit(live)),
                          params=spec.pack_params(positions=positions, half=half, block=block),
                          bytes_moved=8 * entries + 8 * half * (outer_rows + block), flops=6 * entries)

        await run_op(runtime, single(OpCall(label=f"rope_table({table.name})", kernel="rope_table", route="rope_table",
                                            tensors={"coarse": coarse, "fine": fine, "table": table}, sizing=sizing)))
    finally:
        tensors.release(coarse.name)
        tensors.release(fine.name)


def rope(*, src: Tensor, dst: Tensor, table: Tensor, heads: int, head_dim: int, layout: str,
         tokens: int | str = TOKENS, pos: int | str = POS) -> Op:
    """dst = RoPE(src) for src/dst [>= tokens, heads, head_dim]; token t sits at position pos + t.

    `tokens` and `pos` may name live sizes (prefill S at 0, then decode 1 token at S, ...); `table`
    is a [positions, head_dim/2, 2] f32 cos/sin table (cos_sin_table_gpu or cos_sin_table).
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown RoPE layout {layout!r}; known: {', '.join(LAYOUTS)}")
    if head_dim % 2 or head_dim < 2:
        raise ValueError(f"RoPE needs an even head_dim, got {head_dim}")
    half = head_dim // 2
    if table.numel % (2 * half) or table.dtype != "f32":
        raise ValueError(f"rope: table {table!r} is not f32 [positions, {half}, 2]")
    table_rows = table.numel // (2 * half)
    row = heads * head_dim
    capacity = min(src.numel, dst.numel) // row

    def sizing(spec, live) -> Sizing:
        t = live_value(tokens, live, "rope")
        start = live_value(pos, live, "rope")
        if not 0 <= t <= capacity:
            raise ValueError(f"rope({dst.name}): {t} tokens, but src/dst hold {capacity}")
        if start < 0 or start + t > table_rows:
            raise ValueError(f"rope({dst.name}): positions {start}..{start + t - 1} outside the "
                             f"{table_rows}-row cos/sin table")
        pairs = t * heads * half
        groups = linear_grid(pairs, spec.invocations, live_limit(live)) if pairs else (0, 1, 1)
        return Sizing(workgroups=groups, params=spec.pack_params(tokens=t, heads=heads, half=half, pos=start, table_rows=table_rows),
                      bytes_moved=4 * (4 * pairs + 2 * pairs), flops=6 * pairs)

    return single(OpCall(label=f"rope_{layout}({src.name}->{dst.name})", kernel=f"rope_{layout}", route=f"rope_{layout}",
                  tensors={"src": src, "table": table, "dst": dst}, sizing=sizing))
