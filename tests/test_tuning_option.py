"""The `tuning` run option: a run names the tuning table every route takes its kernel variants from, in
place of the one the adapter's info matches (to compare tables on one adapter). The name travels in the
adapter info, so the routes, the report and the host's oracles all see the same table."""

from __future__ import annotations

import asyncio

import pytest

from py_runtime.app import run
from py_runtime.host.report import format_model_bench
from py_runtime.gpu.device import NAMED_TUNING
from py_runtime.ops.tuning import PORTABLE, TABLE_NAMES, tuning_table
from py_runtime.workloads import get

H200_INFO = {"description": "NVIDIA H200", "vendor": "nvidia"}
OTHER_INFO = {"description": "NVIDIA A100", "vendor": "nvidia"}


def test_a_named_table_replaces_the_one_the_info_matches():
    assert tuning_table(H200_INFO).name == "h200" and tuning_table(OTHER_INFO).name == "portable"
    assert tuning_table({**OTHER_INFO, NAMED_TUNING: "h200"}).name == "h200"
    assert tuning_table({**H200_INFO, NAMED_TUNING: "portable"}) is PORTABLE
    assert tuning_table({**H200_INFO, NAMED_TUNING: None}).name == "h200"


def test_an_unknown_table_is_refused_by_name_at_the_option_and_at_the_routes():
    with pytest.raises(ValueError, match=r"unknown tuning table 'h100'; known: \['h200-native', 'h200', "):
        tuning_table({**OTHER_INFO, NAMED_TUNING: "h100"})
    with pytest.raises(ValueError, match=r"tuning takes a string from \['h200-native', 'h200', 'swiftshader', "
                                         r"'portable'\]"):
        get("model_bench").validate({"tuning": "h100"})
    assert set(TABLE_NAMES) == {"h200-native", "h200", "swiftshader", "portable"}


def _bench(tuning: str | None) -> dict:
    options = {"suite": "model_bench", "model": "llama", "policy": "int8x", "layers": 1, "prompt": 8, "decode": 2}
    if tuning is not None:
        options["tuning"] = tuning

    async def sink(name, data):
        pass

    return asyncio.run(run("native", options, sink))


def _gemv_variants(report: dict) -> set[str]:
    return {row["kernel"] for row in report["kernels"] if row["route"] == "q4_gemv_int8x"}


def test_a_run_naming_the_h200_table_runs_its_variants_on_another_adapter_with_the_same_tokens():
    """On lavapipe (the portable table by its info) the H200's table picks another variant of the plain
    int8x GEMV (Llama's head, 2048 -> 128256): the option reaches the routes, the report says which table
    picked, and the arithmetic is the same (the same greedy tokens)."""
    default, named = _bench(None), _bench("h200")
    assert default["tuning"] == "portable" and NAMED_TUNING not in default["adapter"]["info"]
    assert named["tuning"] == "h200" and named["adapter"]["info"][NAMED_TUNING] == "h200"
    assert _gemv_variants(default) == {"q4gsw_gemv_i8x_sr_sg_" + PORTABLE.gemv_int8x(2048, 128256, False, False, True)}
    assert _gemv_variants(named) and _gemv_variants(named).isdisjoint(_gemv_variants(default))
    assert named["generated"] == default["generated"]
    assert "; tuning h200 (named)]" in format_model_bench(named).splitlines()[0]
    assert "; tuning portable]" in format_model_bench(default).splitlines()[0]
