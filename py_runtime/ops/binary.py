"""Elementwise binary operators on f32 with numpy-style broadcasting (the `binary` kernel family).

Shapes are right-aligned; a dim of size 1 (or a missing leading dim) broadcasts; a scalar is rank 0.
Up to 4 dims. The params carry the output dims and each input's element strides in 4 slots, with
stride 0 on every dim an input broadcasts, so the kernel reads both inputs in place.

Accuracy (WGSL spec, f32): + - * are correctly rounded (the result is the exact value when
representable, else one of its two f32 neighbours: WGSL fixes no rounding mode); min/max are exact;
x / y is within 2.5 ULP for |y| in [2^-126, 2^126]; floor is exact, so floor_divide = floor(a / b)
inherits the division's error; pow(x, y) is inherited from exp2(y * log2(x)) and only defined for
x > 0. host/oracle/ turns these into per-element bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..dispatch import Op, OpCall, Sizing, linear_grid, live_limit, single
from ..tensors import Tensor
from .synth import UniformRange

__all__ = ["BINARY_OPS", "MAX_RANK", "TOLERANCES", "INPUT_RANGES", "DIVISOR_RANGES", "BinaryTolerance",
           "kernel_name", "broadcast_shape", "broadcast_strides", "binary"]

BINARY_OPS = ("add", "sub", "mul", "div", "minimum", "maximum", "pow", "floor_divide")
MAX_RANK = 4
ROUTE = "binary"


@dataclass(frozen=True, kw_only=True)
class BinaryTolerance:
    kind: str           # how host/oracle/ bounds each element (see binary_bounds there)
    why: str


TOLERANCES = {
    "add": BinaryTolerance(kind="correctly_rounded", why="a + b: correctly rounded (exact, or one of the two f32 "
                                                         "neighbours of the exact sum)"),
    "sub": BinaryTolerance(kind="correctly_rounded", why="a - b: correctly rounded"),
    "mul": BinaryTolerance(kind="correctly_rounded", why="a * b: correctly rounded"),
    "div": BinaryTolerance(kind="div", why="a / b: 2.5 ULP of the exact quotient for |b| in [2^-126, 2^126]"),
    "minimum": BinaryTolerance(kind="exact", why="min(a, b): correctly rounded of a representable value = exact"),
    "maximum": BinaryTolerance(kind="exact", why="max(a, b): exact"),
    "pow": BinaryTolerance(kind="pow", why="inherited from exp2(b * log2(a)), a > 0: log2 abs 2^-21 on [0.5, 2] "
                                           "else 3 ULP; the product correctly rounded; exp2 3 + 2|p| ULP"),
    "floor_divide": BinaryTolerance(kind="floor_divide", why="floor(a / b): floor is exact, so the result is "
                                    "floor(q') for some q' within 2.5 ULP of a/b: any integer in "
                                    "[floor(q - 2.5ulp), floor(q + 2.5ulp)] (two choices only where a/b is "
                                    "within 2.5 ULP of an integer)"),
}

# Check inputs (exact in f32 by construction). Divisors have one sign per range and never reach 0
# (|b| >= 2^-21, inside the [2^-126, 2^126] where the division bound holds; small |b| give large
# quotients); pow bases are positive, where pow is defined.
_SYMMETRIC_8 = UniformRange(scale_log2=-20, offset=-8.0)              # [-8, 8)
_POSITIVE_DIVISOR = UniformRange(scale_log2=-21, offset=2.0 ** -21)   # (0, 8]
_NEGATIVE_DIVISOR = UniformRange(scale_log2=-21, offset=-8.0)         # [-8, 0)
_POW_BASE = UniformRange(scale_log2=-22, offset=2.0 ** -22)           # (0, 4]
_POW_EXPONENT = UniformRange(scale_log2=-21, offset=-4.0)             # [-4, 4)
DIVISOR_RANGES = (_POSITIVE_DIVISOR, _NEGATIVE_DIVISOR)
INPUT_RANGES = {op: (_SYMMETRIC_8, _SYMMETRIC_8) for op in BINARY_OPS} | {
    "div": (_SYMMETRIC_8, _POSITIVE_DIVISOR),
    "floor_divide": (_SYMMETRIC_8, _POSITIVE_DIVISOR),
    "pow": (_POW_BASE, _POW_EXPONENT),
}


def kernel_name(op: str) -> str:
    if op not in BINARY_OPS:
        raise ValueError(f"unknown binary op {op!r}; known: {', '.join(BINARY_OPS)}")
    return f"binary_{op}"


def broadcast_shape(op: str, a: Tensor, b: Tensor) -> tuple[int, ...]:
    """numpy's broadcast of a.shape and b.shape (right-aligned; size-1 dims stretch), or a ValueError."""
    for role, t in (("a", a), ("b", b)):
        if len(t.shape) > MAX_RANK:
            raise ValueError(f"binary {op}: {role} {t.name!r} has rank {len(t.shape)} {list(t.shape)}; "
                             f"at most {MAX_RANK} dims are supported")
    rank = max(len(a.shape), len(b.shape))
    pa = (1,) * (rank - len(a.shape)) + tuple(a.shape)
    pb = (1,) * (rank - len(b.shape)) + tuple(b.shape)
    out = []
    for axis, (da, db) in enumerate(zip(pa, pb)):
        if da != db and da != 1 and db != 1:
            raise ValueError(f"binary {op}: shapes {list(a.shape)} (a {a.name!r}) and {list(b.shape)} (b {b.name!r}) "
                             f"do not broadcast: dim {axis - rank} is {da} vs {db} (sizes must match or be 1)")
        out.append(db if da == 1 else da)
    return tuple(out)


