"""Rotary position embedding (RoPE) with a live start position, two pair layouts.

  interleaved  (x[2i], x[2i+1]) rotate together: Meta/Llama checkpoints
  half         (x[i], x[i + D/2]) rotate together: HF rotate-half (Qwen3)

Frequencies f_i = theta^(-2i/D), i < D/2, optionally with Llama 3's scaling (factor 32, low 1,
high 4, original context 8192): wavelength 2 pi / f below 8192/4 keeps f, above 8192/1 uses f/32,
and in between s = (8192/wavelength - 1) / (4 - 1) blends f' = (1 - s) f/32 + s f.

Why host tables: the kernel reads (cos, sin) of position * f_i from a [positions, D/2] table that
the host computes in float64 (pure Python) and rounds once to f32. Computing the angle in the kernel
would round f_i and position * f_i to f32: an absolute angle error up to ~|angle| 2^-23, i.e.
~5e-4 rad at position 4096 with f_0 = 1 and ~1.6e-2 at 131072 (Llama's context), growing without
bound; and WGSL bounds sin/cos only on [-pi, pi] (2^-11 absolute), so the kernel would also need its
own range reduction. With tables, every output is within a few f32 roundings of the exact float64
rotation at any position: |a cos - b sin - exact| <= 3u (|a cos| + |b sin|) (u = 2^-24: the table's
rounding of cos and sin, the product, the difference), independent of the position. The price is
memory (positions x D/2 x 8 bytes: 1 MiB per 4096 positions at head_dim 64) and the host work to
fill it, once per model.
"""

from __future__ import annotations

import math
from array import array

from ..dispatch import POS, TOKENS, Op, OpCall, Sizing, linear_grid, live_limit, live_value, single
from ..models.config import LAYOUTS, Llama3Scaling
from ..tensors import Tensor

__all__ = ["inverse_frequencies", "cos_sin_table", "rope"]

def inverse_frequencies(head_dim: int, theta: float, scaling: Llama3Scaling | None = None) -> list[float]:
    """float64 f_i = theta^(-2i/head_dim) for i < head_dim/2, scaled when `scaling` is given."""
    if head_dim < 2 or head_dim % 2:
        raise ValueError(f"RoPE needs an even head_dim, got {head_dim}")
    freqs = [theta ** (-2.0 * i / head_dim) for i in range(head_dim // 2)]
    return [scaling.apply(f) for f in freqs] if scaling else freqs


def cos_sin_table(freqs: list[float], positions: int) -> bytes:
    """f32 (cos, sin) of p * f_i, p < positions, row-major [positions, len(freqs), 2]; float64 until
    the single rounding to f32."""
    values = array("f")
    for p in range(positions):
        for f in freqs:
            angle = p * f
            values.append(math.cos(angle))
            values.append(math.sin(angle))
    return values.tobytes()


def rope(*, src: Tensor, dst: Tensor, table: Tensor, heads: int, head_dim: int, layout: str,
         tokens: int | str = TOKENS, pos: int | str = POS) -> Op:
    """dst = RoPE(src) for src/dst [>= tokens, heads, head_dim]; token t sits at position pos + t.

    `tokens` and `pos` may name live sizes (prefill S at 0, then decode 1 token at S, ...); `table`
    is a [positions, head_dim/2, 2] f32 cos/sin table from cos_sin_table.
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
