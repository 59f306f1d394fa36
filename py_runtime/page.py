"""Browser entry: web/main.js calls `main(query_json, on_progress)` and renders the JSON it returns.

`query_json` is the page URL's query as a JSON list of [key, text] pairs; the suite's declared
options (py_runtime.workloads) convert the text, so the page keeps no list of keys. With an `upload`
run id, inputs, outputs and the report are also POSTed to the dev server (/api/results/<run>/...),
which is how headless runs hand bulk data to the host oracle. `on_progress(stage, done, total)` (a JS
function) is called with plain strings and numbers only.
"""

from __future__ import annotations

import json
import re

from .app import run
from .checks.outcome import no_progress
from .workloads import DEFAULT_SUITE, get
from .workloads.progress import throttled
from .workloads.schema import from_text

__all__ = ["PAGE_KEYS", "main", "options_from_query"]

# The URL keys that are the page's, not the suite's: which suite, the upload run id, and main.js's
# limit in seconds for the whole run.
PAGE_KEYS = ("suite", "upload", "timeout")
PROGRESS_INTERVAL_S = 0.1


def _uploader(run_id: str):
    """A sink that POSTs each artifact to the dev server under results/<run_id>/."""
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", str(run_id)):
        raise ValueError(f"upload run id must be 1-64 of [A-Za-z0-9_-], got {run_id!r}")
    from .gpu.browser import post_bytes     # the browser backend: imported only where it runs

    async def sink(name: str, data: bytes) -> None:
        await post_bytes(f"/api/results/{run_id}/{name}", data)

    return sink


def options_from_query(pairs) -> tuple[dict, str | None]:
    """(app.run's options, the upload run id) from the URL's [key, text] pairs."""
    page = dict(pairs)
    workload = get(page.get("suite", DEFAULT_SUITE))
    options = {"suite": workload.name, **from_text(workload.name, workload.options, pairs, reserved=PAGE_KEYS)}
    run_id = page.get("upload")
    if run_id is not None and workload.option("artifacts") is not None:
        options.setdefault("artifacts", True)
    return options, run_id


async def main(query_json: str, on_progress=None) -> str:
    options, run_id = options_from_query([tuple(pair) for pair in json.loads(query_json or "[]")])
    sink = _uploader(run_id) if run_id is not None else None
    progress = throttled(on_progress, PROGRESS_INTERVAL_S) if on_progress is not None else no_progress
    report = await run("browser", options, sink, progress)
    text = json.dumps(report)
    if sink:
        await sink("report.json", text.encode())
    return text
