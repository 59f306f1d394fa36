"""Fused SwiGLU and the residual add, elementwise over the live rows of [S, F] / [S, D] f32 tensors.

  swiglu         out = g * sigmoid(g) * up, evaluated as g / (1 + exp(-g)) * up (one kernel instead
                 of silu then mul). Accuracy: the silu part is the unary silu's budget (exp 3 + 2|g|
                 ULP, add 0.5, divide 2.5 ULP, doubled: 12 + 4|g| ULP, ULP <= 2^-23 relative) and the
                 multiply by up adds half an ULP: |out - exact| <= ((12 + 4|g|) 2^-23 + 2^-24) |exact|.
  residual_add   out = a + b, or acc += b in place: one correctly rounded f32 add, so the result
                 equals numpy's float32 a + b bit for bit.
"""

from __future__ import annotations


from ..dispatch import Op, OpCall, Sizing, TOKENS, linear_grid, live_limit, live_value, single
from ..tensors import Tensor

__all__ = ["swiglu", "residual_add"]


def _row_sizing(name: str, width: int, tokens, tensors: tuple[Tensor, ...], *, reads: int, writes: int, flops: int):
    capacity = min(t.numel for t in tensors) // width

    def sizing(spec, live) -> Sizing:
        t = live_value(tokens, live, name)
        if not 0 <= t <= capacity:
            raise ValueError(f"{name}: {t} rows of {width}, but the tensors hold {capacity}")
        n = t * width
        groups = linear_grid(n, spec.invocations, live_limit(live)) if n else (0, 1, 1)
        return Sizing(workgroups=groups, params=spec.pack_params(length=n), bytes_moved=4 * n * (reads + writes),
                      flops=flops * n)

    return sizing


def _check(op: str, width: int, *tensors: Tensor) -> None:
    for t in tensors:
        if t.dtype != "f32" or t.shape[-1] != width:
            raise ValueError(f"{op}: {t!r} is not f32 rows of {width}")


def swiglu(*, gate: Tensor, up: Tensor, out: Tensor, tokens: int | str = TOKENS) -> Op:
    """out[:tokens] = silu(gate) * up over rows of the last dim; `tokens` may name a live size."""
    width = gate.shape[-1]
    _check("swiglu", width, gate, up, out)
    return single(OpCall(label=f"swiglu({out.name})", kernel="swiglu", route="swiglu_fused",
                         tensors={"gate": gate, "up": up, "out": out},
                         sizing=_row_sizing(f"swiglu({out.name})", width, tokens, (gate, up, out), reads=2, writes=1,
                                            flops=5)))


def residual_add(*, a: Tensor, b: Tensor, tokens: int | str = TOKENS, out: Tensor | None = None) -> Op:
    """out = a + b over the live rows, or a += b in place when out is None (or is a)."""
    width = a.shape[-1]
    if out is None or out is a:
        _check("residual_add", width, a, b)
        return single(OpCall(label=f"residual_add({a.name}+={b.name})", kernel="residual_add_inplace",
                             route="residual_add_inplace", tensors={"acc": a, "b": b},
                             sizing=_row_sizing(f"residual_add({a.name})", width, tokens, (a, b), reads=2, writes=1,
                                                flops=1)))
    _check("residual_add", width, a, b, out)
    return single(OpCall(label=f"residual_add({out.name})", kernel="residual_add", route="residual_add",
                         tensors={"a": a, "b": b, "out": out},
                         sizing=_row_sizing(f"residual_add({out.name})", width, tokens, (a, b, out), reads=2, writes=1,
                                            flops=1)))
