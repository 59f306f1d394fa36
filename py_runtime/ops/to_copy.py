"""Dtype conversions, torch's to_copy (the `to_copy` kernel family). Same shape in and out.

What each conversion guarantees, from the WGSL spec's scalar conversion rules:
  f32 -> i32   i32(x) rounds toward zero. Out of range it clamps: the result is the i32 closest to
               trunc(x) that is also an f32, i.e. -2^31 below, 2147483520 (= 2^31 - 128) above.
               NaN gives an indeterminate value (never produced by these checks).
  i32 -> f32   exact for |v| <= 2^24; beyond, v lies between two f32 values and the result is one
               of them (WGSL does not fix which; round-to-nearest-even is the usual choice).
  f32 -> f16   pack2x16float: correctly rounded, i.e. exact or one of the two neighbouring f16
               values. Outside the finite f16 range [-65504, 65504] the rounding may overflow to an
               infinity, which is an indeterminate value under WGSL's finite-math assumption, so
               inputs must stay inside the range. Results in the f16 subnormal range may be flushed
               to zero. Stored two per u32 word; an odd length leaves the last word's high half as it was.
  f16 -> f32   unpack2x16float: exact (every f16 is an f32; f16 subnormals may be flushed to zero).
  bool -> f32  1.0 for a nonzero byte, else 0.0: exact.
"""

from __future__ import annotations


from ..dispatch import Op, OpCall, Sizing, linear_grid, live_limit, single
from ..tensors import DTYPE_BYTES, Tensor

__all__ = ["CONVERSIONS", "GUARANTEES", "kernel_name", "to_copy"]

# (source dtype, destination dtype) -> (kernel, elements per invocation)
CONVERSIONS = {
    ("f32", "i32"): ("to_copy_f32_i32", 1),
    ("i32", "f32"): ("to_copy_i32_f32", 1),
    ("f32", "f16"): ("to_copy_f32_f16", 2),
    ("f16", "f32"): ("to_copy_f16_f32", 1),
    ("bool", "f32"): ("to_copy_bool_f32", 1),
}
ROUTE = "to_copy"
GUARANTEES = {
    "f32->i32": "exact: trunc(x), clamped to [-2^31, 2^31 - 128] out of range",
    "i32->f32": "exact for |v| <= 2^24, else either neighbouring f32 (nearest-even counted, not required)",
    "f32->f16": "exact or either neighbouring f16 inside [-65504, 65504]; f16-subnormal results may flush to 0",
    "f16->f32": "exact",
    "bool->f32": "exact: 1.0 for a nonzero byte, else 0.0",
}


def kernel_name(src_dtype: str, dst_dtype: str) -> str:
    pair = (src_dtype, dst_dtype)
    if pair not in CONVERSIONS:
        known = ", ".join(f"{s}->{d}" for s, d in CONVERSIONS)
        raise ValueError(f"to_copy: no conversion {src_dtype} -> {dst_dtype}; known: {known}")
    return CONVERSIONS[pair][0]


def to_copy(*, src: Tensor, out: Tensor, max_per_dim: int | None = None) -> Op:
    """out = src converted to out.dtype; shapes must match."""
    try:
        name = kernel_name(src.dtype, out.dtype)
    except ValueError as error:
        raise ValueError(f"{error} (src {src.name!r}, out {out.name!r})") from None
    if tuple(src.shape) != tuple(out.shape):
        raise ValueError(f"to_copy: src {src.name!r} has shape {list(src.shape)} but out {out.name!r} has "
                         f"{list(out.shape)}; to_copy keeps the shape")
    per_invocation = CONVERSIONS[(src.dtype, out.dtype)][1]
    n = src.numel

    def sizing(spec, live) -> Sizing:
        return Sizing(workgroups=linear_grid(-(-n // per_invocation), spec.invocations,
                                             max_per_dim or live_limit(live)),
                      params=spec.pack_params(length=n),
                      bytes_moved=n * (DTYPE_BYTES[src.dtype] + DTYPE_BYTES[out.dtype]), flops=n)

    return single(OpCall(label=f"{name}({src.name}->{out.name})", kernel=name, route=ROUTE, tensors={"src": src, "dst": out},
                         sizing=sizing))
