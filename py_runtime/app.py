"""The one entry point behind the page, the CLI and the tests: options in, a JSON-able report out.

They differ only in the backend they pass and where artifacts go (an upload from the page, a dict
in a test, files from the CLI).
"""

from __future__ import annotations

from .checks.runtime_core import run_runtime_checks
from .checks.unary import CheckOptions, run_unary_check
from .runtime import Runtime

__all__ = ["run"]


async def run(backend: str, options: dict | None = None, sink=None) -> dict:
    options = dict(options or {})
    suite = options.pop("suite", "unary")
    if suite == "unary":
        check_options = CheckOptions.from_json(options)
        return await run_unary_check(await Runtime.create(backend), check_options, sink)
    if suite == "runtime":
        unknown = sorted(set(options) - {"seed", "artifacts"})
        if unknown:
            raise ValueError(f"unknown option(s) {unknown} for suite 'runtime'; known: ['seed']")
        return await run_runtime_checks(await Runtime.create(backend), seed=options.get("seed", 77), sink=sink)
    raise ValueError(f"unknown suite {suite!r}; known: 'unary', 'runtime'")
