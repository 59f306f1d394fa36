"""Synthetic data generated on the GPU from (seed, stream, index), with a pure-Python twin.

The generator is counter-based, so any element can be reproduced on its own: the page checks a
sample without regenerating whole tensors, and the host oracle (numpy twin in host/oracle.py)
reproduces every value bit for bit.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..gpu.device import BufferUsage, Dispatch, Handle
from .grid import linear_grid

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


async def fill_uniform(runtime, *, target: Handle, length: int, value_range: UniformRange,
                       seed: int, stream: int, max_per_dim: int | None = None) -> Dispatch:
    spec, pipeline = await runtime.pipelines.get(KERNEL)
    params = struct.pack("<IIIif", length, seed & _M32, stream & _M32, value_range.scale_log2, value_range.offset)
    uniform = runtime.uniform(f"{KERNEL}.params", params)
    bind_group = runtime.device.create_bind_group(
        label=f"{KERNEL}[{length}]", pipeline=pipeline, buffers={0: target, 1: uniform})
    grid = linear_grid(length, spec.invocations, max_per_dim or runtime.max_workgroups_per_dim)
    return Dispatch(label=KERNEL, pipeline=pipeline, bind_group=bind_group, workgroups=grid)
