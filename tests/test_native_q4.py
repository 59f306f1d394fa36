"""Q4 quantizer and linear routes through the native backend, every output against float64 numpy."""

from __future__ import annotations

import asyncio

import pytest

from py_runtime.app import run
from py_runtime.host.oracle import verify_q4_report


def _run(options, progress=None):
    artifacts = {}

    async def sink(name, data):
        artifacts[name] = data

    report = asyncio.run(run("native", {"suite": "q4", **options}, sink, *([progress] if progress else [])))
    return report, artifacts


def test_every_route_at_real_and_awkward_shapes_matches_the_oracle():
    updates = []
    report, artifacts = _run({}, lambda *update: updates.append(update))
    # Nothing is judged in the runtime: the report says so; the oracle below judges every output.
    assert report["result"] == "not checked"
    total = len(report["cases"]) + len(report["embeddings"])
    assert updates == [("q4 cases", done, total) for done in range(total + 1)]
    worst = verify_q4_report(report, artifacts.__getitem__)
    routes = {r for case in report["cases"] for run_ in case["runs"] for r in run_["routes"]}
    # lavapipe reports subgroups up to 128 wide, so the workgroup-reduction GEMV is the decode route here.
    assert routes == {"q4_gemv_workgroup", "q4_gemm_tiled", "q4_gemm_bk64", "q4_qkv_fused_bk64", "q4_linear_generic",
                      "q4_gemv_int8", "int8_activations", "q4_gemv_int8x", "q4_gemv_int8x_qkv", "q4_gemv_int8x_glu",
                      "rms_norm_int8x", "q4_gemm_dp4a"}
    assert all(ratio <= 1 for ratio in worst.values())
    assert any(case["weight_artifacts"] for case in report["cases"])       # the twin was compared


@pytest.mark.full
def test_full_matrix_of_rows_1_7_128_512():
    report, artifacts = _run({"preset": "full"})
    verify_q4_report(report, artifacts.__getitem__)


def test_unknown_case_and_preset_are_named():
    with pytest.raises(ValueError, match=r"suite 'q4': option only = \['llama.nope'\]: 'llama.nope' is not allowed"):
        _run({"only": ["llama.nope"]})
    with pytest.raises(ValueError, match=r"option preset = 'huge': not allowed; preset takes a string from \['ci'"):
        _run({"preset": "huge"})


def test_the_dp4a_verifier_fails_on_a_wrong_output_route_or_activation_and_tells_int8_from_f32():
    """The DP4A prefill checks are not vacuous: one output moved past its bound, a wrong attestation, an
    int8 activation off by one, and the float x @ W (what the f32 GEMMs approximate) each fail."""
    import copy

    import numpy as np

    from py_runtime.checks.q4_linear import ACT_RANGE, BIAS_RANGE, WEIGHT_RANGE
    from py_runtime.host.oracle.q4 import q4_linear_reference
    from py_runtime.host.oracle.synth import synth_values_np

    report, artifacts = _run({"only": ["dp4a.k160_bias"]})
    assert max(verify_q4_report(report, artifacts.__getitem__).values()) <= 1
    case = report["cases"][0]
    run_ = next(r for r in case["runs"] if r["rows"] == 67)
    out_name, words_name, _ = run_["artifacts"]
    out = np.frombuffer(artifacts[out_name], np.float32).reshape(67, case["n"])

    def fails(changed: dict, reported=report, match="") -> None:
        with pytest.raises(AssertionError, match=match):
            verify_q4_report(reported, {**artifacts, **changed}.__getitem__)

    moved = out.copy()
    moved[30, 40] += np.float32(1e-3) * max(1.0, abs(float(moved[30, 40])))
    fails({out_name: moved.tobytes()}, match="1 outside the DP4A bound")
    words = bytearray(artifacts[words_name])
    words[5 * case["k"] + 17] = (words[5 * case["k"] + 17] + 2) % 256      # row 5, one int8 value
    fails({words_name: bytes(words)}, match="int8 values differ from the twin")
    rerouted = copy.deepcopy(report)
    next(r for r in rerouted["cases"][0]["runs"] if r["rows"] == 67)["routes"] = ["q4_gemm_tiled"]
    fails({}, rerouted, match="expected the int8 producer and q4_gemm_dp4a")
    k, n, seed, stream = case["k"], case["n"], report["seed"], case["stream"]
    x = synth_values_np(ACT_RANGE, seed, stream + 1000, 67 * k).reshape(67, k)
    exact, _ = q4_linear_reference(x, k=k, n_total=n, group_size=case["group_size"], seed=seed, stream=stream,
                                   value_range=WEIGHT_RANGE)
    unquantized = exact + synth_values_np(BIAS_RANGE, seed, stream + 2000, n).astype(np.float64)
    fails({out_name: unquantized.astype(np.float32).tobytes()}, match="outside the DP4A bound")
