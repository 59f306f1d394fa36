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


def test_the_cli_relays_the_pages_progress(lab):
    """A browser run driven from the host hears the page's (stage, done, total) while it runs and at
    the end: what the CLI prints on stderr as progress bars."""
    heard = []
    run = lab.run_page({"suite": "unary", "ops": "exp,silu,tanh", "lengths": "4097"}, timeout_s=180,
                       on_progress=lambda stage, done, total: heard.append((stage, done, total)))
    assert run.state == "done", run.error
    assert heard and heard[-1][1] == heard[-1][2] == 3, heard
    assert [done for _, done, _ in heard] == sorted(done for _, done, _ in heard)
