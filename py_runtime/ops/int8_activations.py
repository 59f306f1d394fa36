"""Activations quantized to int8 once, for the int8 Q4 linears (q4_linear.py): the decode row for the
int8x GEMVs, and where asked for every prefill row for the DP4A GEMM.

Each f32 row of x [M, K] is rounded to int8 per group of `group_size` values (scale = max|x| / 127) into
a layout built for the GEMV's loads: per row, `words` u32 [K / 4], two planes of 16 bytes per 32-value
chunk, and `stats` f32 [K / 16], per chunk (its group's scale, 8 * sum of its q); rows follow each other.
See shaders/quant/int8_activations.wgsl. Two producers write it: quantize_activations (of any f32 rows)
and rms_norm_int8x (the RMSNorm before a linear emits its output already quantized).

How many rows it holds is the caller's policy: one (the default) quantizes the decode row only, and a
prefill reads the f32 x through the f32 GEMMs; x's row count makes every step quantize its live rows,
and the prefill then takes the DP4A GEMM (q4_gemm_dp4a) where its guard passes.
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
    """The int8 form of the first `rows` rows of `x` (see the module docstring); make one with `allocate`."""

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
            raise ValueError(f"int8 activations of {self.x.name!r}: words must be u32 [rows, {k // 4}] and stats "
                             f"f32 [rows, {k // 16}], got {self.words!r} and {self.stats!r}")
        if self.rows > self.x.numel // k:
            raise ValueError(f"int8 activations of {self.x.name!r}: {self.rows} rows, but x holds {self.x.numel // k}")

    @classmethod
    async def allocate(cls, runtime, x: Tensor, group_size: int, rows: int = 1, tag: str = "") -> "Int8Activations":
        """The buffers for the int8 form of x's first `rows` rows, named after x (and `tag`, where x has
        two int8 forms): 1 for the decode alone, x's row count for the prefill's DP4A GEMM too."""
        k = x.shape[-1]
        if not 1 <= rows <= x.numel // k:
            raise ValueError(f"int8 activations of {x.name!r}: rows must be 1 to {x.numel // k}, x's rows; got {rows}")
        shape = (rows, k // 4) if rows > 1 else (k // 4,)
        name = f"{x.name}.{tag}" if tag else x.name
        return cls(x, await runtime.tensors.allocate(f"{name}.xq", shape, "u32"),
                   await runtime.tensors.allocate(f"{name}.xstats", shape[:-1] + (k // 16,)), group_size)

    @property
    def k(self) -> int:
        return self.x.shape[-1]

    @property
    def rows(self) -> int:
        """How many rows of x the buffers hold (1: the decode row only)."""
        return min(self.words.numel // (self.k // 4), self.stats.numel // (self.k // 16))

    @property
    def tensors(self) -> tuple[Tensor, Tensor]:
        """The buffers `allocate` made (to release them)."""
        return self.words, self.stats


def quantize_activations(act: Int8Activations, *, tokens: int | str = TOKENS) -> Op:
    """Quantize the live rows of act.x into act.words / act.stats: one dispatch, a row of workgroups per
    row. Activations of one row quantize the decode only and idle at more live tokens (the prefill then
    reads the f32 x); activations of more rows quantize every step's rows, at most act.rows."""
    k, gs = act.k, act.group_size
    label = f"quantize_activations({act.x.name})"

    def sizing(spec, live):
        m = live_value(tokens, live, label)
        if act.rows > 1 and m > act.rows:
            raise ValueError(f"{label}: {m} live rows, but the int8 activations hold {act.rows}")
        active = m == 1 or act.rows > 1
        return Sizing(workgroups=(-(-k // 8 // spec.invocations), m, 1) if active else IDLE,
                      params=spec.pack_params(k=k, group_size=gs),
                      bytes_moved=m * (4 * k + k + 8 * (k // 32)) if active else 0)

    return single(OpCall(label=label, kernel="int8_activations", route="int8_activations",
                         tensors={"x": act.x, "words": act.words, "stats": act.stats}, sizing=sizing,
                         phase="any" if act.rows > 1 else "decode"))


def rms_norm_int8x(*, x: Tensor, weight: Tensor, act: Int8Activations, eps: float, tokens: int | str = TOKENS) -> Op:
    """RMSNorm of x's live rows into act.x (f32, as rms_norm would write it) and their int8 quantization
    into act.words / act.stats, in one dispatch of one workgroup per row (the int8_activations kernel's
    NORM variant): the producer of an int8 linear's input emits it quantized. Activations of one row
    normalize the decode's row and idle at more live tokens (a prefill then runs rms_norm); of more rows,
    every step's rows, at most act.rows."""
    (d,) = weight.shape
    if x.shape[-1] != d or act.k != d or x.dtype != "f32" or weight.dtype != "f32":
        raise ValueError(f"rms_norm_int8x: x {x!r}, weight {weight!r} and the activations' K {act.k} must agree")
    if act.rows > x.numel // d:
        raise ValueError(f"rms_norm_int8x: the activations hold {act.rows} rows, x {x.numel // d}")
    eps32 = eps_f32(eps)
    label = f"rms_norm_int8x({x.name}->{act.x.name})"

    def sizing(spec, live):
        m = live_value(tokens, live, label)
        if act.rows > 1 and m > act.rows:
            raise ValueError(f"{label}: {m} live rows, but the int8 activations hold {act.rows}")
        active = m == 1 or act.rows > 1
        return Sizing(workgroups=(1, m, 1) if active else IDLE,
                      params=spec.pack_params(k=d, group_size=act.group_size, eps=eps32),
                      bytes_moved=m * (4 * 2 * d + d + 8 * (d // 32)) + 4 * d if active else 0,
                      flops=4 * d * m if active else 0)

    return single(OpCall(label=label, kernel="rms_norm_int8x", route="rms_norm_int8x",
                         tensors={"x": x, "words": act.words, "stats": act.stats, "w": weight, "y": act.x},
                         sizing=sizing, phase="any" if act.rows > 1 else "decode"))
