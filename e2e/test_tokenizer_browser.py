"""The pure-Python tokenizer inside Pyodide in Chromium: the page loads the vendored Llama 3.2 and Qwen3
tokenizer.json files, encodes the suite's samples and a chat, and the host judges every id against the
`tokenizers` package on the same files."""

from __future__ import annotations

from py_runtime.host.oracle.tokenizer import verify_tokenizer_report
from py_runtime.host.vendor import tokenizer_dir

from .conftest import REPO, assert_clean


def test_tokenizer_in_pyodide_gives_the_ids_of_tokenizers(lab, results_dir):
    run = lab.run_page({"suite": "tokenizer"}, timeout_s=240, screenshot=results_dir / "tokenizer.png")
    assert_clean(run)
    assert run.report["result"] == "passed", run.report
    files = {name: tokenizer_dir(REPO, name) / "tokenizer.json" for name in ("llama3_2", "qwen3")}
    judged = verify_tokenizer_report(run.report, files)
    assert [c["vocabulary"] for c in run.report["cases"]] == ["llama3_2", "qwen3"]
    for case, parity in zip(run.report["cases"], judged):
        print(f"\n[pyodide] {case['vocabulary']}: {parity.summary()}; load {case['load_ms']:.0f} ms, "
              f"encode {case['cold_tok_s']:,.0f} tok/s cold")
    assert "tokenizer: 2 vocabularies" in run.status_text
