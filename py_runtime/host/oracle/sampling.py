"""The sampler's oracle (shaders/llm/sample.wgsl): which token the GPU must pick from the same f32 logits, the same
options and the same (seed, position), computed in float64 with a bit-exact twin of the kernel's hash.

The selection is exact and shared by both: the top k logits in argmax's order (order-preserving keys, NaN above
+inf, -0 equal to +0, equal keys by the lower index). Greedy cases (temperature 0, k 1, the top logit not
finite) have one answer. Otherwise the GPU's cumulative weights C_i are f32 and the oracle's float64, so a
draw u (or the nucleus bar top_p * total) that falls within the bound of a cumulative boundary may land on
either side, and the neighbours are accepted. The bound, per ranked candidate i with d_i = (l_i - l_0) / T:
  weight  |w'_i - w_i| <= e_i = (4 + 4 |d_i|) 2^-23 w_i
          (the subtraction and the division each round once: |d' - d| <= |d| 2^-23, so exp grows that
          relative error; WGSL's f32 exp is within 3 + 2|x| ULP, and an ULP is at most 2^-23 of the value;
          the 4s absorb second-order terms)
  sum     |C'_i - C_i| <= E_i = sum_{j<=i} e_j + 1.01 i 2^-24 C_i   (i serial f32 additions of nonnegative terms)
  draw    u * C'_m rounds once more: the drawn bar is within u (E_m + 2^-24 C_m) of u C_m.
Weights below e^-80 count as 0 in both (under 2^-115 of the top's weight 1, far inside the bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["lowbias32_np", "uniform_draw_np", "order_keys_np", "ranked_top_k", "SamplePick", "expected_pick"]

_U = 2.0 ** -24
NEGLIGIBLE_D = -80.0


def lowbias32_np(x) -> np.ndarray:
    """sample.wgsl's lowbias32 on uint32 arrays (wrapping multiplies)."""
    x = np.asarray(x, dtype=np.uint32).copy()
    with np.errstate(over="ignore"):
        x ^= x >> np.uint32(16)
        x *= np.uint32(0x7FEB352D)
        x ^= x >> np.uint32(15)
        x *= np.uint32(0x846CA68B)
        x ^= x >> np.uint32(16)
    return x


def uniform_draw_np(seed: int, position) -> np.ndarray:
    """The kernel's u in [0, 1) for (seed, position): the chained hash's top 24 bits times 2^-24."""
    h = lowbias32_np(lowbias32_np(np.uint32(seed)) ^ np.asarray(position, dtype=np.uint32))
    return (h >> np.uint32(8)).astype(np.float64) * _U


def order_keys_np(logits: np.ndarray) -> np.ndarray:
    """argmax's order-preserving u32 keys of f32 values (as int64): NaN largest, -0 == +0."""
    bits = np.asarray(logits, dtype=np.float32).view(np.uint32).astype(np.int64)
    magnitude = bits & 0x7FFFFFFF
    keys = np.where(bits != magnitude, (~bits) & 0xFFFFFFFF, bits | 0x80000000)
    keys = np.where(magnitude == 0, 0x80000000, keys)
    return np.where(magnitude > 0x7F800000, 0xFFFFFFFF, keys)


def ranked_top_k(logits: np.ndarray, k: int) -> np.ndarray:
    """The indices of the top min(k, n) logits, best first: larger key, then lower index."""
    keys = order_keys_np(logits)
    order = np.lexsort((np.arange(keys.size), -keys))
    return order[:min(k, keys.size)]


@dataclass(frozen=True)
class SamplePick:
    """The token the exact float64 arithmetic picks, every token the GPU's f32 arithmetic may pick within the
    bound (the module docstring), and the draw."""

    token: int
    acceptable: frozenset
    u: float | None

    @property
    def ambiguous(self) -> bool:
        return len(self.acceptable) > 1


def _first(mask: np.ndarray, default: int) -> int:
    hits = np.flatnonzero(mask)
    return int(hits[0]) if hits.size else default


def expected_pick(logits: np.ndarray, *, temperature: float, top_k: int, top_p: float, seed: int,
                  position: int) -> SamplePick:
    """What sample.wgsl must write for these f32 logits, options (rounded to f32 as the params are) and position."""
    logits = np.asarray(logits, dtype=np.float32)
    ranked = ranked_top_k(logits, top_k)
    need = ranked.size
    top = float(logits[ranked[0]])
    t32, p32 = float(np.float32(temperature)), float(np.float32(top_p))
    if not t32 > 0 or need == 1 or not math.isfinite(top):
        return SamplePick(int(ranked[0]), frozenset({int(ranked[0])}), None)
    values = logits[ranked].astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        d = (values - top) / t32
    negligible = np.isneginf(values) | (d < NEGLIGIBLE_D)
    d = np.where(negligible, 0.0, d)
    w = np.where(negligible, 0.0, np.exp(d))
    cumulative = np.cumsum(w)
    weight_error = (4 + 4 * np.abs(d)) * 2.0 ** -23 * w
    bound = np.cumsum(weight_error) + 1.01 * np.arange(need) * _U * cumulative
    total, total_bound = cumulative[-1], bound[-1]

    if p32 >= 1:
        nuclei = [need]
        exact_nucleus = need
    else:
        bar = p32 * total
        bar_low, bar_high = p32 * (total - total_bound) * (1 - _U), p32 * (total + total_bound) * (1 + _U)
        exact_nucleus = _first(cumulative >= bar, need - 1) + 1
        first_possible = _first(cumulative + bound >= bar_low, need - 1)
        first_certain = _first(cumulative - bound >= bar_high, need - 1)
        nuclei = list(range(first_possible + 1, first_certain + 2))

    u = float(uniform_draw_np(seed, position))
    exact = _first(cumulative[:exact_nucleus] > u * cumulative[exact_nucleus - 1], exact_nucleus - 1)
    picks = set()
    for m in nuclei:
        mass, mass_bound = cumulative[m - 1], bound[m - 1]
        drawn_low = u * (mass - mass_bound) * (1 - _U)
        drawn_high = u * (mass + mass_bound) * (1 + _U)
        head = cumulative[:m]
        first_possible = _first(head + bound[:m] > drawn_low, m - 1)
        first_certain = _first(head - bound[:m] > drawn_high, m - 1)
        picks |= set(range(first_possible, first_certain + 1))
    return SamplePick(int(ranked[exact]), frozenset(int(ranked[i]) for i in picks | {exact}), u)
