"""Dispatch geometry for kernels that map one invocation to one element of a 1-D range."""

from __future__ import annotations

__all__ = ["linear_grid", "live_value", "resolve_length", "live_limit", "MAX_PER_DIM_KEY"]

# Plans carry the device limit among their live values, so sizing functions stay pure.
MAX_PER_DIM_KEY = "max_workgroups_per_dim"


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
