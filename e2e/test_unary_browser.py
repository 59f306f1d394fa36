"""Every unary variant at every length, run by Python inside Pyodide in headless Chromium; every
element checked on the host against float64 numpy from the uploaded inputs and outputs."""

from __future__ import annotations

import json

import pytest

from py_runtime.host.oracle import verify_unary_case
from py_runtime.ops.unary import UNARY_OPS

from .conftest import assert_clean

LENGTHS = (1, 63, 64, 65, 4097, 1_000_003)
SEED = 5


@pytest.fixture(scope="module")
def unary_run(lab, run_id, results_dir):
    upload = f"{run_id}-unary"
    run = lab.run_page({"suite": "unary", "ops": ",".join(UNARY_OPS), "lengths": ",".join(map(str, LENGTHS)), "seed": SEED,
                        "sample": 1024, "upload": upload}, timeout_s=900)
    assert_clean(run)
    report = run.report
    timings = {"adapter": report["adapter"], "timestamps": report["timestamps"], "timings": report["timings"]}
    (results_dir / "unary_timings.json").write_text(json.dumps(timings, indent=1) + "\n")
    return report, lab.server.results_root / upload


def test_page_reports_the_adapter_and_its_own_check_passed(unary_run):
    report, _ = unary_run
    assert report["adapter"]["backend"] == "browser"
    assert report["adapter"]["info"].get("vendor"), report["adapter"]
    assert report["result"] == "passed", [c for c in report["cases"] if not c["passed"]]
    assert len(report["cases"]) == len(UNARY_OPS) * len(LENGTHS)


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("op", UNARY_OPS)
def test_every_element_matches_the_float64_oracle(unary_run, op, length):
    report, folder = unary_run
    case = next(c for c in report["cases"] if c["op"] == op and c["length"] == length)
    name = f"unary_{op}_{length}"
    options = report["options"]
    result = verify_unary_case(op=op, length=length, seed=SEED, stream=case["stream"],
                               inputs=(folder / f"{name}.in.f32").read_bytes(),
                               outputs=(folder / f"{name}.out.f32").read_bytes(),
                               guard_elements=options["guard_elements"], poison=bytes.fromhex(options["poison_hex"]))
    assert result["output_words"] == length + options["guard_elements"]
    assert result["input_mismatches"] == 0, "GPU generator differs from its numpy twin"
    assert result["out_of_tolerance"] == 0, result["first_bad"]
    assert result["unwritten"] == 0
    assert result["guard_overwritten"] == 0


def test_every_dispatch_is_timed_with_unquantized_timestamps(unary_run, results_dir):
    report, _ = unary_run
    assert report["timestamps"] == {"profiled": True, "quantized": False}
    assert len(report["timings"]) == 2 * len(report["cases"])        # fill + unary per case
    assert all(isinstance(t["ns"], int) and t["ns"] >= 0 for t in report["timings"])
    saved = json.loads((results_dir / "unary_timings.json").read_text())
    assert saved["adapter"]["info"] == report["adapter"]["info"]


def test_two_dimensional_grid_in_the_browser(lab, run_id):
    upload = f"{run_id}-grid2d"
    run = lab.run_page({"suite": "unary", "ops": "silu,round", "lengths": "65,4097", "max_wg": 5, "seed": 9, "upload": upload})
    assert_clean(run)
    report = run.report
    assert {c["length"]: c["workgroups"] for c in report["cases"]}[4097] == [5, 4, 1]
    folder = lab.server.results_root / upload
    for case in report["cases"]:
        name = f"unary_{case['op']}_{case['length']}"
        result = verify_unary_case(op=case["op"], length=case["length"], seed=9, stream=case["stream"],
                                   inputs=(folder / f"{name}.in.f32").read_bytes(),
                                   outputs=(folder / f"{name}.out.f32").read_bytes(),
                                   guard_elements=64, poison=bytes.fromhex(report["options"]["poison_hex"]))
        assert (result["input_mismatches"], result["out_of_tolerance"], result["unwritten"],
                result["guard_overwritten"]) == (0, 0, 0, 0), (name, result)
