"""The dispatch vocabulary that plans and ops share: an op's dispatch (OpCall), what it looks like at
the current live sizes (Sizing), the live sizes themselves, and the grid arithmetic.

It sits below both: ops build OpCalls, plans record and resize them, and neither imports the other.

Live sizes are the per-step quantities a recorded plan follows without being rebuilt. Each has one
name, used by every op and every plan:
  TOKENS  the step's token rows (a prefill's prompt length, 1 in a decode step)
  POS     the position of the step's first token in the sequence (RoPE, the KV cache)
  LENGTH  the element count of a one-dimensional op (the elementwise checks)
  CONTEXT a bound on the keys a decode step attends (a decoder keeping the position on the GPU sets a
          band's top, ops.attention.context_band, so the plan changes state only when a band is crossed)
An op takes either a fixed int or the name of a live size for each of these.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Mapping

from .kernels import Kernel
from .tensors import Tensor

__all__ = ["Op", "OpCall", "Sizing", "single", "idle_where", "IDLE", "runs_at", "TOKENS", "POS", "LENGTH", "CONTEXT",
           "MAX_PER_DIM_KEY", "linear_grid", "live_limit", "live_value", "resolve_length"]

TOKENS = "tokens"
POS = "pos"
LENGTH = "n"
CONTEXT = "context"
# Plans carry the device limit among their live values, so sizing functions stay pure.
MAX_PER_DIM_KEY = "max_workgroups_per_dim"
IDLE = (0, 0, 0)


@dataclass(frozen=True, kw_only=True)
class Sizing:
    """What an op's dispatch looks like at the current live sizes."""

    workgroups: tuple[int, int, int]
    params: bytes = b""
    bytes_moved: int = 0
    flops: int = 0


@dataclass(frozen=True, kw_only=True)
class OpCall:
    """One dispatch of one op: the kernel its route chose, the tensors it binds (by the kernel's
    binding names; the params binding is added from the registry), and how it sizes itself."""

    label: str
    kernel: str
    route: str
    tensors: Mapping[str, Tensor]
    sizing: Callable[[Kernel, Mapping[str, int]], Sizing]
    constants: Mapping[str, float] | None = None
    phase: str = "any"      # "decode": runs at 1 live token only; "prefill": at more; "any": at every count
    runs: Callable[[int], bool] | None = None      # within its phase, only at the token counts this accepts
    attests: tuple[str, ...] = ()   # routes it attests beside `route` (kv_f16: the cache in shader-f16 types)

    def runs_with(self, tokens: int) -> bool:
        """Whether it runs at this live token count; where not, its sizing gives IDLE workgroups (so a plan
        may idle it without sizing it)."""
        if self.phase != "any" and self.phase != ("decode" if tokens == 1 else "prefill"):
            return False
        return self.runs is None or self.runs(tokens)


@dataclass(frozen=True)
class Op:
    """What every op builder returns: its dispatches in plan order (`await plan.add(op)` adds them all),
    and the route decisions behind them (`op.explain()` says which route runs and why the others do not).
    A linear records a decode and a prefill dispatch; at any live size the one that does not apply idles."""

    name: str
    calls: tuple[OpCall, ...]
    decisions: tuple = ()           # routing.Decision, one per routed slot

    def __iter__(self):
        return iter(self.calls)

    def __len__(self) -> int:
        return len(self.calls)

    @property
    def call(self) -> OpCall:
        """The dispatch of a one-dispatch op."""
        if len(self.calls) != 1:
            raise ValueError(f"{self.name} has {len(self.calls)} dispatches ({[c.label for c in self.calls]}), not one")
        return self.calls[0]

    @property
    def routes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(call.route for call in self.calls))

    def at(self, tokens: int) -> tuple[OpCall, ...]:
        """The dispatches that run at this live token count (the others idle)."""
        return tuple(call for call in self.calls if call.runs_with(tokens))

    def explain(self) -> str:
        if not self.decisions:
            return f"{self.name}: {', '.join(self.routes)} (one route)"
        return "\n".join(decision.explain() for decision in self.decisions)


def single(call: OpCall) -> Op:
    """The Op of a one-dispatch, one-route op."""
    return Op(call.label, (call,))


def idle_where(op: Op, other: OpCall) -> Op:
    """`op` (sized by the live TOKENS), each dispatch idle at the token counts where `other` runs (a fused
    dispatch doing the same work there)."""
    def idled(call: OpCall) -> OpCall:
        def runs(tokens: int) -> bool:
            return not other.runs_with(tokens) and call.runs_with(tokens)

        def sizing(spec, live):
            sized = call.sizing(spec, live)
            return sized if runs(live[TOKENS]) else Sizing(workgroups=IDLE, params=sized.params)

        return replace(call, runs=runs, sizing=sizing)

    return Op(op.name, tuple(idled(call) for call in op.calls), op.decisions)


def runs_at(workgroups) -> bool:
    """An alternative route idles with zero workgroups (a valid, empty dispatch)."""
    return workgroups[0] * workgroups[1] * workgroups[2] > 0


def linear_grid(length: int, invocations: int, max_per_dim: int) -> tuple[int, int, int]:
    """Workgroup counts covering `length` elements, spilling into y past `max_per_dim` groups.

    Kernels rebuild the index as gid.y * (num_workgroups.x * WG) + gid.x and bound-check it, so
    the last row may be partly idle.
    """
    if length < 0 or invocations <= 0 or max_per_dim <= 0:
        raise ValueError(f"bad grid request: length={length}, invocations={invocations}, max_per_dim={max_per_dim}")
    groups = max(1, -(-length // invocations))
    if groups <= max_per_dim:
        return (groups, 1, 1)
    rows = -(-groups // max_per_dim)
    if rows > max_per_dim:
        raise ValueError(f"{length} elements need {groups} workgroups of {invocations}: more than "
                         f"{max_per_dim}^2, the 2-D grid limit")
    return (max_per_dim, rows, 1)


def live_limit(live) -> int:
    return int(live.get(MAX_PER_DIM_KEY, 65535))


def live_value(value, live, op: str = "op") -> int:
    """A size an op was given: a fixed int, or the name of one of the plan's live sizes."""
    if not isinstance(value, str):
        return value
    if value not in live:
        raise KeyError(f"{op}: live size {value!r} is not set on the plan (it has {sorted(live)})")
    return live[value]


def resolve_length(length, live, tensor, kernel: str) -> int:
    """An op's element count: a fixed int, or the name of a live size; checked against the tensor."""
    length = live_value(length, live, kernel)
    if length < 0 or length > tensor.numel:
        raise ValueError(f"{kernel}: length {length} outside tensor {tensor.name!r} of {tensor.numel} elements")
    return int(length)
