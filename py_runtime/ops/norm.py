"""RMSNorm over the last dim of row-major f32 rows: y = x / sqrt(mean(x^2) + eps) * w.

One op serves the decoder's hidden-size norms (rows = live tokens) and Qwen3's per-head q/k norms
(rows = live tokens * heads, d = head_dim): the kernel only sees rows of length d.

Routes (ROUTES, the first whose guard passes):
  rms_norm_subgroup   one workgroup per row, subgroupAdd then an atomic-slot combine; needs the
                      device feature 'subgroups' (one expansion serves Tint and Naga: gpu/native.py)
  rms_norm            one workgroup per row, tree reduction over workgroup memory (every adapter)

Accuracy (what the host oracle allows, host/oracle/decoder_blocks.py rms_norm_relative_bound; u = 2^-24): each
square is rounded once and goes through at most h - 1 additions, so the row's sum of squares is
within gamma_h = h u / (1 - h u) relative whatever the summation order; the division by d
(2.5 ULP = 5u), the add of eps (u) and eps's own rounding to f32 (u) add 7u; the square root
halves all of that; inverseSqrt (2 ULP = 4u) and the two multiplies (u each) follow:
|y - exact| <= ((gamma_h + 7u) / 2 + 6u) |exact| to first order, with
  h = ceil(d / WG) + 1 + log2(WG)            on the workgroup route (per-invocation chain, tree),
  h = ceil(d / WG) + 1 + 127 + WG / 4        on the subgroup route (subgroupAdd's order is
                                             unspecified: up to 128 lanes in a chain, then up to
                                             WG / 4 subgroup sums added in sequence).
That is ~1e-6 relative on the workgroup route at d = 2048 and ~6e-6 on the subgroup route.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..dispatch import Op, OpCall, Sizing, TOKENS, linear_grid, live_limit, live_value
from ..routing import Route, choose
from ..tensors import Tensor

__all__ = ["rms_norm", "rms_norm_kernel", "eps_f32", "ROUTES"]

_SMALL_ROW = 256        # rows up to this long (head_dim) use the 64-invocation variant


def eps_f32(eps: float) -> float:
    """eps rounded to the f32 a norm kernel reads from its params."""
    return struct.unpack("<f", struct.pack("<f", eps))[0]


def rms_norm_kernel(d: int, *, subgroup: bool) -> tuple[str, int]:
    """(kernel name, workgroup size) for rows of length d."""
    wg = 64 if d <= _SMALL_ROW else 256
    return f"rms_norm{'_subgroup' if subgroup else ''}_wg{wg}", wg


@dataclass(frozen=True)
class _Norm:
    x: Tensor
    weight: Tensor
    out: Tensor
    tokens: int | str
    eps: float
    heads: int
    adapter: object


def _build(subgroup: bool):
    def build(req: _Norm) -> OpCall:
        x, out, heads = req.x, req.out, req.heads
        (d,) = req.weight.shape
        capacity = min(x.numel, out.numel) // d
        eps32 = eps_f32(req.eps)

        def sizing(spec, live) -> Sizing:
            t = live_value(req.tokens, live, "rms_norm")
            rows = t * heads
            if not 0 <= rows <= capacity:
                raise ValueError(f"rms_norm({out.name}): {t} tokens x {heads} heads = {rows} rows, "
                                 f"but x/out hold {capacity}")
            # One workgroup per row (2-D past the per-dimension limit); zero rows dispatch nothing.
            groups = linear_grid(rows, 1, live_limit(live)) if rows else (0, 1, 1)
            return Sizing(workgroups=groups, params=spec.pack_params(rows=rows, d=d, eps=eps32),
                          bytes_moved=4 * (2 * rows * d + d), flops=4 * rows * d)

        return OpCall(label=f"rms_norm({x.name}->{out.name})", kernel=rms_norm_kernel(d, subgroup=subgroup)[0],
                      route="rms_norm_subgroup" if subgroup else "rms_norm",
                      tensors={"x": x, "w": req.weight, "y": out}, sizing=sizing)
    return build


ROUTES = (
    Route(name="rms_norm_subgroup", build=_build(subgroup=True),
          guard=lambda req: None if "subgroups" in req.adapter.device_features else "needs the 'subgroups' feature"),
    Route(name="rms_norm", build=_build(subgroup=False)),
)


def rms_norm(*, x: Tensor, weight: Tensor, out: Tensor, eps: float, adapter, tokens: int | str = TOKENS,
             heads: int = 1, force: str | None = None) -> Op:
    """out[r] = rms_norm(x[r]) * weight for r < tokens * heads; `tokens` may name a live size.

    x and out hold rows of len(weight) (e.g. [S, D], or [S, H, head_dim] with heads=H); the weight
    is shared by every row (Qwen3's q/k norms share one [head_dim] weight across heads). `force` runs
    the named route (its guard must pass).
    """
    (d,) = weight.shape
    if x.shape[-1] != d or out.shape[-1] != d or x.dtype != "f32" or out.dtype != "f32":
        raise ValueError(f"rms_norm: x {x!r} and out {out!r} must be f32 rows of len(weight) = {d}")
    if heads < 1 or d < 1:
        raise ValueError(f"rms_norm: heads {heads} and d {d} must be positive")
    label = f"rms_norm({x.name}->{out.name})"
    request = _Norm(x, weight, out, tokens, eps, heads, adapter)
    route, decision = choose(ROUTES, request, op=label, slot="norm", force=force)
    return Op(label, (route.build(request),), (decision,))
