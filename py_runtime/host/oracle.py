"""The host oracle: numpy twins of the GPU generators and float64 references of the kernels.

Independent of the runtime's own in-page check (which uses the `math` module): the references
here are numpy's, evaluated in float64 on every element.
"""

from __future__ import annotations

import numpy as np

from ..ops.synth import UniformRange
from ..ops.unary import TOLERANCES

__all__ = ["synth_hash_np", "synth_values_np", "unary_reference", "unary_allowed_error", "f32_spacing"]

_M32 = np.uint32(0xFFFFFFFF)


def _pcg(v: np.ndarray) -> np.ndarray:
    v = v.astype(np.uint32)
    state = v * np.uint32(747796405) + np.uint32(2891336453)
    word = ((state >> ((state >> np.uint32(28)) + np.uint32(4))) ^ state) * np.uint32(277803737)
    return (word >> np.uint32(22)) ^ word


def synth_hash_np(seed: int, stream: int, index: np.ndarray) -> np.ndarray:
    key = _pcg(np.array([seed & 0xFFFFFFFF], np.uint32) ^ _pcg(np.array([stream & 0xFFFFFFFF], np.uint32)))
    return _pcg(_pcg(index.astype(np.uint32) + key) ^ key)


def synth_values_np(value_range: UniformRange, seed: int, stream: int, length: int) -> np.ndarray:
    """float32 values the GPU's fill_uniform writes for indices 0..length-1."""
    u = (synth_hash_np(seed, stream, np.arange(length, dtype=np.uint32)) >> np.uint32(8)).astype(np.float64)
    values = u * 2.0 ** value_range.scale_log2 + value_range.offset
    as_f32 = values.astype(np.float32)
    assert np.array_equal(as_f32.astype(np.float64), values), "synthetic range is not exact in f32"
    return as_f32


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
    from ..ops.unary import INPUT_RANGES

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


def linear_reference(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """float64 x @ w.T (+ bias), and the f32 error bound of a sequential sum over k:
    |err| <= gamma_(K+2) * (sum_k |x w| + |bias|), gamma_n = n u / (1 - n u), u = 2^-24."""
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    exact = x64 @ w64.T
    magnitude = np.abs(x64) @ np.abs(w64).T
    if bias is not None:
        exact = exact + bias.astype(np.float64)
        magnitude = magnitude + np.abs(bias.astype(np.float64))
    n = x.shape[-1] + 2
    u = 2.0 ** -24
    return exact, (n * u / (1 - n * u)) * magnitude


def verify_runtime_report(report: dict, artifacts: dict[str, bytes]) -> None:
    """Assert everything the runtime-core checks report, on either backend (AssertionError names what)."""
    from ..checks.runtime_core import LINEAR_RANGE, LINEAR_SHAPE, LINEAR_STREAMS
    from ..routes import route_mask

    m, k, n = LINEAR_SHAPE["prefill_rows"], LINEAR_SHAPE["k"], LINEAR_SHAPE["n"]
    seed = report["seed"]
    x = synth_values_np(LINEAR_RANGE, seed, LINEAR_STREAMS["x"], m * k).reshape(m, k)
    w = synth_values_np(LINEAR_RANGE, seed, LINEAR_STREAMS["w"], n * k).reshape(n, k)
    bias = synth_values_np(LINEAR_RANGE, seed, LINEAR_STREAMS["bias"], n)
    exact, bound = linear_reference(x, w, bias)
    for name, rows in (("linear_prefill.f32", m), ("linear_decode.f32", 1), ("linear_recovered.f32", m)):
        gpu = np.frombuffer(artifacts[name], np.float32).reshape(rows, n).astype(np.float64)
        error = np.abs(gpu - exact[:rows])
        assert np.all(error <= bound[:rows]), f"{name}: worst error/bound {np.max(error / bound[:rows]):.3f}"

    caching = report["caching"]
    assert caching["after_second_step"] == caching["after_first_step"], f"second step created objects: {caching}"
    assert caching["after_second_plan"][0] == caching["after_first_step"][0], f"second plan made pipelines: {caching}"

    params_prefill = np.frombuffer(bytes(report["resize"]["params_prefill"]), np.uint32).tolist()
    params_decode = np.frombuffer(bytes(report["resize"]["params_decode"]), np.uint32).tolist()
    assert params_prefill == [m, k, n, 1] and params_decode == [1, k, n, 1], (params_prefill, params_decode)

    profile = report["profile"]
    assert profile["available"], "this adapter cannot profile (no timestamp-query)"
    assert [r["kernel"] for r in profile["rows"]] == ["fill_uniform"] * 3 + ["linear_f32"]
    linear_row = profile["rows"][-1]
    assert linear_row["route"] == "linear_f32_naive" and linear_row["flops"] == 2 * 1 * n * k
    assert linear_row["bytes"] == 4 * (k + n * k + n + n) and linear_row["ns"] > 0
    assert profile["quantized"] is False

    attestation = report["attestation"]
    assert attestation["routes"] == ["fill_uniform", "linear_f32_naive"]
    assert attestation["mask"] == route_mask(attestation["routes"]) == attestation["second_step_mask"]
    assert attestation["mask_routes"] == sorted(attestation["routes"], key=attestation["routes"].index)
    assert attestation["attention_conflicts"] == 0

    for path, expected in report["error_types"].items():
        error = report["errors"][path]
        assert error is not None, f"error path {path!r} did not raise"
        assert error["type"] == expected, f"{path}: {error}"
    assert "broken_kernel" in report["errors"]["compile"]["message"]
    assert ":3:" in report["errors"]["compile"]["message"], "compile error without its line"
    assert "core.bad_binding" in report["errors"]["validation"]["message"]
    too_large = report["errors"]["too_large"]["message"]
    assert "core.huge" in too_large and ("maxStorageBufferBindingSize" in too_large or "maxBufferSize" in too_large)
    loss = report["device_loss"]
    assert loss["noticed"] and loss["error_is_device_lost"] and loss["reason"] == "destroyed", loss
