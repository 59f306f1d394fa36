"""Seeded temperature / top-k / top-p sampling of a f32 logits vector on the GPU, in two passes, writing the
chosen id where argmax writes it (the next step's embedding input), so decoding stays free of readbacks.

  pass 1 (sample_blocks)  one workgroup per block of 2048 logits -> that block's top k (key, index) pairs
  pass 2 (sample_pick)    one workgroup over the blocks' candidates -> the top k ranked, softmax at the
                          temperature over them (f32), the top-p nucleus, one draw -> result[0]
                          (sample_pick_history: also stored in the token history; _embed: and the pick's
                          embedding row written, sample(embed=): the next decode step's input)

Order and ties are argmax's (the largest logit first, NaN above +inf, equal logits by the LOWEST index), and
top k is an exact selection, so temperature 0 or top_k 1 picks exactly argmax's id. The draw's uniform u
comes from a counter-based hash of (seed, position), where position is the sampled token's index in the
sequence (the token history's: pos + tokens + the GPU-side offset), so a run is reproducible for a seed and no
per-step host write is needed where the position lives on the GPU. Sampling always keeps the top k
(k <= TOP_K_CAP): the probability mass beyond the top 64 logits is never drawn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..dispatch import POS, TOKENS, Op, OpCall, Sizing, linear_grid, live_limit, live_value
from ..kernels import kernel
from ..tensors import Tensor
from .sequence import NextInput, TokenHistory

__all__ = ["BLOCK", "TOP_K_CAP", "MAX_VOCAB", "Sampling", "sample", "sample_candidates_needed"]

_BLOCKS = kernel("sample_blocks")
BLOCK = _BLOCKS.invocations * _BLOCKS.template_values["ITEMS"]     # logits per sample_blocks workgroup
TOP_K_CAP = 64              # sample.wgsl MAX_K: pass 2 ranks at most this many candidates in workgroup memory
MAX_VOCAB = 1 << 24         # indices share a 56-bit composite key with the logit's 32 bits: 24 bits for the index
MIN_TEMPERATURE = 1e-3      # below it a draw is greedy but for rounding (use 0), and (l - l_max) / T nears f32 overflow
_M32 = 0xFFFFFFFF


@dataclass(frozen=True, kw_only=True)
class Sampling:
    """How each token is drawn: softmax(logits / temperature) over the top_k logits, cut to the top_p nucleus,
    drawn with the uniform of (seed, position). temperature 0 or top_k 1 is greedy (argmax's id)."""

    temperature: float = 1.0
    top_k: int = 50
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self):
        problems = []
        t, k, p, seed = self.temperature, self.top_k, self.top_p, self.seed
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0 \
                or 0 < t < MIN_TEMPERATURE:
            problems.append(f"temperature {t!r} must be 0 (greedy) or a finite number >= {MIN_TEMPERATURE}")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= TOP_K_CAP:
            problems.append(f"top_k {k!r} must be an integer 1..{TOP_K_CAP} (the sampler ranks at most "
                            f"{TOP_K_CAP} candidates; 1 is greedy)")
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
            problems.append(f"top_p {p!r} must be a number in (0, 1] (1 keeps every top_k candidate)")
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= _M32:
            problems.append(f"seed {seed!r} must be an integer 0..2**32-1")
        if problems:
            raise ValueError("sampling: " + "; ".join(problems))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0 or self.top_k == 1

    def to_json(self) -> dict:
        return {"temperature": self.temperature, "top_k": self.top_k, "top_p": self.top_p, "seed": self.seed}

    @classmethod
    def or_greedy(cls, *, temperature: float, top_k: int, top_p: float, seed: int) -> "Sampling | None":
        """The options as the command line and the chat view take them: validated, and None where they are
        greedy (temperature 0 or top_k 1), so the decoder keeps argmax."""
        sampling = cls(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
        return None if sampling.greedy else sampling


def sample_blocks_needed(n: int) -> int:
    return max(1, -(-n // BLOCK))


def sample_candidates_needed(n: int) -> int:
    """Elements of each candidate buffer (keys, indices) for n logits at any top_k."""
    return sample_blocks_needed(n) * TOP_K_CAP


def sample(*, values: Tensor, candidate_keys: Tensor, candidate_index: Tensor, result: Tensor, offset: Tensor,
           sampling: Sampling, tokens: int | str = TOKENS, pos: int | str = POS, length: int | None = None,
           history: TokenHistory | None = None, embed: NextInput | None = None) -> Op:
    """The two dispatches drawing one id from values[:length] (f32 logits) into result[0] (u32) at the sequence
    position pos + tokens + offset[0] (u32 [1]); candidate_keys/index (u32) need sample_candidates_needed(length).
    `history` (at the same offset, tokens and pos): the pick pass also stores the id there (TokenHistory).
    `embed` (with a history): the pick pass also writes the pick's embedding row (NextInput)."""
    if values.dtype != "f32" or {candidate_keys.dtype, candidate_index.dtype, result.dtype} != {"u32"}:
        raise ValueError("sample: values must be f32; candidate_keys, candidate_index and result u32")
    if offset.dtype != "u32" or offset.shape != (1,):
        raise ValueError(f"sample: the position offset {offset!r} must be u32 [1]")
    if not isinstance(sampling, Sampling):
        raise TypeError(f"sample: sampling must be a Sampling, not {type(sampling).__name__}")
    if history is not None and (history.offset is not offset or (history.tokens, history.pos) != (tokens, pos)):
        raise ValueError(f"sample: the token history must share its offset, tokens and pos ({offset.name}, {tokens}, "
                         f"{pos}); given {history.offset.name}, {history.tokens}, {history.pos}")
    if embed is not None:
        embed.check_head("sample", values, history)
    n = values.numel if length is None else length
    if not 1 <= n <= min(values.numel, MAX_VOCAB):
        raise ValueError(f"sample({values.name}): length {n} outside 1..{min(values.numel, MAX_VOCAB)} "
                         f"(the sampler indexes at most 2^24 logits)")
    blocks = sample_blocks_needed(n)
    if min(candidate_keys.numel, candidate_index.numel) < blocks * TOP_K_CAP:
        raise ValueError(f"sample({values.name}): candidate buffers hold {min(candidate_keys.numel, candidate_index.numel)}"
                         f" elements; {n} logits need {blocks * TOP_K_CAP} (sample_candidates_needed)")

    def params(spec, at: int, **stored) -> bytes:
        return spec.pack_params(n=n, blocks=blocks, k=sampling.top_k, at=at, seed=sampling.seed,
                                temperature=sampling.temperature, top_p=sampling.top_p, **stored)

    def blocks_sizing(spec, live) -> Sizing:
        # pass 1 reads no position: it is not re-sized when a host-side position moves
        return Sizing(workgroups=linear_grid(blocks, 1, live_limit(live)), params=params(spec, 0),
                      bytes_moved=4 * n + 8 * blocks * sampling.top_k, flops=n)

    def pick_sizing(spec, live) -> Sizing:
        candidates = blocks * sampling.top_k
        at = live_value(pos, live, "sample") + live_value(tokens, live, "sample")
        stored = history.params(live) if history is not None else {"at": at}
        embedded = embed.params() if embed is not None else {}
        return Sizing(workgroups=(1, 1, 1), params=params(spec, **stored, **embedded),
                      bytes_moved=8 * candidates + 4 + sum(part.bytes_moved for part in (history, embed) if part),
                      flops=candidates + sampling.top_k ** 2)

    pick_kernel = ("sample_pick" if history is None else
                   "sample_pick_history_embed" if embed is not None else "sample_pick_history")
    label = f"sample({values.name})"
    return Op(label, (
        OpCall(label=f"sample_blocks({values.name})", kernel="sample_blocks", route="sample",
               tensors={"values": values, "candidate_keys": candidate_keys, "candidate_index": candidate_index},
               sizing=blocks_sizing),
        OpCall(label=f"sample_pick({values.name})", kernel=pick_kernel, route="sample",
               tensors={"candidate_keys": candidate_keys, "candidate_index": candidate_index, "offset": offset,
                        "result": result, **({"history": history.history} if history is not None else {}),
                        **(embed.tensors() if embed is not None else {})},
               sizing=pick_sizing)))
