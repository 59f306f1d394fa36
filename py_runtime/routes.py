"""Route attestation: which kernels really ran in an execution, as names and a stable bitmask.

Bits are assigned by position in ROUTES and never reused: append new routes at the end.
"""

from __future__ import annotations

__all__ = ["ROUTES", "ATTENTION_ROUTES", "route_bit", "route_mask", "attention_conflicts", "routes_from_mask"]

ROUTES = (
    "fill_uniform",         # synthetic data generator
    "unary",                # elementwise unary family
    "linear_f32_naive",     # f32 linear, one invocation per output (reference/fallback)
)
ATTENTION_ROUTES: frozenset[str] = frozenset()      # SDPA routes join here as they land
_BITS = {name: i for i, name in enumerate(ROUTES)}


def route_bit(route: str) -> int:
    if route not in _BITS:
        raise KeyError(f"unknown route {route!r}: add it to py_runtime/routes.py ROUTES (append only)")
    return 1 << _BITS[route]


def route_mask(routes) -> int:
    mask = 0
    for route in routes:
        mask |= route_bit(route)
    return mask


def routes_from_mask(mask: int) -> list[str]:
    return [name for name, bit in _BITS.items() if mask >> bit & 1]


def attention_conflicts(routes) -> int:
    """Distinct attention routes beyond the first in one execution (0 when consistent)."""
    return max(0, len(set(routes) & ATTENTION_ROUTES) - 1)
