"""The demo page as a person uses it (headless Chromium, SwiftShader): the default view runs a model and
shows its speed, tokens, routes, kernel shares and the transformers oracle's verdict; a changed control
re-runs and lands in the URL; a bad value is refused at its control; Stop ends a run and the next one
works; the JSON download is the report; the compare and kernels views; no oracle means "not checked"."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

from py_runtime.host.serve import LabServer

from .conftest import assert_clean


def _open(lab, query: dict | None = None, base_url: str | None = None, init_script: str | None = None):
    page = lab.browser.new_page(accept_downloads=True)
    if init_script:
        page.add_init_script(init_script)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((base_url or lab.url) + ("?" + urllib.parse.urlencode(query) if query else ""), timeout=30_000)
    return page, errors


def _settle(page, timeout_s: float) -> str:
    """Wait (bounded) for the page's current run to end; its state."""
    page.wait_for_function("window.__lab && window.__lab.state !== 'running'", timeout=timeout_s * 1000, polling=250)
    return page.evaluate("window.__lab.state")


def _set(page, control: str, value: str) -> None:
    """Type into a control as a person does (the change event fires on leaving it)."""
    page.fill(f"#control-{control}", value)
    page.press(f"#control-{control}", "Tab")


def _speed(page) -> dict:
    cells = page.locator("#summary table tbody tr td").all_inner_texts()
    return {"prefill": float(cells[0]), "ttft": float(cells[1].removesuffix(" ms")), "decode": float(cells[2])}


def test_the_default_page_runs_a_model_and_a_person_can_rerun_refuse_stop_and_download(lab, results_dir):
    page, errors = _open(lab)
    try:
        assert _settle(page, 300) == "done", page.inner_text("#status")
        page.screenshot(path=str(results_dir / "demo-model.png"), full_page=True)
        status = page.inner_text("#status")
        assert status.startswith("PASS: tiny (made up), 2 layers, int8x: decode "), status
        assert "Oracle (HF transformers, float64, on the dev server): PASSED" in page.inner_text("#verdict")
        assert "Size small: SwiftShader Device (Subzero) is a fallback (CPU) adapter" in page.inner_text("#choice")
        speed = _speed(page)
        assert speed["prefill"] > 0 and speed["ttft"] > 0 and speed["decode"] > 0, speed
        tokens = [int(t) for t in page.inner_text("#cases .tokens").split()]
        assert len(tokens) == 33 and all(0 <= t < 512 for t in tokens), tokens
        assert page.inner_text("#live").split("33 ids:")[1].split() == [str(t) for t in tokens]
        progress = page.inner_text("#progress")
        for line in ("boot: 5/5", "pipelines: 3/3", "weights: 1/1", "prefill: 1/1 · 32 tokens",
                     "decode: 32/32 · 32 tokens", "oracle: 1/1 · passed"):
            assert line in progress, progress
        assert "tok/s" in progress.split("decode: 32/32")[1].splitlines()[0]
        routes = page.inner_text("#cases")
        assert "q4_gemv_int8x_glu_q8" in routes and "q4_gemm_dp4a" in routes and "sdpa_flash_subgroup" in routes
        assert page.locator("#timings tbody tr").count() >= 15
        decode_rows = [row for row in page.locator("#timings tbody tr").all_inner_texts() if row.split()[0] == "decode"]
        assert page.locator("#chart svg rect").count() == len(decode_rows) >= 6     # a bar per decode kernel
        label_ends = page.eval_on_selector_all("#chart svg text", "ts => ts.map(t => t.getBBox().x + t.getBBox().width)")
        bars_start = float(page.locator("#chart svg rect").first.get_attribute("x"))
        assert max(label_ends[:len(decode_rows)]) < bars_start, (label_ends, bars_start)     # no name runs under a bar
        assert "swiftshader" in page.inner_text("#adapter")

        with page.expect_download(timeout=10_000) as download:
            page.click("#download")
        saved = json.loads(Path(download.value.path()).read_text())
        assert saved["tokens"] == tokens and saved["oracle"]["verdict"] == "passed" and saved["result"] == "passed"

        # A changed control re-runs in place and is mirrored in the URL.
        _set(page, "prompt", "8")
        _set(page, "decode", "4")
        page.click("#run")
        assert _settle(page, 180) == "done", page.inner_text("#status")
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(page.url).query))
        assert query == {"prompt": "8", "decode": "4"}, page.url
        assert len(page.inner_text("#cases .tokens").split()) == 5
        assert page.inner_text("#status").startswith("PASS:")

        # A bad value is refused at its control, with what the option takes; Run waits for a good one.
        _set(page, "layers", "0")
        assert "option layers = 0: not allowed; layers takes an integer >= 1" in page.inner_text("#error-layers")
        assert page.is_disabled("#run")
        _set(page, "layers", "")
        assert page.inner_text("#error-layers") == "" and page.is_enabled("#run")

        # Stop ends a long run once its tokens arrive; its buffers are released and the next run works.
        _set(page, "decode", "400")
        page.click("#run")
        page.wait_for_function("window.__lab.progress.decode && window.__lab.progress.decode.done >= 8",
                               timeout=180_000, polling=100)
        page.click("#stop")
        assert _settle(page, 60) == "stopped"
        assert page.inner_text("#status").startswith("STOPPED: stopped during decode"), page.inner_text("#status")
        assert page.evaluate("window.__lab.progress.decode.done") < 400
        _set(page, "decode", "2")
        page.click("#run")
        assert _settle(page, 180) == "done" and page.inner_text("#status").startswith("PASS:")
        assert page.evaluate("window.__lab.runs") == 4
    finally:
        page.close()
    assert not errors, errors


