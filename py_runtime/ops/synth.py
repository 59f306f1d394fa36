"""Synthetic data generated on the GPU from (seed, stream, index), with a pure-Python twin.

The generator is counter-based, so any element can be reproduced on its own: the page checks a
sample without regenerating whole tensors, and the host oracle (numpy twin in host/oracle/)
reproduces every value bit for bit.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..dispatch import Op, OpCall, Sizing, linear_grid, live_limit, resolve_length, single
from ..tensors import Tensor

__all__ = ["UniformRange", "pcg", "synth_hash", "synth_value", "fill_uniform"]

_M32 = 0xFFFFFFFF
KERNEL = "fill_uniform"


@dataclass(frozen=True, kw_only=True)
class UniformRange:
    """Values offset + u * 2**scale_log2 for integer u in [0, 2**24): exact in f32 by construction."""

    scale_log2: int
    offset: float

    def __post_init__(self):
        step = 2.0 ** self.scale_log2
        offset_steps = self.offset / step
        if offset_steps != int(offset_steps) or not -(2 ** 24) <= offset_steps <= 1:
            raise ValueError(f"offset {self.offset} must be a multiple of 2**{self.scale_log2} in "
                             f"[-2**24, 1] steps so every value is exact in f32")
        if struct.unpack("<f", struct.pack("<f", self.offset))[0] != self.offset:
            raise ValueError(f"offset {self.offset} is not exactly representable in f32")

    @property
    def low(self) -> float:
        return self.offset

    @property
    def high(self) -> float:
        return self.offset + (2 ** 24 - 1) * 2.0 ** self.scale_log2


def pcg(v: int) -> int:
    """PCG output permutation of one LCG step (Jarzynski and Olano, 2020), on u32."""
    state = (v * 747796405 + 2891336453) & _M32
    word = (((state >> ((state >> 28) + 4)) ^ state) * 277803737) & _M32
    return ((word >> 22) ^ word) & _M32


def synth_hash(seed: int, stream: int, index: int) -> int:
    key = pcg((seed ^ pcg(stream)) & _M32)
    return pcg(pcg((index + key) & _M32) ^ key)


def synth_value(value_range: UniformRange, seed: int, stream: int, index: int) -> float:
    u = synth_hash(seed, stream, index) >> 8
    return u * 2.0 ** value_range.scale_log2 + value_range.offset


def fill_uniform(*, target: Tensor, value_range: UniformRange, seed: int, stream: int,
                 length: int | str | None = None, max_per_dim: int | None = None) -> Op:
    """Fill `target` (f32) with synthetic values; `length` may name a live size of the plan."""
    if target.dtype != "f32":
        raise ValueError(f"fill_uniform writes f32; {target!r} is {target.dtype}")
    length = target.numel if length is None else length

    def sizing(spec, live) -> Sizing:
        n = resolve_length(length, live, target, KERNEL)
        params = spec.pack_params(length=n, seed=seed & _M32, stream=stream & _M32,
                                  scale_log2=value_range.scale_log2, offset=value_range.offset)
        return Sizing(workgroups=linear_grid(n, spec.invocations, max_per_dim or live_limit(live)),
                      params=params, bytes_moved=4 * n, flops=0)

    return single(OpCall(label=f"{KERNEL}({target.name})", kernel=KERNEL, route="fill_uniform", tensors={"dst": target},
                         sizing=sizing))
