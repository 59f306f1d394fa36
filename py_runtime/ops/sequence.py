"""A sequence's bookkeeping on the GPU, so decoding needs no host round trip per token.

  last_row       the last live row of the hidden state into a one-row tensor: the model head (final
                 norm, lm_head, argmax) reads one row at a prefill of S tokens as at a decode step
  token_history  the step's token (argmax's or the sampler's result, the next step's embedding input) stored
                 at position pos + tokens of the sequence's history, which the host reads in batches;
                 where the position lives on the GPU it also advances the KV caches' position offset
"""

from __future__ import annotations

from ..dispatch import POS, TOKENS, Op, OpCall, Sizing, live_value, single
from ..tensors import Tensor

__all__ = ["last_row", "token_history"]


def last_row(*, x: Tensor, out: Tensor, tokens: int | str = TOKENS) -> Op:
    """out[0] = x[tokens - 1] for x [>= tokens, d] and out [1, d] (f32)."""
    d = x.shape[-1]
    if x.dtype != "f32" or out.dtype != "f32" or out.numel != d:
        raise ValueError(f"last_row: x {x!r} must be f32 rows of {d} and out {out!r} one such row")
    capacity = x.numel // d

    def sizing(spec, live) -> Sizing:
        t = live_value(tokens, live, "last_row")
        if not 1 <= t <= capacity:
            raise ValueError(f"last_row({x.name}): {t} tokens, but x holds 1..{capacity} rows")
        return Sizing(workgroups=(-(-d // spec.invocations), 1, 1), params=spec.pack_params(tokens=t, d=d),
                      bytes_moved=8 * d)

    return single(OpCall(label=f"last_row({x.name})", kernel="last_row", route="last_row",
                         tensors={"x": x, "out": out}, sizing=sizing))


def token_history(*, next_id: Tensor, history: Tensor, offset: Tensor, tokens: int | str = TOKENS,
                  pos: int | str = POS, advance: bool = False) -> Op:
    """history[pos + offset[0] + tokens] = next_id[0] (u32): the token generated after positions
    pos + offset[0] .. + tokens - 1; `advance` then adds the step's tokens to offset[0] (u32 [1], the
    KV caches' shared position offset), for a sequence whose position lives on the GPU."""
    if next_id.dtype != "u32" or history.dtype != "u32":
        raise ValueError(f"token_history: next_id {next_id!r} and history {history!r} must be u32")
    if offset.dtype != "u32" or offset.shape != (1,):
        raise ValueError(f"token_history: the position offset {offset!r} must be u32 [1]")
    capacity = history.numel

    def sizing(spec, live) -> Sizing:
        t = live_value(tokens, live, "token_history")
        at = live_value(pos, live, "token_history") + t
        if at >= capacity:
            raise ValueError(f"token_history({history.name}): position {at} is past its {capacity} entries")
        return Sizing(workgroups=(1, 1, 1), params=spec.pack_params(at=at, capacity=capacity, advance=t if advance else 0),
                      bytes_moved=16 if advance else 8)

    return single(OpCall(label=f"token_history({history.name})", kernel="token_history", route="token_history",
                         tensors={"next": next_id, "history": history, "offset": offset}, sizing=sizing))
