"""The one entry point behind the page, the CLI and the tests: options in, a JSON-able report out.

They differ only in the backend they pass and where artifacts go (an upload from the page, a dict
in a test, files from the CLI).
"""

from __future__ import annotations

from .checks.host_cost import run_host_cost
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
    if suite == "host_cost":
        unknown = sorted(set(options) - {"dispatches", "steps", "artifacts"})
        if unknown:
            raise ValueError(f"unknown option(s) {unknown} for suite 'host_cost'; known: ['dispatches', 'steps']")
        return await run_host_cost(await Runtime.create(backend), dispatches=options.get("dispatches", 230),
                                   steps=options.get("steps", 50))
    raise ValueError(f"unknown suite {suite!r}; known: 'unary', 'runtime', 'host_cost'")
