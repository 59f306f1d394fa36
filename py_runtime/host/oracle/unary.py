"""float64 references and spec-derived bounds for the unary family."""

from __future__ import annotations

import numpy as np

from ...ops.unary import TOLERANCES
from .synth import synth_values_np


def unary_reference(op: str, x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    with np.errstate(over="ignore"):
        match op:
            case "abs": return np.abs(x)
            case "neg": return -x
            case "round": return np.round(x)          # half to even, as WGSL round()
            case "sqrt": return np.sqrt(x)
            case "rsqrt": return 1.0 / np.sqrt(x)
            case "exp": return np.exp(x)
            case "sin": return np.sin(x)
            case "cos": return np.cos(x)
            case "tanh": return np.tanh(x)
            case "sigmoid": return 1.0 / (1.0 + np.exp(-x))
            case "silu": return x / (1.0 + np.exp(-x))
            case "hardswish": return x * np.clip(x + 3.0, 0.0, 6.0) / 6.0
    raise ValueError(f"no reference for unary op {op!r}")


def f32_spacing(values: np.ndarray) -> np.ndarray:
    """Spacing of f32 at |values| (float64 result)."""
    return np.spacing(np.abs(values).astype(np.float32)).astype(np.float64)


def unary_allowed_error(op: str, x: np.ndarray, exact: np.ndarray) -> np.ndarray:
    t = TOLERANCES[op]
    ax = np.abs(x.astype(np.float64))
    return ((t.ulps + t.ulps_per_abs_x * ax) * f32_spacing(exact)
            + (t.abs_units + t.abs_units_per_abs_x * ax) * 2.0 ** -23)


def verify_unary_case(*, op: str, length: int, seed: int, stream: int, inputs: bytes, outputs: bytes,
                      guard_elements: int, poison: bytes) -> dict:
    """Every element of one uploaded case against the oracle; returns counts for the test to assert."""
    from ...ops.unary import INPUT_RANGES

    expected_inputs = synth_values_np(INPUT_RANGES[op], seed, stream, length)
    gpu_inputs = np.frombuffer(inputs, np.float32, count=length)
    words = np.frombuffer(outputs, np.uint32)
    poison_word = np.frombuffer(poison, np.uint32)[0]
    gpu = np.frombuffer(outputs, np.float32, count=length).astype(np.float64)
    x = expected_inputs.astype(np.float64)
    exact = unary_reference(op, x)
    allowed = unary_allowed_error(op, x, exact)
    error = np.abs(gpu - exact)
    bad = ~(error <= allowed)           # NaN counts as bad
    ratio = np.where(allowed > 0, error / np.where(allowed > 0, allowed, 1), np.where(error == 0, 0, np.inf))
    return {
        "input_mismatches": int(np.count_nonzero(gpu_inputs.view(np.uint32) != expected_inputs.view(np.uint32))),
        "out_of_tolerance": int(np.count_nonzero(bad)),
        "first_bad": [(int(i), float(x[i]), float(gpu[i]), float(exact[i])) for i in np.flatnonzero(bad)[:5]],
        "unwritten": int(np.count_nonzero(words[:length] == poison_word)),
        "guard_overwritten": int(np.count_nonzero(words[length:length + guard_elements] != poison_word)),
        "output_words": int(words.size),
        "worst_error_ratio": float(np.nanmax(ratio)) if length else 0.0,
    }
