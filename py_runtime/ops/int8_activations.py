"""Activations quantized to int8 once per decode row, for the int8x Q4 GEMVs (q4_linear.py).

An f32 row x [1, K] is rounded to int8 per group of `group_size` values (scale = max|x| / 127) into a
layout built for the GEMV's loads: `words` u32 [K / 4], two planes of 16 bytes per 32-value chunk, and
`stats` f32 [K / 16], per chunk (its group's scale, 8 * sum of its q). See
shaders/quant/int8_activations.wgsl. Two producers write it: quantize_activations (of any f32 row) and
rms_norm_int8x (the RMSNorm before a linear emits its output already quantized).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dispatch import Op, OpCall, Sizing, IDLE, TOKENS, live_value, single
from ..tensors import Tensor
from .norm import eps_f32
from .q4 import GROUP_SIZES

__all__ = ["Int8Activations", "quantize_activations", "rms_norm_int8x"]


@dataclass(frozen=True)
class Int8Activations:
    """The int8 form of the decode row `x` (see the module docstring); make one with `allocate`."""

    x: Tensor
    words: Tensor
    stats: Tensor
    group_size: int

    def __post_init__(self):
        k = self.x.shape[-1]
        if self.group_size not in GROUP_SIZES or k % self.group_size:
            raise ValueError(f"int8 activations of {self.x.name!r}: K {k} must be a multiple of the group size "
                             f"{self.group_size}, one of {GROUP_SIZES}")
        if self.words.dtype != "u32" or self.words.numel < k // 4 or self.stats.dtype != "f32" or \
                self.stats.numel < k // 16:
            raise ValueError(f"int8 activations of {self.x.name!r}: words must be u32 [{k // 4}] and stats f32 "
                             f"[{k // 16}], got {self.words!r} and {self.stats!r}")

    @classmethod
    async def allocate(cls, runtime, x: Tensor, group_size: int) -> "Int8Activations":
        """The buffers for x's int8 form, named after x."""
        k = x.shape[-1]
        return cls(x, await runtime.tensors.allocate(f"{x.name}.xq", (k // 4,), "u32"),
                   await runtime.tensors.allocate(f"{x.name}.xstats", (k // 16,)), group_size)

    @property
    def k(self) -> int:
        return self.x.shape[-1]

    @property
    def tensors(self) -> tuple[Tensor, Tensor]:
        """The buffers `allocate` made (to release them)."""
        return self.words, self.stats


def quantize_activations(act: Int8Activations, *, tokens: int | str = TOKENS) -> Op:
    """Quantize act.x into act.words / act.stats: one dispatch, idle unless the live token count is 1
    (the decode: prefill linears read the f32 x)."""
    k, gs = act.k, act.group_size

    def sizing(spec, live):
        active = live_value(tokens, live, "quantize_activations") == 1
        return Sizing(workgroups=(-(-k // 8 // spec.invocations), 1, 1) if active else IDLE,
                      params=spec.pack_params(k=k, group_size=gs), bytes_moved=(4 * k + k + 8 * (k // 32)) if active else 0)

    return single(OpCall(label=f"quantize_activations({act.x.name})", kernel="int8_activations",
                         route="int8_activations", tensors={"x": act.x, "words": act.words, "stats": act.stats},
                         sizing=sizing, phase="decode"))


def rms_norm_int8x(*, x: Tensor, weight: Tensor, act: Int8Activations, eps: float, tokens: int | str = TOKENS) -> Op:
    """RMSNorm of the decode's one row into act.x (f32, as rms_norm would write it) and its int8
    quantization into act.words / act.stats, in one dispatch (the int8_activations kernel's NORM
    variant): the producer of an int8x GEMV's input emits it quantized. Idle unless the live token
    count is 1; a prefill runs rms_norm."""
    (d,) = weight.shape
    if x.shape[-1] != d or act.k != d or x.dtype != "f32" or weight.dtype != "f32":
        raise ValueError(f"rms_norm_int8x: x {x!r}, weight {weight!r} and the activations' K {act.k} must agree")
    eps32 = eps_f32(eps)

    def sizing(spec, live):
        active = live_value(tokens, live, "rms_norm_int8x") == 1
        return Sizing(workgroups=(1, 1, 1) if active else IDLE,
                      params=spec.pack_params(k=d, group_size=act.group_size, eps=eps32),
                      bytes_moved=(4 * 3 * d + d + 8 * (d // 32)) if active else 0, flops=4 * d if active else 0)

    return single(OpCall(label=f"rms_norm_int8x({x.name}->{act.x.name})", kernel="rms_norm_int8x",
                         route="rms_norm_int8x",
                         tensors={"x": x, "words": act.words, "stats": act.stats, "w": weight, "y": act.x},
                         sizing=sizing, phase="decode"))
