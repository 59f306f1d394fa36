"""The demo: the page opened with no options runs its built-in default and shows a passing check,
with a progress bar per stage while it runs."""

from __future__ import annotations

from .conftest import assert_clean


def test_default_page_reports_adapter_and_a_passing_check(lab, results_dir):
    shot = results_dir / "demo.png"
    run = lab.run_page(timeout_s=300, screenshot=shot)
    assert_clean(run)
    report = run.report
    assert report["result"] == "passed"
    assert report["adapter"]["info"].get("vendor")
    assert "timestamp-query" in report["adapter"]["features"]
    assert run.status_text.startswith("PASS:"), run.status_text
    assert len(report["cases"]) == 12 * 3           # every operator at the default lengths
    # One progress bar per stage, left at its last update: every operator done.
    assert run.progress == {"unary ops": {"done": 12, "total": 12}}, run.progress
    assert "unary ops: 12/12" in run.page_text
    assert shot.stat().st_size > 10_000
