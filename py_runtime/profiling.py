"""Timestamp-query results -> per-dispatch durations, and a check for quantized timers."""

from __future__ import annotations

import math

__all__ = ["dispatch_durations", "looks_quantized", "QUANTUM_THRESHOLD_NS"]

# Chrome rounds timestamps to 100 us (65536 ns steps in practice) unless started with
# --enable-webgpu-developer-features; real GPU timer periods are a few ns to ~100 ns.
QUANTUM_THRESHOLD_NS = 1000


def dispatch_durations(stamps: list[int]) -> list[int]:
    """ns per dispatch from [begin_0, end_0, begin_1, end_1, ...].

    duration_i = end_i - max(begin_i, end_{i-1}): robust to GPUs that pin begin stamps early or
    overlap passes; never negative.
    """
    out = []
    previous_end = None
    for i in range(0, len(stamps), 2):
        begin, end = stamps[i], stamps[i + 1]
        start = begin if previous_end is None else max(begin, previous_end)
        out.append(max(0, end - start))
        previous_end = end if previous_end is None else max(previous_end, end)
    return out


def looks_quantized(stamps: list[int]) -> bool | None:
    """True when every timestamp sits on a grid of >= 1 us; None when there are too few to tell."""
    base = stamps[0] if stamps else 0
    offsets = [s - base for s in stamps if s != base]
    if len(offsets) < 3:
        return None
    grid = 0
    for offset in offsets:
        grid = math.gcd(grid, offset)
    return grid >= QUANTUM_THRESHOLD_NS
