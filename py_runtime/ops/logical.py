"""Logical operators on bool tensors (the `logical` kernel family): and, or, xor (binary) and not.

bool is stored one byte per element (0 or 1), four to a u32 word; the kernels run one invocation
per word and write a partial last word through a mask, so the bytes past the length are kept.
Inputs must have the same shape (no broadcasting here: use the binary family's f32 path for that).
Any nonzero input byte counts as true; outputs are exactly 0 or 1. Exact: no tolerance.
"""

from __future__ import annotations


from ..dispatch import Op, OpCall, Sizing, linear_grid, live_limit, single
from ..tensors import Tensor

__all__ = ["LOGICAL_OPS", "UNARY_LOGICAL_OPS", "kernel_name", "logical"]

LOGICAL_OPS = ("and", "or", "xor", "not")
UNARY_LOGICAL_OPS = ("not",)
ROUTE = "logical"


def kernel_name(op: str) -> str:
    if op not in LOGICAL_OPS:
        raise ValueError(f"unknown logical op {op!r}; known: {', '.join(LOGICAL_OPS)}")
    return f"logical_{op}"


def logical(op: str, *, a: Tensor, out: Tensor, b: Tensor | None = None, max_per_dim: int | None = None) -> Op:
    """out = a OP b elementwise (out = not a for `not`); all bool, all the same shape."""
    name = kernel_name(op)
    unary = op in UNARY_LOGICAL_OPS
    if unary and b is not None:
        raise ValueError(f"logical {op}: is unary, but got b {b.name!r}")
    if not unary and b is None:
        raise ValueError(f"logical {op}: needs b (a second bool tensor)")
    roles = [("a", a)] + ([] if unary else [("b", b)]) + [("out", out)]
    for role, t in roles:
        if t.dtype != "bool":
            raise ValueError(f"logical {op}: {role} {t.name!r} is {t.dtype}; logical ops take and produce bool")
    for role, t in roles[1:]:
        if tuple(t.shape) != tuple(a.shape):
            raise ValueError(f"logical {op}: {role} {t.name!r} has shape {list(t.shape)}, a {a.name!r} has "
                             f"{list(a.shape)}; logical ops need equal shapes (no broadcasting)")
    n = a.numel
    tensors = {"lhs": a, "out": out} if unary else {"lhs": a, "rhs": b, "out": out}

    def sizing(spec, live) -> Sizing:
        return Sizing(workgroups=linear_grid(-(-n // 4), spec.invocations, max_per_dim or live_limit(live)),
                      params=spec.pack_params(length=n), bytes_moved=n * len(roles), flops=n)

    label = f"{name}({a.name}{'' if unary else ',' + b.name}->{out.name})"
    return single(OpCall(label=label, kernel=name, route=ROUTE, tensors=tensors, sizing=sizing))
