"""Our engine beside ONNX Runtime Web (WebGPU) in one Chromium page on SwiftShader: the same 2-layer model and
weights (host/peer.py's build), the same prompt ids, alternating timed rounds; both engines' logits judged
on the host by the transformers oracle, the ratio printed. A 128-token prompt: ORT-web's subgroup kernels
are the ones in question on SwiftShader (subgroups of 4), and they run at a real prefill length.

The tiny geometry keeps it CI-sized (SwiftShader takes seconds per step at a full vocabulary); the full-width
Llama comparison at 2 layers is opt-in (-m full)."""

from __future__ import annotations

import pytest

pytest.importorskip("onnxruntime_genai", reason="the peer extra (scripts/setup.sh installs it)")

from py_runtime.host.codegen import repo_root  # noqa: E402
from py_runtime.host.oracle.model import verify_peer_report  # noqa: E402
from py_runtime.host.peer import build_peer  # noqa: E402
from py_runtime.host.report import format_peer_bench  # noqa: E402

from .conftest import assert_clean  # noqa: E402


def _compare(lab, run_id, *, model, prompt, decode, trials, peer_device="auto"):
    folder = build_peer(repo_root(), model, 2, 7, log=lambda line: None)
    upload = f"{run_id}-peer-{model}-{peer_device}"
    options = {"suite": "peer_bench", "key": folder.name, "model": model, "layers": 2, "prompt": prompt,
               "decode": decode, "trials": trials, "peer_device": peer_device, "upload": upload}
    run = lab.run_page(options, timeout_s=900)
    assert_clean(run)
    results = lab.server.results_root / upload
    report = run.report
    assert report["result"] == "not checked" and run.status_text.startswith("NOT CHECKED:"), run.status_text
    report["oracle"] = verify_peer_report(report, lambda name: (results / name).read_bytes())
    table = format_peer_bench(report)
    print("\n" + table)
    (results / "compare.txt").write_text(table + "\n")
    for engine, verdict in report["oracle"].items():
        assert verdict["passed"], f"{engine}: {verdict}"
    for engine in ("ours", "peer"):
        assert report["engines"][engine]["timed_tokens_agree"], f"{engine}'s timed rounds chose other tokens"
        assert len(report["engines"][engine]["rounds"]) == trials
    assert report["ratio"]["prefill"] > 0 and report["ratio"]["decode"] > 0
    assert "ours / peer" in run.page_text
    return report


def test_tiny_both_engines_match_transformers(lab, run_id):
    """auto: on SwiftShader (subgroups of 4) the peer gets a device of its own without subgroups."""
    report = _compare(lab, run_id, model="tiny", prompt=32, decode=8, trials=2)
    assert not report["options"]["share_device"], "SwiftShader's subgroups are 4 wide: auto must not share"


@pytest.mark.full
def test_tiny_shared_device_subgroup_kernels_are_wrong_on_swiftshader(lab, run_id):
    """What `auto` avoids: ORT-web's subgroup kernels on SwiftShader's 4-wide subgroups, at a 128-token prefill."""
    with pytest.raises(AssertionError, match="peer: .*logits off"):
        _compare(lab, run_id, model="tiny", prompt=128, decode=2, trials=1, peer_device="shared")


@pytest.mark.full
def test_llama_two_layers_both_engines_match_transformers(lab, run_id):
    _compare(lab, run_id, model="llama", prompt=32, decode=2, trials=1)


def test_the_compare_view_runs_the_peer_as_side_b(lab, results_dir):
    """The page's compare view with b=ort-web: ours (f32) against ONNX Runtime Web, both judged by the dev
    server's oracle (the peer build found through vendor/peer/index.json)."""
    build_peer(repo_root(), "tiny", 2, 7, log=lambda line: None)
    shot = results_dir / "demo-compare-peer.png"
    run = lab.run_page({"suite": "compare", "a": "f32", "b": "ort-web", "prompt": 16, "decode": 4, "rounds": 2},
                       timeout_s=600, screenshot=shot)
    assert_clean(run)
    assert run.status_text.startswith("PASS: tiny (made up), 2 layers: decode "), run.status_text
    assert [r["verdict"] for r in run.report["oracle"]["runs"]] == ["passed", "passed"]
    assert "Side b is a peer engine: ort-web (ONNX Runtime Web 1.30.0" in run.page_text
    assert not run.report["sides"]["b"]["share_device"]          # SwiftShader: auto gives it its own device
