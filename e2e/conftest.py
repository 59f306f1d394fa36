"""Browser tests: Playwright drives Debian's headless Chromium (SwiftShader WebGPU here) against
the dev server. One browser and one server per session; the runtime wheel is rebuilt first if
py_runtime changed, so the page never runs stale code."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from py_runtime.host.headless import HeadlessLab
from py_runtime.host.vendor import ensure_current

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results"


@pytest.fixture(scope="session")
def lab():
    ensure_current(REPO)
    with HeadlessLab(web_root=REPO / "web", results_root=RESULTS) as lab:
        yield lab


@pytest.fixture(scope="session")
def run_id() -> str:
    return time.strftime("e2e-%Y%m%d-%H%M%S")


@pytest.fixture(scope="session")
def results_dir(run_id) -> Path:
    path = RESULTS / run_id
    path.mkdir(parents=True, exist_ok=True)
    return path


def assert_clean(run) -> None:
    """A finished run with no console or page errors."""
    detail = json.dumps({"state": run.state, "stage": run.stage, "error": run.error,
                         "console": run.console_errors, "page": run.page_errors})
    assert run.state == "done", detail
    assert not run.console_errors and not run.page_errors, detail