def broadcast_strides(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a contiguous `shape` read as `out_shape`, right-aligned into MAX_RANK slots,
    0 on every broadcast (or absent) dim."""
    padded = (1,) * (MAX_RANK - len(shape)) + tuple(shape)
    out = (1,) * (MAX_RANK - len(out_shape)) + tuple(out_shape)
    strides, step = [0] * MAX_RANK, 1
    for axis in range(MAX_RANK - 1, -1, -1):
        strides[axis] = step if padded[axis] == out[axis] and padded[axis] != 1 else 0
        step *= padded[axis]
    return tuple(strides)


def binary(op: str, *, a: Tensor, b: Tensor, out: Tensor, max_per_dim: int | None = None) -> Op:
    """out = op(a, b) with broadcasting; `out` must have exactly the broadcast shape."""
    name = kernel_name(op)
    for role, t in (("a", a), ("b", b), ("out", out)):
        if t.dtype != "f32":
            raise ValueError(f"binary {op}: {role} {t.name!r} is {t.dtype}; binary ops take and produce f32")
    shape = broadcast_shape(op, a, b)
    if tuple(out.shape) != shape:
        raise ValueError(f"binary {op}: out {out.name!r} has shape {list(out.shape)}, but {list(a.shape)} (a {a.name!r}) "
                         f"and {list(b.shape)} (b {b.name!r}) broadcast to {list(shape)}")
    n = math.prod(shape)
    dims = (1,) * (MAX_RANK - len(shape)) + shape
    a_strides, b_strides = broadcast_strides(a.shape, shape), broadcast_strides(b.shape, shape)

    def sizing(spec, live) -> Sizing:
        return Sizing(workgroups=linear_grid(n, spec.invocations, max_per_dim or live_limit(live)),
                      params=spec.pack_params(shape=dims, a_strides=a_strides, b_strides=b_strides, length=n),
                      bytes_moved=4 * (a.numel + b.numel + n), flops=n)

    return single(OpCall(label=f"{name}({a.name},{b.name}->{out.name})", kernel=name, route=ROUTE,
                         tensors={"lhs": a, "rhs": b, "out": out}, sizing=sizing))