# The adapter's info as a GPU's (the real subgroup sizes kept): what the page sees on the H200.
GPU_INFO = """
const real = Object.getOwnPropertyDescriptor(GPUAdapter.prototype, "info").get;
Object.defineProperty(GPUAdapter.prototype, "info", { get() {
  const info = real.call(this);
  return { vendor: "nvidia", architecture: "hopper", device: "0x2335", description: "NVIDIA H200",
           isFallbackAdapter: false, subgroupMinSize: info.subgroupMinSize, subgroupMaxSize: info.subgroupMaxSize };
} });
"""


def test_on_a_gpu_adapter_the_default_is_the_real_model_at_full_depth_and_stop_ends_its_build(lab):
    """The adapter's info says GPU (faked by an init script: SwiftShader cannot run the real geometry in CI
    time), so size=auto picks Llama-3.2-1B at its 16 layers; Stop during the pipelines releases it at once."""
    page, errors = _open(lab, init_script=GPU_INFO)
    try:
        page.wait_for_function("window.__lab.progress.pipelines && window.__lab.progress.pipelines.done >= 1",
                               timeout=120_000, polling=100)
        assert page.evaluate("window.__lab.progress.pipelines.total") == 16 + 1      # every layer, then the head
        page.click("#stop")
        assert _settle(page, 60) == "stopped"
        assert page.inner_text("#status").startswith("STOPPED: stopped during pipelines"), page.inner_text("#status")
        assert "weights" not in page.evaluate("window.__lab.progress")
    finally:
        page.close()
    assert not errors, errors


def test_a_bad_url_value_is_refused_at_its_control_before_anything_runs(lab):
    page, errors = _open(lab, {"layers": "0", "model": "gpt2", "seed": "3"})
    try:
        assert _settle(page, 120) == "error"
        status = page.inner_text("#status")
        assert status.startswith("ERROR during checking the URL's options: refused: "), status
        assert "layers takes an integer >= 1" in page.inner_text("#error-layers")
        assert "model takes a string from ['llama', 'qwen3', 'tiny', 'awkward']" in page.inner_text("#error-model")
        assert page.get_attribute("#control-model", "aria-invalid") == "true"
        assert page.input_value("#control-seed") == "3" and page.inner_text("#error-seed") == ""
        assert "decode" not in page.evaluate("window.__lab.progress")       # nothing ran
    finally:
        page.close()
    assert any("refused" in e for e in errors), errors                       # the rejected promise


def test_the_compare_view_runs_two_policies_side_by_side(lab, results_dir):
    shot = results_dir / "demo-compare.png"
    run = lab.run_page({"suite": "compare", "prompt": 8, "decode": 4, "rounds": 2}, timeout_s=300, screenshot=shot)
    assert_clean(run)
    assert run.status_text.startswith("PASS: tiny (made up), 2 layers: decode "), run.status_text
    text = run.page_text
    assert "a (f32) against b (int8x), alternating over 2 rounds (medians)" in text
    assert "Tokens agree at " in text and " of 5 positions" in text
    assert [r["verdict"] for r in run.report["oracle"]["runs"]] == ["passed", "passed"]
    only_b = run.report["routes_differ"]["decode"]["only_b"]
    glu = next((r for r in only_b if r.startswith("q4_gemv_int8x_glu_q8")), None)     # its _norm route where it fits
    assert glu and glu in text.split("Routes that differ")[1], only_b
    assert "Per kernel: GPU µs of one profiled step, b − a" in text and "only b" in text
    assert shot.stat().st_size > 20_000


def test_the_kernels_view_runs_a_kernel_suite_through_the_registry(lab):
    run = lab.run_page({"suite": "unary", "ops": "exp,silu", "lengths": "4097"}, timeout_s=180)
    assert_clean(run)
    assert run.status_text.startswith("PASS: 2/2 unary checks"), run.status_text
    assert "Kernels" in run.page_text and "q4 (check)" in run.page_text and "kernel_bench (bench)" in run.page_text


def test_without_the_oracle_the_page_says_not_checked(lab, tmp_path):
    server = LabServer(web_root=lab.server.web_root, results_root=tmp_path, oracle=None)
    server.start_in_thread()
    try:
        run = lab.run_page({"prompt": 4, "decode": 2, "profile": 0}, timeout_s=180, base_url=server.url)
    finally:
        server.shutdown()
        server.server_close()
    assert run.state == "done", run.error
    assert run.report["result"] == "not checked" and run.report["oracle"]["verdict"] == "not checked"
    assert run.status_text.startswith("NOT CHECKED:"), run.status_text
    assert "Oracle: NOT CHECKED: this server has no oracle" in run.page_text and "PASS" not in run.page_text


def test_the_cli_relays_the_pages_progress(lab):
    """A browser run driven from the host hears the page's (stage, done, total) while it runs and at
    the end: what the CLI prints on stderr as progress bars."""
    heard = []
    run = lab.run_page({"suite": "unary", "ops": "exp,silu,tanh", "lengths": "4097"}, timeout_s=180,
                       on_progress=lambda stage, done, total: heard.append((stage, done, total)))
    assert run.state == "done", run.error
    ops = [update for update in heard if update[0] == "unary ops"]
    assert ops and ops[-1][1] == ops[-1][2] == 3, heard
    assert [done for _, done, _ in ops] == sorted(done for _, done, _ in ops)
