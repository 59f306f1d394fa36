"""Synthetic i32, bool and f16 data on the GPU: the fill_uniform family's other variants.

Same counter-based hash as fill_uniform (ops/synth.py), integer arithmetic only, so the pure-Python
twins here and the numpy twins in host/oracle/ reproduce every bit:

  fill_i32   value = low + (h % span) (wrapping in u32, span 0 = 2**32: every i32)
  fill_bool  value = h >> 31, one byte per element, four to a u32 word
  fill_f16   bits  = sign (h bit 31) | exponent field (exponent_min + (h >> 10 & 0xFFFF) % exponent_span)
             | mantissa (h & 0x3FF), two per u32 word

with h = hash(seed, stream, i). The packed variants run one invocation per word and leave the
bytes past the length in a partial last word untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dispatch import Op, OpCall, Sizing, linear_grid, live_limit, single
from ..tensors import Tensor
from .synth import synth_hash

__all__ = ["I32Range", "F16Exponents", "fill_i32", "fill_bool", "fill_f16", "i32_value", "bool_value",
           "f16_bits", "PACKED_PER_WORD", "ROUTE"]

_M32 = 0xFFFFFFFF
ROUTE = "fill_typed"
PACKED_PER_WORD = {"bool": 4, "f16": 2}


@dataclass(frozen=True, kw_only=True)
class I32Range:
    """Integers in [low, low + span); span 0 means 2**32 (every i32, low must then be -2**31)."""

    low: int
    span: int

    def __post_init__(self):
        if not -(2 ** 31) <= self.low < 2 ** 31 or not 0 <= self.span < 2 ** 32:
            raise ValueError(f"I32Range(low={self.low}, span={self.span}): low must be an i32, span a u32")
        top = self.low + (self.span or 2 ** 32) - 1
        if top >= 2 ** 31:
            raise ValueError(f"I32Range(low={self.low}, span={self.span}) reaches {top}, past the largest i32")

    def to_json(self) -> dict:
        return {"low": self.low, "span": self.span}


@dataclass(frozen=True, kw_only=True)
class F16Exponents:
    """Exponent fields exponent_min .. exponent_min + exponent_span - 1, inside [1, 30]: normal, finite f16."""

    exponent_min: int = 1
    exponent_span: int = 30

    def __post_init__(self):
        if self.exponent_span < 1 or self.exponent_min < 1 or self.exponent_min + self.exponent_span - 1 > 30:
            raise ValueError(f"F16Exponents({self.exponent_min}, {self.exponent_span}): exponent fields must "
                             f"stay in [1, 30] (normal, finite f16)")

    def to_json(self) -> dict:
        return {"exponent_min": self.exponent_min, "exponent_span": self.exponent_span}


def i32_value(value_range: I32Range, seed: int, stream: int, index: int) -> int:
    h = synth_hash(seed, stream, index)
    step = h % value_range.span if value_range.span else h
    word = (value_range.low + step) & _M32
    return word - 2 ** 32 if word >= 2 ** 31 else word


def bool_value(seed: int, stream: int, index: int) -> int:
    return synth_hash(seed, stream, index) >> 31


def f16_bits(exponents: F16Exponents, seed: int, stream: int, index: int) -> int:
    h = synth_hash(seed, stream, index)
    exponent = exponents.exponent_min + ((h >> 10) & 0xFFFF) % exponents.exponent_span
    return ((h >> 31) << 15) | (exponent << 10) | (h & 0x3FF)


def _fill(kernel: str, target: Tensor, dtype: str, fields: dict, max_per_dim: int | None) -> Op:
    if target.dtype != dtype:
        raise ValueError(f"{kernel} writes {dtype}; {target!r} is {target.dtype}")
    n = target.numel
    per_word = PACKED_PER_WORD.get(dtype, 1)
    element_bytes = 4 // per_word

    def sizing(spec, live) -> Sizing:
        invocations = -(-n // per_word)
        return Sizing(workgroups=linear_grid(invocations, spec.invocations, max_per_dim or live_limit(live)),
                      params=spec.pack_params(length=n, **fields), bytes_moved=element_bytes * n, flops=0)

    return single(OpCall(label=f"{kernel}({target.name})", kernel=kernel, route=ROUTE, tensors={"dst": target},
                         sizing=sizing))


def fill_i32(*, target: Tensor, value_range: I32Range, seed: int, stream: int,
             max_per_dim: int | None = None) -> Op:
    """Fill every element of an i32 tensor with low + (hash % span)."""
    return _fill("fill_i32", target, "i32",
                 dict(seed=seed & _M32, stream=stream & _M32, low=value_range.low, span=value_range.span), max_per_dim)


def fill_bool(*, target: Tensor, seed: int, stream: int, max_per_dim: int | None = None) -> Op:
    """Fill every element of a bool tensor with 0 or 1 (the hash's top bit)."""
    return _fill("fill_bool", target, "bool",
                 dict(seed=seed & _M32, stream=stream & _M32, exponent_min=0, exponent_span=1), max_per_dim)


def fill_f16(*, target: Tensor, exponents: F16Exponents, seed: int, stream: int,
             max_per_dim: int | None = None) -> Op:
    """Fill every element of an f16 tensor with a normal, finite f16 from the hash."""
    return _fill("fill_f16", target, "f16",
                 dict(seed=seed & _M32, stream=stream & _M32, exponent_min=exponents.exponent_min,
                      exponent_span=exponents.exponent_span), max_per_dim)
