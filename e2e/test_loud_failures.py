"""Failures are loud: shown on the page, rejected as a promise, bounded in time."""

from __future__ import annotations

import json
import shutil

import pytest

from py_runtime.host.serve import LabServer


def _run_on(lab, web, tmp_path):
    """The page served from another web root, in the session's browser."""
    server = LabServer(web_root=web, results_root=tmp_path / "results")
    server.start_in_thread()
    try:
        return lab.run_page(timeout_s=120, base_url=server.url)
    finally:
        server.shutdown()
        server.server_close()


def test_missing_asset_fails_visibly(tmp_path, lab):
    web = tmp_path / "web"
    shutil.copytree(lab.server.web_root, web, ignore=shutil.ignore_patterns("webgpu_llm_lab-*.whl"))
    manifest = json.loads((web / "vendor/manifest.json").read_text())
    assert not (web / manifest["runtime"]["url"]).exists()
    run = _run_on(lab, web, tmp_path)
    assert run.state == "error"
    assert run.stage == "checking vendored wheels"
    assert "HTTP 404" in run.error and "webgpu_llm_lab" in run.error, run.error
    assert run.status_text.startswith("ERROR during checking vendored wheels")
    assert any("HTTP 404" in e for e in run.page_errors), run.page_errors   # the rejected promise


def test_tampered_wheel_fails_its_checksum(tmp_path, lab):
    web = tmp_path / "web"
    shutil.copytree(lab.server.web_root, web)
    manifest = json.loads((web / "vendor/manifest.json").read_text())
    wheel = web / manifest["runtime"]["url"]
    wheel.write_bytes(wheel.read_bytes() + b"tampered")
    run = _run_on(lab, web, tmp_path)
    assert run.state == "error"
    assert "does not match the manifest" in run.error


def test_unknown_url_option_is_an_error_naming_the_valid_ones(lab):
    run = lab.run_page({"suite": "unary", "lenghts": "4"}, timeout_s=120)
    assert run.state == "error"
    assert ("unknown URL option lenghts for suite 'unary'; valid: ['ops', 'lengths', 'seed', 'profile', 'max_wg', "
            "'sample', 'artifacts', 'suite', 'upload', 'timeout']") in run.error, run.error
    assert "unknown URL option lenghts" in run.status_text


def test_unknown_suite_lists_every_suite(lab):
    run = lab.run_page({"suite": "unray"}, timeout_s=120)
    assert run.state == "error"
    assert ("unknown suite 'unray'; suites: ['generate', 'compare', 'chat', 'unary', 'runtime', 'q4', 'elementwise', "
            "'decoder_blocks', 'attention', 'model', 'model_soak', 'tokenizer', 'model_bench', 'peer_bench', "
            "'kernel_bench', 'host_cost']") in run.error, \
        run.error


def test_bad_option_value_is_named(lab):
    run = lab.run_page({"suite": "unary", "ops": "exp,cube"}, timeout_s=120)
    assert run.state == "error"
    assert "option ops = ['exp', 'cube']: 'cube' is not allowed; ops takes a non-empty list of strings from" in run.error
    run = lab.run_page({"suite": "unary", "seed": "one"}, timeout_s=120)
    assert run.state == "error"
    assert "URL option seed='one': 'one' is not an integer" in run.error


@pytest.mark.parametrize("init_script,fragment", [
    ("Object.defineProperty(Navigator.prototype, 'gpu', { get: () => undefined });", "navigator.gpu is not available"),
    ("GPU.prototype.requestAdapter = async () => null;", "requestAdapter() returned null"),
])
def test_missing_webgpu_names_the_browser_flags(lab, init_script, fragment):
    run = lab.run_page(timeout_s=120, init_script=init_script)
    assert run.state == "error"
    assert fragment in run.error
    assert "--enable-unsafe-webgpu" in run.error
