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
                      "rms_norm_int8x"}
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
