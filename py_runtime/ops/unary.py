"""Elementwise unary operators on f32 (the `unary` kernel family), their input domains for checks,
and their accuracy budgets derived from the WGSL spec's f32 accuracy table.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dispatch import Op, OpCall, Sizing, linear_grid, live_limit, resolve_length, single
from ..tensors import Tensor
from .synth import UniformRange

__all__ = ["UNARY_OPS", "Tolerance", "TOLERANCES", "INPUT_RANGES", "unary", "kernel_name"]

UNARY_OPS = ("abs", "cos", "exp", "hardswish", "neg", "round", "rsqrt", "sin", "sqrt", "tanh",
             "sigmoid", "silu")


@dataclass(frozen=True, kw_only=True)
class Tolerance:
    """|gpu - exact| <= (ulps + ulps_per_abs_x*|x|) * ulp(exact) + (abs_units + abs_units_per_abs_x*|x|) * 2**-23.

    ulp(v) is the f32 spacing at |v|. Budgets are the WGSL spec's f32 accuracy, composed through
    each expression, doubled to allow for a result that crosses a power of two relative to the
    intermediate it was rounded at.
    """

    ulps: float = 0.0
    ulps_per_abs_x: float = 0.0
    abs_units: float = 0.0
    abs_units_per_abs_x: float = 0.0
    why: str = ""


TOLERANCES = {
    "abs": Tolerance(why="exact"),
    "neg": Tolerance(why="exact"),
    "round": Tolerance(why="exact (round half to even)"),
    "rsqrt": Tolerance(ulps=4, why="inverseSqrt: 2 ULP"),
    "sqrt": Tolerance(ulps=9, why="sqrt: inherited from 1/inverseSqrt, 2 + 2.5 ULP"),
    "exp": Tolerance(ulps=6, ulps_per_abs_x=4, why="exp: 3 + 2|x| ULP"),
    "sin": Tolerance(abs_units=2 ** 12, why="sin: absolute 2^-11 on [-pi, pi]"),
    "cos": Tolerance(abs_units=2 ** 12, why="cos: absolute 2^-11 on [-pi, pi]"),
    "tanh": Tolerance(ulps=12, ulps_per_abs_x=4, abs_units=12, abs_units_per_abs_x=4,
                      why="tanh: inherited from sinh/cosh via exp (3 + 2|x| ULP each); absolute near 0"),
    "sigmoid": Tolerance(ulps=12, ulps_per_abs_x=4, why="1/(1+exp(-x)): exp 3+2|x| ULP, add 0.5, divide 2.5"),
    "silu": Tolerance(ulps=12, ulps_per_abs_x=4, why="x/(1+exp(-x)): exp 3+2|x| ULP, add 0.5, divide 2.5"),
    "hardswish": Tolerance(ulps=7, why="x*clamp(x+3,0,6)/6: add 0.5, multiply 0.5, divide 2.5 ULP"),
}

# Input domains for checks: inside the ranges the spec bounds (sin/cos on [-pi, pi]; sqrt/rsqrt > 0),
# built so the synthetic generator's values are exact in f32.
_SYMMETRIC_8 = UniformRange(scale_log2=-20, offset=-8.0)        # [-8, 8)
_SYMMETRIC_2 = UniformRange(scale_log2=-22, offset=-2.0)        # [-2, 2)
_POSITIVE_16 = UniformRange(scale_log2=-20, offset=2.0 ** -20)  # (0, 16]
INPUT_RANGES = {op: _SYMMETRIC_8 for op in UNARY_OPS} | {
    "sin": _SYMMETRIC_2, "cos": _SYMMETRIC_2, "sqrt": _POSITIVE_16, "rsqrt": _POSITIVE_16,
}


def kernel_name(op: str) -> str:
    if op not in UNARY_OPS:
        raise ValueError(f"unknown unary op {op!r}; known: {', '.join(UNARY_OPS)}")
    return f"unary_{op}"


def unary(op: str, *, src: Tensor, dst: Tensor, length: int | str | None = None,
          max_per_dim: int | None = None) -> Op:
    """dst[i] = op(src[i]) for i < length; `length` may name a live size of the plan."""
    name = kernel_name(op)
    length = src.numel if length is None else length

    def sizing(spec, live) -> Sizing:
        n = resolve_length(length, live, src, name)
        resolve_length(n, live, dst, name)
        return Sizing(workgroups=linear_grid(n, spec.invocations, max_per_dim or live_limit(live)),
                      params=spec.pack_params(length=n), bytes_moved=8 * n, flops=n)

    return single(OpCall(label=f"{name}({src.name}->{dst.name})", kernel=name, route="unary", tensors={"src": src, "dst": dst},
                         sizing=sizing))
