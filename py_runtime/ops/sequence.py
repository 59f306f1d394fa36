"""A sequence's bookkeeping on the GPU, so decoding needs no host round trip per token.

  last_row       the last live row of the hidden state into a one-row tensor: the model head (final
                 norm, lm_head, argmax) reads one row at a prefill of S tokens as at a decode step
  token_history  the step's token (argmax's or the sampler's result, the next step's embedding input) stored
                 at position pos + tokens of the sequence's history, which the host reads in batches;
                 where the position lives on the GPU it also advances the KV caches' position offset
                 (TokenHistory says where; argmax's reduce can do the same store itself)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dispatch import POS, TOKENS, Op, OpCall, Sizing, live_value, single
from ..tensors import Tensor

__all__ = ["TokenHistory", "last_row", "token_history"]


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


@dataclass(frozen=True)
class TokenHistory:
    """Where a step's token goes: history[pos + offset[0] + tokens] (u32), the token generated after
    positions pos + offset[0] .. + tokens - 1; `advance` then adds the step's tokens to offset[0] (u32 [1],
    the KV caches' shared position offset), for a sequence whose position lives on the GPU. token_history
    does it alone; argmax(history=) in its reduce (a dispatch fewer)."""

    history: Tensor
    offset: Tensor
    tokens: int | str = TOKENS
    pos: int | str = POS
    advance: bool = False

    def __post_init__(self) -> None:
        if self.history.dtype != "u32":
            raise ValueError(f"token history {self.history!r} must be u32")
        if self.offset.dtype != "u32" or self.offset.shape != (1,):
            raise ValueError(f"token history: the position offset {self.offset!r} must be u32 [1]")

    def params(self, live) -> dict:
        """The kernels' at / capacity / advance at these live sizes."""
        capacity = self.history.numel
        t = live_value(self.tokens, live, "token_history")
        at = live_value(self.pos, live, "token_history") + t
        if at >= capacity:
            raise ValueError(f"token_history({self.history.name}): position {at} is past its {capacity} entries")
        return {"at": at, "capacity": capacity, "advance": t if self.advance else 0}

    def tensors(self) -> dict:
        return {"history": self.history, "offset": self.offset}

    @property
    def bytes_moved(self) -> int:
        return 16 if self.advance else 8


def token_history(*, next_id: Tensor, history: Tensor, offset: Tensor, tokens: int | str = TOKENS,
                  pos: int | str = POS, advance: bool = False) -> Op:
    """TokenHistory's store of next_id[0] (u32) as a dispatch of its own (one invocation)."""
    if next_id.dtype != "u32":
        raise ValueError(f"token_history: next_id {next_id!r} must be u32")
    where = TokenHistory(history, offset, tokens, pos, advance)

    def sizing(spec, live) -> Sizing:
        return Sizing(workgroups=(1, 1, 1), params=spec.pack_params(**where.params(live)), bytes_moved=where.bytes_moved)

    return single(OpCall(label=f"token_history({history.name})", kernel="token_history", route="token_history",
                         tensors={"next": next_id, **where.tensors()}, sizing=sizing))
