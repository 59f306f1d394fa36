"""Showing progress cheaply: runners report (stage, done, total) per case; a display sees at most
one update per stage every `interval_s` seconds, plus each stage's first and last. A `detail` (see
checks/outcome.py) is passed on to `show` only where the runner gave one."""

from __future__ import annotations

import time
from typing import Callable

__all__ = ["Progress", "throttled"]

Progress = Callable[[str, int, int], None]


def throttled(show: Progress, interval_s: float, clock: Callable[[], float] = time.monotonic) -> Progress:
    last: dict[str, float] = {}

    def progress(stage: str, done: int, total: int, detail: dict | None = None) -> None:
        now = clock()
        if stage in last and done < total and now - last[stage] < interval_s:
            return
        last[stage] = now
        if detail is None:
            show(stage, done, total)
        else:
            show(stage, done, total, detail)

    return progress
