"""Runtime core through the native backend: the same checks the page runs (e2e/test_runtime_core_browser.py)."""

from __future__ import annotations

import asyncio

from py_runtime.checks.runtime_core import run_runtime_checks
from py_runtime.host.oracle import verify_runtime_report
from py_runtime.runtime import Runtime


def test_caching_resize_profiler_attestation_and_error_paths():
    async def run():
        artifacts = {}

        async def sink(name, data):
            artifacts[name] = data

        report = await run_runtime_checks(await Runtime.create("native"), sink=sink)
        return report, artifacts

    report, artifacts = asyncio.run(run())
    verify_runtime_report(report, artifacts.__getitem__)
    pages = report["params_pages"]
    assert pages["passed"] and pages["pages"][1] > pages["pages"][0] >= 1, pages
