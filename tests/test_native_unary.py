"""The unary family through the native backend (wgpu on lavapipe here), every element checked
against the numpy oracle, with the same workload the page runs."""

from __future__ import annotations

import asyncio

import pytest

from py_runtime.host.oracle import verify_unary_case
from py_runtime.ops.unary import UNARY_OPS
from py_runtime.checks.unary import GUARD_ELEMENTS, POISON, CheckOptions, run_unary_check

LENGTHS = (1, 63, 64, 65, 4097, 1_000_003)


def _run(runtime, **options):
    artifacts = {}

    async def sink(name, data):
        artifacts[name] = data

    report = asyncio.run(run_unary_check(runtime, CheckOptions(artifacts=True, **options), sink))
    return report, artifacts


def _assert_case_matches_oracle(case, artifacts, seed):
    name = f"unary_{case['op']}_{case['length']}"
    result = verify_unary_case(op=case["op"], length=case["length"], seed=seed, stream=case["stream"],
                               inputs=artifacts[f"{name}.in.f32"], outputs=artifacts[f"{name}.out.f32"],
                               guard_elements=GUARD_ELEMENTS, poison=POISON)
    assert result["input_mismatches"] == 0, f"{name}: GPU generator differs from its numpy twin"
    assert result["out_of_tolerance"] == 0, f"{name}: outside tolerance at {result['first_bad']}"
    assert result["unwritten"] == 0, f"{name}: {result['unwritten']} elements never written"
    assert result["guard_overwritten"] == 0, f"{name}: wrote past the end"
    assert case["passed"], f"{name}: the runtime's own check failed: {case}"


@pytest.mark.parametrize("op", UNARY_OPS)
def test_unary_matches_float64_oracle_at_every_length(native_runtime, op):
    report, artifacts = _run(native_runtime, ops=(op,), lengths=LENGTHS, seed=7)
    assert [c["length"] for c in report["cases"]] == list(LENGTHS)
    for case in report["cases"]:
        _assert_case_matches_oracle(case, artifacts, seed=7)


def test_two_dimensional_grid_covers_every_element(native_runtime):
    # 5 workgroups per row forces a 2-D grid at small lengths: 4097 elements -> 17 groups -> 5 x 4.
    report, artifacts = _run(native_runtime, ops=("neg", "exp"), lengths=(65, 4097), max_workgroups_per_dim=5, seed=3)
    grids = {c["length"]: c["workgroups"] for c in report["cases"]}
    assert grids[4097] == [5, 4, 1]
    for case in report["cases"]:
        _assert_case_matches_oracle(case, artifacts, seed=3)


def test_more_than_65535_workgroups_spill_into_a_second_dimension(native_runtime):
    n = 65535 * 256 + 17          # one more workgroup than a 1-D grid can hold
    report, artifacts = _run(native_runtime, ops=("abs",), lengths=(n,), seed=11, sample=512)
    case = report["cases"][0]
    assert case["workgroups"] == [65535, 2, 1]
    _assert_case_matches_oracle(case, artifacts, seed=11)


def test_profiling_reports_a_timing_per_dispatch(native_runtime):
    report, _ = _run(native_runtime, ops=("sqrt",), lengths=(4097,))
    assert report["timestamps"]["profiled"] is True
    assert report["timestamps"]["quantized"] in (False, None)
    kernels = [t["kernel"] for t in report["timings"]]
    assert kernels == ["fill_uniform", "unary_sqrt"]
    assert all(t["ns"] > 0 for t in report["timings"])


def test_pipelines_are_created_once_per_kernel(native_runtime):
    before = native_runtime.pipelines.created
    _run(native_runtime, ops=("tanh",), lengths=(1, 65))
    created = native_runtime.pipelines.created - before
    _run(native_runtime, ops=("tanh",), lengths=(1, 65))
    assert native_runtime.pipelines.created - before == created
