"""The elementwise families through the native backend (wgpu on lavapipe here): the same workload the
page runs (e2e/test_elementwise_browser.py), every element checked by the same host verifier."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from py_runtime.checks.elementwise import ElementwiseOptions, run_elementwise_check
from py_runtime.host.oracle import verify_elementwise_report
from py_runtime.ops.logical import logical
from py_runtime.ops.to_copy import to_copy
from py_runtime.plan import Plan
from py_runtime.runtime import Runtime


def _run(**options):
    """A fresh runtime per run: every dispatch of the check holds a params slot for the runtime's life."""
    artifacts = {}

    async def sink(name, data):
        artifacts[name] = data

    async def go():
        runtime = await Runtime.create("native")
        return await run_elementwise_check(runtime, ElementwiseOptions(artifacts=True, **options), sink)

    return asyncio.run(go()), artifacts


@pytest.fixture(scope="module")
def full_run():
    return _run(seed=11)


def test_every_variant_matches_the_float64_oracle(full_run):
    report, artifacts = full_run
    assert report["adapter"]["backend"] == "native"
    summary = verify_elementwise_report(report, artifacts)
    # The regimes the tolerances exist for were exercised, not just the easy middle.
    assert summary["binary_floor_divide"]["near_integer_quotients"] > 100
    assert summary["to_copy_f32_i32"]["clamped"] > 100
    assert summary["to_copy_i32_f32"]["rounded"] > 100
    assert summary["to_copy_f32_f16"]["rounded"] > 1000


def test_two_dimensional_grids_cover_every_element():
    report, artifacts = _run(seed=12, max_workgroups_per_dim=9)
    grids = {c["id"]: c["workgroups"] for c in report["cases"]}
    assert grids["binary_add_04"] == [9, 8, 1]           # 4097 outputs -> 65 groups of 64 -> 9 x 8
    assert grids["logical_and_08"] == [9, 2, 1]          # 4097 bools -> 1025 words -> 17 groups
    verify_elementwise_report(report, artifacts)


def _corrupt(report, artifacts, case_id, role, how):
    case = next(c for c in report["cases"] if c["id"] == case_id)
    entry = next(t for t in case["tensors"] if t["role"] == role)
    data = bytearray(artifacts[entry["artifact"]])
    how(data, entry)
    return {**artifacts, entry["artifact"]: bytes(data)}


def _flip_first_element(data, entry):
    width = {"f32": 4, "i32": 4, "bool": 1, "f16": 2}[entry["dtype"]]
    data[width - 1] ^= 0x01 if entry["dtype"] == "bool" else 0x20       # bool 0<->1, else an exponent bit


def _poison_first_element(data, entry):
    data[:4] = bytes.fromhex("ad7dad7d" if entry["dtype"] == "f16" else "addbba7f")


def _touch_first_guard_byte(data, entry):
    data[entry["data_bytes"]] ^= 0xFF


def _last_ulp(data, entry):
    value = np.frombuffer(bytes(data[:4]), np.float32)
    data[:4] = np.nextafter(np.nextafter(value, np.float32(np.inf)), np.float32(np.inf)).tobytes()


@pytest.mark.parametrize("case_id,role,how,fragment", [
    ("binary_add_04", "out", _flip_first_element, "out_of_tolerance"),
    ("binary_mul_07", "out", _last_ulp, "out_of_tolerance"),           # 2 ULP off a correctly rounded product
    ("binary_pow_00", "out", _poison_first_element, "unwritten"),
    ("binary_div_08", "out", _touch_first_guard_byte, "guard_overwritten"),
    ("logical_xor_02", "out", _touch_first_guard_byte, "guard_overwritten"),   # 3 bools: the word's 4th byte
    ("logical_not_05", "out", _flip_first_element, "out_of_tolerance"),
    ("extrema_amin_03", "out", _flip_first_element, "out_of_tolerance"),
    ("to_copy_f32_f16_00", "out", _touch_first_guard_byte, "guard_overwritten"),  # 1 f16: the high half
    ("to_copy_f16_f32_02", "src", _flip_first_element, "input_mismatches"),
    ("to_copy_i32_f32_06", "out", _flip_first_element, "out_of_tolerance"),
])
def test_the_verifier_fails_on_corrupted_results(full_run, case_id, role, how, fragment):
    report, artifacts = full_run
    broken = _corrupt(report, artifacts, case_id, role, how)
    with pytest.raises(AssertionError) as caught:
        verify_elementwise_report(report, broken)
    assert case_id in str(caught.value) and fragment in str(caught.value), str(caught.value)[:400]


def test_the_verifier_fails_when_a_variant_is_missing(full_run):
    report, artifacts = full_run
    thinned = {**report, "cases": [c for c in report["cases"] if c["kernel"] != "extrema_amin"]}
    with pytest.raises(AssertionError, match="extrema_amin"):
        verify_elementwise_report(thinned, artifacts)


def test_any_nonzero_byte_is_true():
    """Bools written by other code may hold any nonzero byte for true: the kernels normalize."""
    a = bytes([0, 1, 2, 0x80, 0xFF, 0, 0x10])
    b = bytes([0x40, 0, 3, 0, 0xFF, 0, 0x01])

    async def go():
        runtime = await Runtime.create("native")
        tensors = runtime.tensors
        ta = await tensors.allocate("nz.a", (7,), "bool")
        tb = await tensors.allocate("nz.b", (7,), "bool")
        outs = {op: await tensors.allocate(f"nz.{op}", (7,), "bool") for op in ("and", "or", "xor", "not")}
        as_f32 = await tensors.allocate("nz.f32", (7,), "f32")
        runtime.device.write_buffer(ta.buffer, a + b"\0")
        runtime.device.write_buffer(tb.buffer, b + b"\0")
        plan = Plan(runtime, "nonzero")
        for op, out in outs.items():
            await plan.add(logical(op, a=ta, b=None if op == "not" else tb, out=out))
        await plan.add(to_copy(src=ta, out=as_f32))
        plan.record()
        await plan.replay()
        got = {op: list(await runtime.device.read_buffer(out.buffer, 7)) for op, out in outs.items()}
        got["f32"] = np.frombuffer(await runtime.device.read_buffer(as_f32.buffer, 28), np.float32).tolist()
        return got

    got = asyncio.run(go())
    ta, tb = [x != 0 for x in a], [x != 0 for x in b]
    assert got["and"] == [int(x and y) for x, y in zip(ta, tb)]
    assert got["or"] == [int(x or y) for x, y in zip(ta, tb)]
    assert got["xor"] == [int(x != y) for x, y in zip(ta, tb)]
    assert got["not"] == [int(not x) for x in ta]
    assert got["f32"] == [float(x) for x in ta]
