"""The model bench in the page: its JSON report, and what the page renders from it (the summary table, the
decode step against its floor as dependent dispatches, each kernel's share)."""

from __future__ import annotations

from .conftest import assert_clean


def test_model_bench_page_shows_the_step_against_its_floor(lab):
    """A sampled run (the tuning test below runs greedy ones): the page says how the tokens were picked."""
    run = lab.run_page({"suite": "model_bench", "model": "tiny", "prompt": 8, "decode": 3, "temperature": 1.2,
                        "seed": 3}, timeout_s=300)
    assert_clean(run)
    report = run.report
    assert run.report["result"] == "not checked" and run.status_text.startswith("NOT CHECKED:"), run.status_text
    assert "sample" in report["routes"]["decode"] and report["options"]["sampling"]["temperature"] == 1.2
    assert "3 sampled (temperature 1.2, top-k 50, top-p 1, seed 3) steps" in run.page_text
    # SwiftShader has timestamp queries: the step's GPU time, its floor and each kernel's share are measured
    assert report["decode_span_us"] > 0 and report["decode_floor_us"] > 0 and report["kernels"]
    text = run.page_text
    assert f"The decode step's floor as {report['dispatches']['decode']} dependent dispatches" in text
    assert "Decode step: share of GPU time per kernel" in text
    assert all(r["kernel"] in text for r in report["kernels"])


def test_a_run_naming_a_tuning_table_runs_its_picks_and_the_page_says_which(lab):
    """tuning=h200 on SwiftShader (whose own table is `swiftshader`): the run reports the named table, the
    adapter section shows it, and the variants differ from the adapter's own table's where the tables differ."""
    base = {"suite": "model_bench", "model": "tiny", "prompt": 8, "decode": 3, "policy": "int8x", "profile": True}
    own, named = lab.run_page(base, timeout_s=300), lab.run_page({**base, "tuning": "h200"}, timeout_s=300)
    assert_clean(own)
    assert_clean(named)
    assert own.report["tuning"] == "swiftshader" and named.report["tuning"] == "h200"
    assert named.report["adapter"]["info"]["tuning_table"] == "h200"
    assert "tuning table\nh200" in named.page_text and "tuning table\nswiftshader" in own.page_text
    variants = [{r["kernel"] for r in run.report["kernels"]} for run in (own, named)]
    assert variants[0] != variants[1], variants
    assert named.report["generated"] == own.report["generated"]
