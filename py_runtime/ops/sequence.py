"""A sequence's bookkeeping on the GPU, so decoding needs no host round trip per token.

  last_row       the last live row of the hidden state into a one-row tensor: the model head (final
                 norm, lm_head, argmax) reads one row at a prefill of S tokens as at a decode step
  TokenHistory   where the step's token (argmax's or the sampler's result, the next step's embedding input)
                 goes: position pos + tokens of the sequence's history, which the host reads in batches;
                 where the position lives on the GPU the store also advances the KV caches' position
                 offset. argmax(history=) and sample(history=) store it in their second pass.
  NextInput      where the chosen token's embedding row goes: the next decode step's input, which
                 argmax(embed=) or sample(embed=) writes in its second pass, so a decode step needs no
                 embedding dispatch.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dispatch import POS, TOKENS, Op, OpCall, Sizing, live_value, single
from ..tensors import Tensor
from .q4 import Q4Weight, embedding_row_params

__all__ = ["NextInput", "TokenHistory", "last_row"]


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
    the KV caches' shared position offset), for a sequence whose position lives on the GPU. argmax(history=)
    and sample(history=) store it in their second pass (no dispatch of its own)."""

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
        t = live_value(self.tokens, live, "token history")
        at = live_value(self.pos, live, "token history") + t
        if at >= capacity:
            raise ValueError(f"token history {self.history.name}: position {at} is past its {capacity} entries")
        return {"at": at, "capacity": capacity, "advance": t if self.advance else 0}

    def tensors(self) -> dict:
        return {"history": self.history, "offset": self.offset}

    @property
    def bytes_moved(self) -> int:
        return 16 if self.advance else 8


@dataclass(frozen=True)
class NextInput:
    """The chosen token's row of a Q4 embedding [vocab, dim] into out[0, :dim] (f32), as q4_embedding reads it
    (the same conventions, which are immutable controls here too): the next decode step's input."""

    weight: Q4Weight
    out: Tensor
    nibble_high_first: bool = False
    scales_transposed: bool = True

    def __post_init__(self) -> None:
        if self.out.dtype != "f32" or self.out.numel < self.weight.k:
            raise ValueError(f"next input: out {self.out!r} must be f32 with room for a row of {self.weight.k}")

    def check_head(self, head: str, values: Tensor, history: "TokenHistory | None") -> None:
        """A head (argmax, sample) writing this row: it must store its pick in a token history (the row goes
        with the step that pick starts), and every id it can pick must be a row of the embedding."""
        if history is None:
            raise ValueError(f"{head}: embed= (the next step's input) goes with a token history")
        if self.weight.n_total < values.numel:
            raise ValueError(f"{head}({values.name}): {values.numel} values, but the embedding "
                             f"{self.weight.packed.name} has only {self.weight.n_total} rows")

    def params(self) -> dict:
        return embedding_row_params(self.weight, nibble_high_first=self.nibble_high_first,
                                    scales_transposed=self.scales_transposed)

    def tensors(self) -> dict:
        return {"packed": self.weight.packed, "scales": self.weight.scales, "next_input": self.out}

    @property
    def bytes_moved(self) -> int:
        dim = self.weight.k
        return dim // 2 + 4 * dim // self.weight.group_size + 4 * dim
