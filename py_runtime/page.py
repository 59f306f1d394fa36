"""Browser entry: web/main.js calls `main(options_json)` and renders the JSON it returns.

With an `upload` run id, inputs, outputs and the report are also POSTed to the dev server
(/api/results/<run>/...), which is how headless runs hand bulk data to the host oracle.
"""

from __future__ import annotations

import json
import re

from .app import run
from .gpu.browser import post_bytes

__all__ = ["main"]


def _uploader(run_id: str):
    """A sink that POSTs each artifact to the dev server under results/<run_id>/."""
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", str(run_id)):
        raise ValueError(f"upload run id must be 1-64 of [A-Za-z0-9_-], got {run_id!r}")

    async def sink(name: str, data: bytes) -> None:
        await post_bytes(f"/api/results/{run_id}/{name}", data)

    return sink


async def main(options_json: str) -> str:
    options = json.loads(options_json or "{}")
    run_id = options.pop("upload", None)
    sink = None
    if run_id is not None:
        sink = _uploader(run_id)
        options.setdefault("artifacts", True)
    report = await run("browser", options, sink)
    text = json.dumps(report)
    if sink:
        await sink("report.json", text.encode())
    return text
