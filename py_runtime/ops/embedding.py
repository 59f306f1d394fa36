"""f32 embedding lookup: rows of a [vocab, D] table picked by u32 token ids, for the live tokens.

Out-of-range ids (>= the table's rows) are handled on the GPU: the kernel never uses them as an
address, writes that token's row as zeros and sets status[t] = 1 (0 for a valid id). Validating
on the host would need the ids on the host, which decode does not have without a round trip (the
next id comes from the GPU's argmax); a per-token status word needs no clearing between steps
because every dispatch rewrites it for each live token. The caller reads status when it wants to
know (the check reads it every step).
"""

from __future__ import annotations


from ..dispatch import Op, OpCall, Sizing, TOKENS, linear_grid, live_limit, live_value, single
from ..tensors import Tensor

__all__ = ["embedding_f32"]


def embedding_f32(*, ids: Tensor, table: Tensor, out: Tensor, status: Tensor, tokens: int | str = TOKENS) -> Op:
    """out[t] = table[ids[t]] (zeros and status[t] = 1 when ids[t] >= vocab) for t < tokens."""
    if ids.dtype != "u32" or status.dtype != "u32":
        raise ValueError(f"embedding_f32: ids {ids!r} and status {status!r} must be u32")
    vocab, d = table.shape
    if table.dtype != "f32" or out.dtype != "f32" or out.shape[-1] != d:
        raise ValueError(f"embedding_f32: table {table!r} and out {out!r} must be f32 rows of {d}")
    capacity = min(ids.numel, status.numel, out.numel // d)

    def sizing(spec, live) -> Sizing:
        t = live_value(tokens, live, "embedding_f32")
        if not 0 <= t <= capacity:
            raise ValueError(f"embedding_f32({out.name}): {t} tokens, but ids/status/out hold {capacity}")
        n = t * d
        groups = linear_grid(n, spec.invocations, live_limit(live)) if n else (0, 1, 1)
        return Sizing(workgroups=groups, params=spec.pack_params(tokens=t, d=d, vocab=vocab),
                      bytes_moved=4 * (2 * n + 2 * t), flops=0)

    return single(OpCall(label=f"embedding_f32({out.name})", kernel="embedding_f32", route="embedding_f32",
                  tensors={"ids": ids, "table": table, "out": out, "status": status}, sizing=sizing))
