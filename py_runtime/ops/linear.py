"""Linear layers: out[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n]).

`has_bias` is an immutable control packed into the params on every sizing, so a resize of the live
row count (prefill M tokens, then decode M = 1) can never drop it.
"""

from __future__ import annotations


from ..dispatch import Op, OpCall, Sizing, TOKENS, linear_grid, live_limit, live_value, single
from ..tensors import Tensor

__all__ = ["linear_f32"]


def linear_f32(*, x: Tensor, w: Tensor, out: Tensor, bias: Tensor | None = None, tokens: int | str = TOKENS) -> Op:
    """Plain f32 linear; `tokens` (M) may name a live size. Shapes: x [>=M, K], w [N, K], out [>=M, N]."""
    n, k = w.shape
    if x.shape[-1] != k or out.shape[-1] != n or (bias is not None and bias.shape != (n,)):
        raise ValueError(f"linear_f32: x {list(x.shape)}, w {list(w.shape)}, out {list(out.shape)}, "
                         f"bias {list(bias.shape) if bias else None} do not fit [M,K] x [N,K] -> [M,N]")
    capacity = min(x.numel // k, out.numel // n)

    def sizing(spec, live) -> Sizing:
        m = live_value(tokens, live, "linear_f32")
        if not 0 <= m <= capacity:
            raise ValueError(f"linear_f32({out.name}): {m} rows, but x/out hold {capacity}")
        return Sizing(workgroups=linear_grid(m * n, spec.invocations, live_limit(live)),
                      params=spec.pack_params(m=m, k=k, n=n, has_bias=bias is not None),
                      bytes_moved=4 * (m * k + n * k + m * n + (n if bias is not None else 0)), flops=2 * m * n * k)

    # Without a bias, binding 2 aliases w (read-only aliasing is allowed) and has_bias = 0 ignores it.
    return single(OpCall(label=f"linear_f32({out.name})", kernel="linear_f32", route="linear_f32_naive",
                  tensors={"x": x, "w": w, "bias": bias if bias is not None else w, "out": out}, sizing=sizing))
