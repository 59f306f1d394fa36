"""RMSNorm over the last dim of row-major f32 rows: y = x / sqrt(mean(x^2) + eps) * w.

One op serves the decoder's hidden-size norms (rows = live tokens) and Qwen3's per-head q/k norms
(rows = live tokens * heads, d = head_dim): the kernel only sees rows of length d.

Routes:
  rms_norm            one workgroup per row, tree reduction over workgroup memory (every adapter)
  rms_norm_subgroup   one workgroup per row, subgroupAdd then an atomic-slot combine; needs the
                      device feature 'subgroups'. Naga (wgpu-native) and Tint (Chromium) disagree
                      on `enable subgroups;`, so each compiler gets its own expansion of the family.

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

from ..dispatch import OpCall, Sizing, linear_grid, live_limit, live_value
from ..tensors import Tensor

__all__ = ["rms_norm", "rms_norm_kernel", "subgroups_available", "eps_f32", "ROUTES"]

ROUTES = ("rms_norm", "rms_norm_subgroup")
_SMALL_ROW = 256        # rows up to this long (head_dim) use the 64-invocation variant


def subgroups_available(adapter) -> bool:
    return "subgroups" in adapter.device_features


def eps_f32(eps: float) -> float:
    """eps rounded to the f32 a norm kernel reads from its params."""
    return struct.unpack("<f", struct.pack("<f", eps))[0]


def rms_norm_kernel(d: int, *, subgroup: bool) -> tuple[str, int]:
    """(kernel name, workgroup size) for rows of length d."""
    wg = 64 if d <= _SMALL_ROW else 256
    return f"rms_norm{'_subgroup' if subgroup else ''}_wg{wg}", wg


def rms_norm(*, x: Tensor, weight: Tensor, out: Tensor, tokens: int | str, eps: float, heads: int = 1,
             subgroup: bool = False) -> OpCall:
    """out[r] = rms_norm(x[r]) * weight for r < tokens * heads; `tokens` may name a live size.

    x and out hold rows of len(weight) (e.g. [S, D], or [S, H, head_dim] with heads=H); the weight
    is shared by every row (Qwen3's q/k norms share one [head_dim] weight across heads).
    """
    (d,) = weight.shape
    if x.shape[-1] != d or out.shape[-1] != d or x.dtype != "f32" or out.dtype != "f32":
        raise ValueError(f"rms_norm: x {x!r} and out {out!r} must be f32 rows of len(weight) = {d}")
    if heads < 1 or d < 1:
        raise ValueError(f"rms_norm: heads {heads} and d {d} must be positive")
    kernel, _ = rms_norm_kernel(d, subgroup=subgroup)
    capacity = min(x.numel, out.numel) // d
    eps32 = eps_f32(eps)

    def sizing(spec, live) -> Sizing:
        t = live_value(tokens, live, "rms_norm")
        rows = t * heads
        if not 0 <= rows <= capacity:
            raise ValueError(f"rms_norm({out.name}): {t} tokens x {heads} heads = {rows} rows, "
                             f"but x/out hold {capacity}")
        # One workgroup per row (2-D past the per-dimension limit); zero rows dispatch nothing.
        groups = linear_grid(rows, 1, live_limit(live)) if rows else (0, 1, 1)
        return Sizing(workgroups=groups, params=struct.pack("<IIf", rows, d, eps32),
                      bytes_moved=4 * (2 * rows * d + d), flops=4 * rows * d)

    return OpCall(label=f"rms_norm({x.name}->{out.name})", kernel=kernel,
                  route="rms_norm_subgroup" if subgroup else "rms_norm",
                  tensors={"x": x, "w": weight, "y": out}, sizing=sizing)
