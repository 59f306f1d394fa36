"""What every runner's report shares: its tri-state result and the progress callback it is given.

A report's `result` says what the run itself judged: "passed" or "failed" when the runtime checked
something, "not checked" when it checked nothing (a benchmark, or outputs judged only by the host
oracle afterwards). Never "passed" for something that was not checked.

`progress(stage, done, total)` is called with plain values (a str and two ints) at most once per case,
never per dispatch; the caller throttles what it shows. A runner may add `detail`, a small JSON-able
dict (`text`: a line to show beside the bar; `tokens`: the ids generated so far), as a fourth argument.
"""

from __future__ import annotations

__all__ = ["PASSED", "FAILED", "NOT_CHECKED", "RESULTS", "verdict", "no_progress"]

PASSED, FAILED, NOT_CHECKED = "passed", "failed", "not checked"
RESULTS = (PASSED, FAILED, NOT_CHECKED)


def verdict(ok: bool) -> str:
    """The result of a run that checked something."""
    return PASSED if ok else FAILED


def no_progress(stage: str, done: int, total: int, detail: dict | None = None) -> None:
    """The default progress callback: report nothing."""
