"""amax / amin over one dim of an up-to-4-D f32 tensor (the `extrema` kernel family).

The tensor is viewed as [outer, reduce, inner] around the reduced dim; one invocation per output
element scans `reduce` values sequentially. min/max of representable values is exact, so there is
no tolerance. keepdim only decides the output's shape metadata (a size-1 dim kept, or dropped): the
kernel and the bytes it writes are the same either way. Inputs are assumed NaN-free (WGSL leaves
min/max with a NaN operand indeterminate, where torch would propagate the NaN).
"""

from __future__ import annotations

import math

from ..dispatch import Op, OpCall, Sizing, linear_grid, live_limit, single
from ..tensors import Tensor

__all__ = ["EXTREMA_OPS", "MAX_RANK", "kernel_name", "normalize_dim", "reduced_shape", "extrema"]

EXTREMA_OPS = ("amax", "amin")
MAX_RANK = 4
ROUTE = "extrema"


def kernel_name(op: str) -> str:
    if op not in EXTREMA_OPS:
        raise ValueError(f"unknown extrema op {op!r}; known: {', '.join(EXTREMA_OPS)}")
    return f"extrema_{op}"


def normalize_dim(op: str, src: Tensor, dim: int) -> int:
    rank = len(src.shape)
    if not 1 <= rank <= MAX_RANK:
        raise ValueError(f"{op}: src {src.name!r} has rank {rank} {list(src.shape)}; 1 to {MAX_RANK} dims are supported")
    if not isinstance(dim, int) or not -rank <= dim < rank:
        raise ValueError(f"{op}: dim {dim!r} is out of range for src {src.name!r} of rank {rank} "
                         f"{list(src.shape)} (expected -{rank} .. {rank - 1})")
    return dim % rank


def reduced_shape(shape, dim: int, keepdim: bool) -> tuple[int, ...]:
    shape = tuple(shape)
    return shape[:dim] + ((1,) if keepdim else ()) + shape[dim + 1:]


def extrema(op: str, *, src: Tensor, out: Tensor, dim: int, keepdim: bool = False,
            max_per_dim: int | None = None) -> Op:
    """out = op(src, dim, keepdim): the max (amax) or min (amin) over dim."""
    name = kernel_name(op)
    for role, t in (("src", src), ("out", out)):
        if t.dtype != "f32":
            raise ValueError(f"{op}: {role} {t.name!r} is {t.dtype}; {op} takes and produces f32")
    axis = normalize_dim(op, src, dim)
    reduce = src.shape[axis]
    if reduce == 0:
        raise ValueError(f"{op}: dim {dim} of src {src.name!r} {list(src.shape)} is empty; there is no extremum")
    expected = reduced_shape(src.shape, axis, keepdim)
    if tuple(out.shape) != expected:
        raise ValueError(f"{op}: out {out.name!r} has shape {list(out.shape)}, but {op} of src {src.name!r} "
                         f"{list(src.shape)} over dim {dim} (keepdim={keepdim}) has shape {list(expected)}")
    outer = math.prod(src.shape[:axis])
    inner = math.prod(src.shape[axis + 1:])
    n = outer * inner

    def sizing(spec, live) -> Sizing:
        return Sizing(workgroups=linear_grid(n, spec.invocations, max_per_dim or live_limit(live)),
                      params=spec.pack_params(outer=outer, reduce=reduce, inner=inner, length=n),
                      bytes_moved=4 * (src.numel + n), flops=src.numel)

    return single(OpCall(label=f"{name}({src.name}->{out.name}, dim={dim})", kernel=name, route=ROUTE,
                         tensors={"src": src, "dst": out}, sizing=sizing))
