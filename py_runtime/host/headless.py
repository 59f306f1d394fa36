"""Runs the lab page in headless Chromium through Playwright and returns what the page reported.

Used by the e2e tests and by `webgpu-llm-lab check --backend browser`. Every wait is bounded: the
page publishes its state on `window.__lab`, and we poll it with a timeout rather than trusting a
single `page.evaluate` (Playwright's default timeout does not bound evaluate).
"""

from __future__ import annotations

import json
import os
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from .serve import LabServer

__all__ = ["HeadlessLab", "PageRun", "chromium_path", "CHROMIUM_ARGS"]

CHROMIUM_ARGS = [
    "--enable-unsafe-webgpu",
    "--enable-webgpu-developer-features",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def chromium_path() -> str:
    """LAB_CHROMIUM (e.g. the GPU host's launcher), else Debian's /usr/bin/chromium."""
    path = os.environ.get("LAB_CHROMIUM", "/usr/bin/chromium")
    if not Path(path).exists():
        raise FileNotFoundError(f"no Chromium at {path}: run scripts/setup.sh (installs Debian's chromium) "
                                f"or set LAB_CHROMIUM")
    return path


@dataclass
class PageRun:
    state: str                      # "done", "error" or "timeout"
    report: dict | None
    error: str | None
    stage: str | None
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    status_text: str = ""           # what the page shows in its status box
    page_text: str = ""             # the whole rendered page as text (tables, chart labels)
    progress: dict = field(default_factory=dict)    # stage -> {"done", "total"}: the last update shown


class HeadlessLab:
    """A dev server in a thread plus one headless Chromium; use as a context manager."""

    def __init__(self, *, web_root: Path, results_root: Path, extra_args: list[str] | None = None):
        self.server = LabServer(web_root=web_root, results_root=results_root)
        self.extra_args = extra_args or []

    def __enter__(self) -> "HeadlessLab":
        from playwright.sync_api import sync_playwright

        self.server.start_in_thread()
        self._playwright = sync_playwright().start()
        self.browser = self._playwright.chromium.launch(
            executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS + self.extra_args)
        return self

    def __exit__(self, *exc):
        try:
            self.browser.close()
            self._playwright.stop()
        finally:
            self.server.shutdown()
            self.server.server_close()

    @property
    def url(self) -> str:
        return self.server.url

    @staticmethod
    def _wait_until_done(page, timeout_s: float, on_progress) -> bool:
        """Wait (bounded) for the page to leave the running state, in slices of a second so progress
        can be relayed between them (and once more at the end). False on timeout."""
        deadline = time.monotonic() + timeout_s
        shown: dict = {}
        while True:
            slice_s = min(1.0, deadline - time.monotonic()) if on_progress else deadline - time.monotonic()
            try:
                page.wait_for_function("window.__lab && window.__lab.state !== 'running'",
                                       timeout=max(1.0, slice_s * 1000), polling=250)
                done = True
            except Exception:  # Playwright's TimeoutError
                done = False
            if on_progress:
                state = json.loads(page.evaluate("JSON.stringify(window.__lab ? window.__lab.progress : {})"))
                for stage, counts in state.items():
                    if shown.get(stage) != counts:
                        shown[stage] = counts
                        on_progress(stage, counts["done"], counts["total"])
            if done or time.monotonic() >= deadline:
                return done

    def run_page(self, query: dict | None = None, *, timeout_s: float = 300.0, path: str = "",
                 init_script: str | None = None, screenshot: Path | None = None,
                 base_url: str | None = None, on_progress=None) -> PageRun:
        """Open the page with `query`, wait (bounded) for it to finish. `init_script` runs before
        the page's own scripts (tests use it to take WebGPU away); `base_url` points the browser
        at another server; `on_progress(stage, done, total)` hears the page's progress while it runs
        (polled about once a second)."""
        page = self.browser.new_page()
        if init_script:
            page.add_init_script(init_script)
        console_errors, page_errors = [], []
        page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: page_errors.append(str(e)))
        try:
            url = (base_url or self.url) + path + ("?" + urllib.parse.urlencode(query) if query else "")
            page.goto(url, timeout=30_000)
            if not self._wait_until_done(page, timeout_s, on_progress):
                stage = page.evaluate("window.__lab ? window.__lab.stage : null")
                return PageRun("timeout", None, f"page did not finish within {timeout_s} s", stage,
                               console_errors, page_errors)
            state = json.loads(page.evaluate("JSON.stringify(window.__lab)"))
            if screenshot:
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(screenshot), full_page=True)
            state["status_text"] = page.inner_text("#status")
            state["page_text"] = page.inner_text("body")
            return PageRun(state["state"], state.get("result"), state.get("error"), state.get("stage"),
                           console_errors, page_errors, state["status_text"], state["page_text"],
                           state.get("progress", {}))
        finally:
            page.close()
