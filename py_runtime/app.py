"""The one entry point behind the page, the CLI and the tests: options in, a JSON-able report out.

They differ only in the backend they pass and where artifacts go (an upload from the page, a dict
in a test, files from the CLI).
"""

from __future__ import annotations

from .runtime import Runtime
from .selfcheck import CheckOptions, run_unary_check

__all__ = ["run"]


async def run(backend: str, options: dict | None = None, sink=None) -> dict:
    options = dict(options or {})
    suite = options.pop("suite", "unary")
    if suite != "unary":
        raise ValueError(f"unknown suite {suite!r}; known: 'unary'")
    check_options = CheckOptions.from_json(options)
    runtime = await Runtime.create(backend)
    return await run_unary_check(runtime, check_options, sink)
