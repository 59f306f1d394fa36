"""Argmax of a f32 vector on the GPU, in two passes, with a 4-byte result.

  pass 1 (argmax_blocks)  one workgroup per block of BLOCK elements -> (key, index) per block
  pass 2 (argmax_reduce)  one workgroup over the blocks -> result[0] = the winning index
                          (argmax_reduce_history: and the index appended to a token history, argmax(history=);
                          argmax_reduce_history_embed: and its embedding row written, argmax(embed=))

Semantics (numpy.argmax / torch.argmax): the largest value wins; NaN counts as larger than every
number (so the first NaN wins when there is one); -0 equals +0; ties go to the LOWEST index. The
kernels compare order-preserving u32 keys derived from the bits, never floats, so a compiler's
NaN-free assumptions cannot change the answer, and the (key, index) order is total, so the result
is exact and independent of the reduction's shape.
"""

from __future__ import annotations


from ..dispatch import Op, OpCall, Sizing, linear_grid, live_limit, live_value
from ..kernels import kernel
from ..tensors import Tensor
from .sequence import NextInput, TokenHistory

__all__ = ["BLOCK", "argmax", "argmax_blocks_needed"]

_BLOCKS = kernel("argmax_blocks")
BLOCK = _BLOCKS.invocations * _BLOCKS.template_values["ITEMS"]     # elements per argmax_blocks workgroup


def argmax_blocks_needed(n: int) -> int:
    return max(1, -(-n // BLOCK))


def argmax(*, values: Tensor, block_keys: Tensor, block_index: Tensor, result: Tensor,
           length: int | str | None = None, history: TokenHistory | None = None,
           embed: NextInput | None = None) -> Op:
    """The two dispatches of argmax(values[:length]) -> result[0] (u32); `length` may name a live size.
    `history`: the reduce also stores the winner there (TokenHistory: no dispatch of its own).
    `embed` (with a history): the reduce also writes the winner's embedding row (NextInput).

    block_keys/block_index (u32) need argmax_blocks_needed(length) elements."""
    if values.dtype != "f32" or {block_keys.dtype, block_index.dtype, result.dtype} != {"u32"}:
        raise ValueError("argmax: values must be f32; block_keys, block_index and result u32")
    if embed is not None:
        embed.check_head("argmax", values, history)
    length = values.numel if length is None else length
    blocks_capacity = min(block_keys.numel, block_index.numel)

    def counts(live) -> tuple[int, int]:
        n = live_value(length, live, "argmax")
        if not 1 <= n <= values.numel:
            raise ValueError(f"argmax({values.name}): length {n} outside 1..{values.numel}")
        blocks = argmax_blocks_needed(n)
        if blocks > blocks_capacity:
            raise ValueError(f"argmax({values.name}): {blocks} blocks, but block_keys/index hold {blocks_capacity}")
        return n, blocks

    def blocks_sizing(spec, live) -> Sizing:
        n, blocks = counts(live)
        return Sizing(workgroups=linear_grid(blocks, 1, live_limit(live)), params=spec.pack_params(n=n, blocks=blocks),
                      bytes_moved=4 * n + 8 * blocks, flops=n)

    def reduce_sizing(spec, live) -> Sizing:
        n, blocks = counts(live)
        stored = history.params(live) if history is not None else {}
        embedded = embed.params() if embed is not None else {}
        return Sizing(workgroups=(1, 1, 1), params=spec.pack_params(n=n, blocks=blocks, **stored, **embedded),
                      bytes_moved=8 * blocks + 4 + sum(part.bytes_moved for part in (history, embed) if part is not None),
                      flops=blocks)

    reduce_kernel = ("argmax_reduce" if history is None else
                     "argmax_reduce_history_embed" if embed is not None else "argmax_reduce_history")

    return Op(f"argmax({values.name})", (OpCall(label=f"argmax_blocks({values.name})", kernel="argmax_blocks", route="argmax",
                   tensors={"values": values, "block_keys": block_keys, "block_index": block_index}, sizing=blocks_sizing),
            OpCall(label=f"argmax_reduce({values.name})", kernel=reduce_kernel,
                   route="argmax", tensors={"block_keys": block_keys, "block_index": block_index, "result": result,
                                            **(history.tensors() if history is not None else {}),
                                            **(embed.tensors() if embed is not None else {})},
                   sizing=reduce_sizing)))
