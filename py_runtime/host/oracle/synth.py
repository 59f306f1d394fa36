"""numpy twins of the GPU generators (counter-based hash, typed fills, weight rows): bit for bit."""

from __future__ import annotations

import numpy as np

from ...ops.synth import UniformRange



_M32 = np.uint32(0xFFFFFFFF)


def _pcg(v: np.ndarray) -> np.ndarray:
    v = v.astype(np.uint32)
    state = v * np.uint32(747796405) + np.uint32(2891336453)
    word = ((state >> ((state >> np.uint32(28)) + np.uint32(4))) ^ state) * np.uint32(277803737)
    return (word >> np.uint32(22)) ^ word


def synth_key_np(seed: int, stream: int) -> np.uint32:
    """The key synth_hash mixes into every index of (seed, stream)."""
    return _pcg(np.array([seed & 0xFFFFFFFF], np.uint32) ^ _pcg(np.array([stream & 0xFFFFFFFF], np.uint32)))[0]


def synth_hash_np(seed: int, stream: int, index: np.ndarray) -> np.ndarray:
    key = synth_key_np(seed, stream)
    return _pcg(_pcg(index.astype(np.uint32) + key) ^ key)


def synth_values_np(value_range: UniformRange, seed: int, stream: int, length: int) -> np.ndarray:
    """float32 values the GPU's fill_uniform writes for indices 0..length-1."""
    u = (synth_hash_np(seed, stream, np.arange(length, dtype=np.uint32)) >> np.uint32(8)).astype(np.float64)
    values = u * 2.0 ** value_range.scale_log2 + value_range.offset
    as_f32 = values.astype(np.float32)
    assert np.array_equal(as_f32.astype(np.float64), values), "synthetic range is not exact in f32"
    return as_f32

# ---------------------------------------------------------------------------------------------
# Elementwise families (binary, logical, extrema, to_copy) and the typed generators feeding them.

def synth_i32_np(low: int, span: int, seed: int, stream: int, length: int) -> np.ndarray:
    """int32 values fill_i32 writes: low + (h % span) wrapping in u32 (span 0 = 2^32)."""
    h = synth_hash_np(seed, stream, np.arange(length, dtype=np.uint32))
    step = h % np.uint32(span) if span else h
    return (np.uint32(low & 0xFFFFFFFF) + step).astype(np.uint32).view(np.int32)


def synth_bool_np(seed: int, stream: int, length: int) -> np.ndarray:
    """uint8 0/1 values fill_bool writes (the hash's top bit), one byte per element."""
    return (synth_hash_np(seed, stream, np.arange(length, dtype=np.uint32)) >> np.uint32(31)).astype(np.uint8)


def synth_f16_bits_np(exponent_min: int, exponent_span: int, seed: int, stream: int, length: int) -> np.ndarray:
    """uint16 bit patterns fill_f16 writes."""
    h = synth_hash_np(seed, stream, np.arange(length, dtype=np.uint32))
    exponent = np.uint32(exponent_min) + ((h >> np.uint32(10)) & np.uint32(0xFFFF)) % np.uint32(exponent_span)
    return (((h >> np.uint32(31)) << np.uint32(15)) | (exponent << np.uint32(10)) | (h & np.uint32(0x3FF))).astype(np.uint16)


def generated_np(generator: dict, seed: int, stream: int, length: int) -> np.ndarray:
    """What a typed or uniform generator writes, as the stored numpy dtype (f32, i32, u8, u16)."""
    kind = generator["kernel"]
    if kind == "fill_uniform":
        return synth_values_np(UniformRange(scale_log2=generator["scale_log2"], offset=generator["offset"]),
                               seed, stream, length)
    if kind == "fill_i32":
        values = synth_i32_np(generator["low"], generator["span"], seed, stream, length)
        if generator.get("convert") == "f32":           # then to_copy_i32_f32: exact below 2^24
            assert np.all(np.abs(values) <= 2 ** 24), "converted integers must be exact in f32"
            return values.astype(np.float32)
        return values
    if kind == "fill_bool":
        return synth_bool_np(seed, stream, length)
    if kind == "fill_f16":
        return synth_f16_bits_np(generator["exponent_min"], generator["exponent_span"], seed, stream, length)
    raise ValueError(f"no twin for generator {kind!r}")

def synth_rows_np(value_range: UniformRange, seed: int, stream: int, k: int, row0: int, row1: int) -> np.ndarray:
    """Rows [row0, row1) of a synthetic [N, K] weight (element n * K + k of the sequence), f32."""
    index = np.arange(row0 * k, row1 * k, dtype=np.uint64).astype(np.uint32)
    u = (synth_hash_np(seed, stream, index) >> np.uint32(8)).astype(np.float64)
    return (u * 2.0 ** value_range.scale_log2 + value_range.offset).astype(np.float32).reshape(row1 - row0, k)
