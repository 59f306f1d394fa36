"""Runs the lab page in a headless Chromium without Playwright: for the GPU host, which has a
Chromium bundle but no Playwright. The page uploads its report (or its error) to the dev server;
we wait for that file, bounded, then stop the browser.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
import urllib.parse
from pathlib import Path

from .headless import CHROMIUM_ARGS, chromium_path
from .serve import LabServer

__all__ = ["run_page_plain"]


def run_page_plain(*, web_root: Path, results_root: Path, query: dict, run_id: str, timeout_s: float = 600.0,
                   log: Path | None = None, extra_args: list[str] | None = None) -> tuple[str, dict | str]:
    """("done", report) or ("error" | "timeout", message); uploads land in results_root/run_id and
    Chromium's output in `log`. Both folders are created first: a fresh checkout has neither."""
    folder = Path(results_root).resolve() / run_id
    folder.parent.mkdir(parents=True, exist_ok=True)
    if log is not None:
        Path(log).parent.mkdir(parents=True, exist_ok=True)
    server = LabServer(web_root=web_root, results_root=results_root)
    server.start_in_thread()
    url = server.url + "?" + urllib.parse.urlencode({**query, "upload": run_id})
    with tempfile.TemporaryDirectory() as profile, open(log or "/dev/null", "ab") as sink:
        # --enable-logging=stderr puts the page's console messages into the log (as CONSOLE lines).
        browser = subprocess.Popen([chromium_path(), "--headless=new", "--no-sandbox", *CHROMIUM_ARGS, *(extra_args or []),
                                    "--enable-logging=stderr", f"--user-data-dir={profile}", url],
                                   stdout=sink, stderr=sink)
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if (folder / "report.json").exists():
                    return "done", json.loads((folder / "report.json").read_text())
                if (folder / "error.txt").exists():
                    return "error", (folder / "error.txt").read_text()
                if browser.poll() is not None:
                    return "error", f"Chromium exited with status {browser.returncode} before the page finished"
                time.sleep(0.25)
            return "timeout", f"no report from the page within {timeout_s} s"
        finally:
            browser.terminate()
            try:
                browser.wait(timeout=10)
            except subprocess.TimeoutExpired:
                browser.kill()
            server.shutdown()
            server.server_close()
