"""The plain-Chromium driver (the GPU host's) on a fresh checkout: no results/ folder yet."""

from __future__ import annotations

import stat

from py_runtime.host.plain_browser import run_page_plain


def test_plain_driver_creates_its_results_folder_and_log(tmp_path, monkeypatch):
    # A stand-in Chromium that writes a line and exits at once: the driver's setup (results
    # folder, log file, server) runs for real, and no browser or GPU is needed.
    fake = tmp_path / "chromium"
    fake.write_text("#!/bin/sh\necho fake chromium started >&2\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("LAB_CHROMIUM", str(fake))
    web = tmp_path / "web"
    web.mkdir()
    results = tmp_path / "checkout" / "results"       # as cli.py passes it: root / "results"
    state, message = run_page_plain(web_root=web, results_root=results, query={"suite": "runtime"},
                                    run_id="fresh", timeout_s=10, log=results / "chromium.log")
    assert (state, message) == ("error", "Chromium exited with status 0 before the page finished")
    assert results.is_dir()
    assert "fake chromium started" in (results / "chromium.log").read_text()
