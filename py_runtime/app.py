"""The one entry point behind the page, the CLI and the tests: options in, a JSON-able report out.

They differ only in the backend they pass, where artifacts go (an upload from the page, a dict in a
test, files from the CLI) and how progress is shown. The suites and their options are declared once,
in py_runtime.workloads.
"""

from __future__ import annotations

from .checks.outcome import RESULTS, no_progress
from .ops.tuning import tuning_table
from .runtime import Runtime
from .workloads import DEFAULT_SUITE, TUNING, get

__all__ = ["run"]


async def run(backend: str, options: dict | None = None, sink=None, progress=no_progress) -> dict:
    """Run `options["suite"]` (default: the registry's) with the rest of `options`, validated against its
    schema. `sink(name, bytes)` (async) receives artifacts; `progress(stage, done, total)` hears per case."""
    options = dict(options or {})
    workload = get(options.pop("suite", DEFAULT_SUITE))
    values = workload.validate(options)
    runtime = await Runtime.create(backend, tuning=values.pop(TUNING.name, None))
    report = await workload.runner(runtime, values, sink, progress)
    if report.get("result") not in RESULTS:
        raise RuntimeError(f"suite {workload.name!r} reported result {report.get('result')!r}, not one of {list(RESULTS)}")
    report["renderer"] = workload.renderer
    report["tuning"] = tuning_table(runtime.device.adapter.info).name      # the table that picked the variants
    return report
