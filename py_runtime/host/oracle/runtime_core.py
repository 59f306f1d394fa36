"""The f32 linear reference and the verifier of the runtime-core checks."""

from __future__ import annotations

import numpy as np

from .synth import synth_values_np


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


def verify_runtime_report(report: dict, read) -> None:
    """Assert everything the runtime-core checks report, on either backend (AssertionError names what).
    `read(name)` gives an artifact's bytes."""
    from ...checks.runtime_core import LINEAR_RANGE, LINEAR_SHAPE, LINEAR_STREAMS
    from ...routes import route_mask

    m, k, n = LINEAR_SHAPE["prefill_rows"], LINEAR_SHAPE["k"], LINEAR_SHAPE["n"]
    seed = report["seed"]
    x = synth_values_np(LINEAR_RANGE, seed, LINEAR_STREAMS["x"], m * k).reshape(m, k)
    w = synth_values_np(LINEAR_RANGE, seed, LINEAR_STREAMS["w"], n * k).reshape(n, k)
    bias = synth_values_np(LINEAR_RANGE, seed, LINEAR_STREAMS["bias"], n)
    exact, bound = linear_reference(x, w, bias)
    for name, rows in (("linear_prefill.f32", m), ("linear_decode.f32", 1), ("linear_recovered.f32", m)):
        gpu = np.frombuffer(read(name), np.float32).reshape(rows, n).astype(np.float64)
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
    # profile="span": one pass between two timestamps, no per-dispatch rows, the same attestation.
    assert profile["span_ns"] > 0 and profile["span_rows"] == 0, (profile["span_ns"], profile["span_rows"])
    assert profile["span_routes"] == ["fill_uniform", "linear_f32_naive"]

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
