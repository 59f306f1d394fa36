"""Routes as data: an op family lists its routes, each a name, a guard and a builder; one function
picks the route and records why.

A guard looks at a request (shapes, the adapter's features and limits, the run's options) and returns
None when its route can run there, or the reason it cannot. `choose` takes the first route whose guard
passes; the last route of a list usually has no guard (the fallback). A forced route is an option of
the same choice: it must exist and its guard must pass, so forcing can never run a kernel where it
would be wrong. Every choice is kept as a Decision, so a user can ask an op why it runs what it runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Generic, Sequence, TypeVar

__all__ = ["Route", "Decision", "RouteUnavailable", "choose", "always"]

Request = TypeVar("Request")


class RouteUnavailable(ValueError):
    pass


def always(_request) -> None:
    """The guard of a fallback route."""
    return None


@dataclass(frozen=True, kw_only=True)
class Route(Generic[Request]):
    name: str                                   # the attestation name (routes.py)
    build: Callable[[Request], object]          # the route's dispatch(es) for the request
    guard: Callable[[Request], str | None] = always


@dataclass(frozen=True)
class Decision:
    """Which route of `slot` an op took, and why each route before it was passed over."""

    op: str
    slot: str                                   # e.g. "decode" or "prefill" of a linear
    chosen: str | None                          # None: no route of the slot can run here
    passed_over: tuple[tuple[str, str], ...]    # (route, the reason its guard gave)
    forced: bool = False

    def explain(self) -> str:
        lines = [f"{self.op} [{self.slot}]: " + (f"{self.chosen}{' (forced)' if self.forced else ''}"
                                                  if self.chosen else "no route can run")]
        lines += [f"  not {name}: {reason}" for name, reason in self.passed_over]
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"op": self.op, "slot": self.slot, "chosen": self.chosen, "forced": self.forced,
                "passed_over": [list(pair) for pair in self.passed_over]}


def choose(routes: Sequence[Route], request, *, op: str, slot: str,
           force: str | None = None) -> tuple[Route | None, Decision]:
    """The first route whose guard passes (or the forced one, which must pass its guard), and the
    decision; (None, decision) when no route of the list can run."""
    if force is not None:
        named = [route for route in routes if route.name == force]
        if not named:
            raise RouteUnavailable(f"{op} [{slot}]: no route {force!r}; its routes are {[r.name for r in routes]}")
        reason = named[0].guard(request)
        if reason is not None:
            raise RouteUnavailable(f"{op} [{slot}]: route {force!r} cannot run here: {reason}")
        return named[0], Decision(op, slot, force, (), forced=True)
    passed_over = []
    for route in routes:
        reason = route.guard(request)
        if reason is None:
            return route, Decision(op, slot, route.name, tuple(passed_over))
        passed_over.append((route.name, reason))
    return None, Decision(op, slot, None, tuple(passed_over))
