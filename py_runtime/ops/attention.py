"""Attention over a per-layer KV cache of f16 pairs, packed two per u32 (no shader-f16 needed).

Where the device has shader-f16, a cache made with KVCache.allocate(f16=True) is written and read by the
kernels' shader-f16 spellings (vec2<f16> pairs, vec4<f16> halves: the same bytes) where they have one
(the cache writers and the subgroup decode and prefill passes: their kvf16_ twins), attested as kv_f16;
the other routes read the same bytes as packed u32. Without the feature the cache stays packed and says
why (KVCache.f16_refused).

Layouts (../shared/reference/kernels.md section 3): q [tokens, Hq, D], k and v [tokens, Hkv, D] (f32),
each cache u32 [capacity, Hkv, D / 2] (pack2x16float: element 2i in the low half). Hq % Hkv == 0: query
head h reads KV head h // (Hq / Hkv). Token t of a step sits at position pos + t and attends keys
0..pos + t (causal). `tokens` and `pos` are the plan's live sizes, so one plan serves a prefill and
then every decode step; positions past the cache are refused before anything is dispatched.

Routes (DECODE_ROUTES, PREFILL_ROUTES: the first whose guard passes; every one attested):
  decode (live tokens == 1)  sdpa_decode_subgroup one pass on subgroups, a workgroup per query head walking
                                                 every key (no partials, no reduce pass), any G. Needs
                                                 'subgroups' and a variant for D (a multiple of 8, at most
                                                 128). Serves contexts up to its reach (the tuning table's);
                                                 beyond it the next route's dispatches run in its place,
                                                 chosen per step by the context bound (CONTEXT, or the
                                                 position) without re-recording
                             sdpa_flash_subgroup FlashDecoding on subgroups: four invocations per key,
                                                 each with its K and V words and every query head's
                                                 dims in registers; no barrier in the key loop. Needs
                                                 'subgroups' and a variant for G (2 or 4) and D (a
                                                 multiple of 8, at most 32 W), then the reduce pass
                             sdpa_flash_decode   FlashDecoding: the cache split into chunks, one
                                                 workgroup per (split, KV head) sharing its K/V loads
                                                 across the G query heads, online softmax, then a reduce
                                                 pass; G <= 8, D <= 128 and a multiple of 8,
                                                 G * D <= 512 (K and V tiles of 32 keys staged in
                                                 workgroup memory)
                             sdpa_materialized   otherwise
  prefill (live tokens > 1)  sdpa_q32            opt-in (q32=True): Qwen3's geometry, 16 tokens x 2
                                                 heads per workgroup (~22.5 KB of workgroup memory)
                             sdpa_prefill_sgmat_f16  opt-in (half=True: q and the probabilities rounded
                                                 to f16): Q K^T and P V on f16 subgroup matrices, the
                                                 keys and values read straight from the cache, online
                                                 softmax. Needs shader-f16, the f16 x f16 -> f32
                                                 16x16x16 config, 32-wide subgroups, a variant for D
                                                 (64 or 128) and G at most its rows. Short prompts,
                                                 through the tuning table's length for D, take the next
                                                 route where it is sdpa_prefill_subgroup (both
                                                 recorded: the live token count picks one per run)
                             sdpa_prefill_subgroup  one pass on subgroups, online softmax: a few
                                                 invocations per query row with its dims in registers,
                                                 no staging, no barrier. Needs 'subgroups', a variant
                                                 for D (64 or 128) whose invocations per row fit the
                                                 adapter's smallest subgroup, and G at most its rows
                             sdpa_k16            one pass, online softmax, key tiles of 16: exactly
                                                 Hq 32 / Hkv 8 / D 64, scale 1/8 (Llama-3.2-1B)
                             sdpa_q16            the same schedule at exactly Hq 16 / Hkv 8 / D 128,
                                                 scale 1/sqrt(128) (Qwen3-0.6B), 8 tokens x 2 heads
                             sdpa_materialized   scores, softmax, weighted sum (three dispatches)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cache as _memo, wraps

from ..dispatch import CONTEXT, IDLE, POS, TOKENS, Op, OpCall, Sizing, linear_grid, live_limit, live_value, single
from ..kernels import kernel, kernel_names
from ..models.config import LAYOUTS, LLAMA_3_2_1B, QWEN3_0_6B
from ..routing import Decision, Route, RouteUnavailable, choose
from ..tensors import Tensor
from .subgroup_matrix import subgroup_matrix_unavailable
from .tuning import PORTABLE, Tuning, tuning_table

__all__ = ["KVCache", "AttentionScratch", "kv_cache_write", "rope_kv_cache_write", "sdpa", "DECODE_ROUTES", "PREFILL_ROUTES",
           "TILED_ROUTES", "FLASH_ROUTES", "flash_splits", "max_flash_splits", "subgroup_flash_split", "subgroup_flash_step_keys",
           "subgroup_prefill_kernel", "subgroup_prefill_rows", "subgroup_prefill_tokens",
           "sgmat_prefill_kernel", "sgmat_prefill_rows",
           "one_pass_decode", "one_pass_kernel", "context_band", "ONE_PASS_SLOTS", "KV_F16", "kv_f16_twins"]

FLASH_MAX_GROUP = 8             # sdpa_flash_decode.wgsl MAXG
FLASH_MAX_GROUP_DIMS = 512      # ... MAXGD
FLASH_MAX_HEAD_DIM = 128        # ... 2 * MAXHALF
MAX_SPLITS = 256                # the scratch's splits per query head
_TARGET_WORKGROUPS = 2048       # split-pass workgroups wanted: latency-bound, they need many in flight per SM
_WORKGROUP_TILE = 32            # sdpa_flash_decode.wgsl TILE: keys the workgroup-memory split pass stages at once
_LANES_PER_KEY = 4              # sdpa_flash_subgroup.wgsl LANES: WebGPU's narrowest subgroup
LOG2_E = 1.0 / math.log(2.0)    # both split passes keep the softmax in base 2: scores carry scale * log2(e)
_CONTEXT_BAND_MIN = 64          # context_band's smallest band


@dataclass(frozen=True)
class KVCache:
    """One layer's K and V cache, u32 [capacity, kv_heads, head_dim / 2] each, and its position offset:
    a u32 on the GPU that rope_kv_cache_write and the FlashDecoding passes add to the position their
    params give. It stays 0 where the host sizes every step; a decoder that keeps the sequence's
    position on the GPU records those ops at position 0 and lets its token-history store advance one offset that
    all its layers' caches share. kv_cache_write, rope and the prefill routes read their params alone."""

    k: Tensor
    v: Tensor
    offset: Tensor
    capacity: int
    kv_heads: int
    head_dim: int
    f16: bool = False                   # its kernels' shader-f16 spellings run where they have one (kv_f16)
    f16_refused: str | None = None      # why f16 was asked for and not given

    def __post_init__(self):
        shape = (self.capacity, self.kv_heads, self.head_dim // 2)
        if self.head_dim % 2 or any(t.dtype != "u32" or t.shape != shape for t in (self.k, self.v)):
            raise ValueError(f"KV cache {self.k.name!r}: k and v must be u32 {list(shape)} (f16 pairs of an even "
                             f"head_dim {self.head_dim}), got {self.k!r} and {self.v!r}")
        if self.offset.dtype != "u32" or self.offset.shape != (1,):
            raise ValueError(f"KV cache {self.k.name!r}: the position offset must be u32 [1], got {self.offset!r}")

    @classmethod
    async def allocate(cls, runtime, name: str, *, capacity: int, kv_heads: int, head_dim: int,
                       offset: Tensor | None = None, f16: bool = False) -> "KVCache":
        """A zeroed cache; `offset` shares another cache's position offset (a decoder's layers). `f16` spells
        its kernels in shader-f16 where the device has the feature (else packed, f16_refused saying so)."""
        if head_dim % 2 or capacity < 1:
            raise ValueError(f"KV cache {name!r}: head_dim {head_dim} must be even and capacity {capacity} positive")
        shape = (capacity, kv_heads, head_dim // 2)
        if offset is None:
            offset = await runtime.tensors.allocate(f"{name}.offset", (1,), "u32")
        refused = None
        if f16 and "shader-f16" not in runtime.device.adapter.device_features:
            refused = "the device has no 'shader-f16' (the cache's kernels read and write packed u32 pairs)"
        return cls(await runtime.tensors.allocate(f"{name}.k", shape, "u32"),
                   await runtime.tensors.allocate(f"{name}.v", shape, "u32"), offset, capacity, kv_heads, head_dim,
                   f16=f16 and refused is None, f16_refused=refused)


KV_F16 = "kv_f16"           # the attestation of a dispatch running a kernel's shader-f16 spelling


@_memo
def kv_f16_twins() -> dict[str, str]:
    """Each shipped kernel with a shader-f16 spelling of its KV cache -> that spelling: the kernel of the same
    source whose template values differ only in KV_F16."""
    def key(spec):
        return spec.source, tuple(sorted((k, v) for k, v in spec.template_values.items() if k != "KV_F16"))
    specs = [kernel(name) for name in kernel_names("shipped")]
    packed = {key(spec): spec.name for spec in specs if spec.template_values.get("KV_F16") is False}
    return {packed[key(spec)]: spec.name for spec in specs if spec.template_values.get("KV_F16") is True}


def _kv_spelled(builder):
    """An op builder over a KV cache (its keyword `cache`) whose dispatches with a shader-f16 spelling run it
    where that cache is spelled in f16 (attested kv_f16); the others read and write the same bytes as packed u32."""
    @wraps(builder)
    def build(**kwargs) -> Op:
        op, cache = builder(**kwargs), kwargs["cache"]
        if not cache.f16:
            return op
        twins = kv_f16_twins()
        return replace(op, calls=tuple(replace(call, kernel=twins[call.kernel], attests=(*call.attests, KV_F16))
                                       if call.kernel in twins else call for call in op.calls))
    return build


@dataclass(frozen=True)
class AttentionScratch:
    """Intermediate buffers shared by every layer's attention (one runs at a time): the materialized
    route's scores [max_tokens * Hq, capacity] and FlashDecoding's partials [Hq, MAX_SPLITS]."""

    scores: Tensor
    part_ml: Tensor
    part_o: Tensor
    max_tokens: int
    capacity: int

    @classmethod
    async def allocate(cls, runtime, name: str, *, heads: int, head_dim: int, max_tokens: int,
                       capacity: int) -> "AttentionScratch":
        tensors = runtime.tensors
        return cls(await tensors.allocate(f"{name}.scores", (max_tokens * heads, capacity)),
                   await tensors.allocate(f"{name}.part_ml", (heads * MAX_SPLITS, 2)),
                   await tensors.allocate(f"{name}.part_o", (heads * MAX_SPLITS, head_dim)), max_tokens, capacity)


def _window(tokens, pos, live, capacity: int, op: str) -> tuple[int, int]:
    t, p = live_value(tokens, live, op), live_value(pos, live, op)
    if t < 0 or p < 0 or p + t > capacity:
        raise ValueError(f"{op}: positions [{p}, {p + t}) do not fit the KV cache's {capacity} rows")
    return t, p


@_kv_spelled
def kv_cache_write(*, k: Tensor, v: Tensor, cache: KVCache, tokens: int | str = TOKENS, pos: int | str = POS) -> Op:
    """cache[pos:pos + tokens] = f16(k), f16(v), for k and v [>= tokens, Hkv, D] f32."""
    row = (cache.kv_heads, cache.head_dim)
    if any(t.dtype != "f32" or t.shape[1:] != row for t in (k, v)) or k.shape != v.shape:
        raise ValueError(f"kv_cache_write: k {k!r} and v {v!r} must be f32 [tokens, {row[0]}, {row[1]}]")
    label = f"kv_cache_write({cache.k.name})"

    def sizing(spec, live) -> Sizing:
        t, p = _window(tokens, pos, live, cache.capacity, label)
        if t > k.shape[0]:
            raise ValueError(f"{label}: {t} tokens, but k/v hold {k.shape[0]}")
        pairs = t * cache.kv_heads * cache.head_dim // 2
        return Sizing(workgroups=linear_grid(pairs, spec.invocations, live_limit(live)) if pairs else IDLE,
                      params=spec.pack_params(tokens=t, kv_heads=cache.kv_heads, half=cache.head_dim // 2, pos=p,
                                              capacity=cache.capacity),
                      bytes_moved=pairs * 8 * 2 + pairs * 4 * 2)

    return single(OpCall(label=label, kernel="kv_cache_write", route="kv_cache_write",
                         tensors={"k": k, "v": v, "k_cache": cache.k, "v_cache": cache.v}, sizing=sizing))


@_kv_spelled
def rope_kv_cache_write(*, q: Tensor, k: Tensor, v: Tensor, q_out: Tensor, table: Tensor, cache: KVCache, heads: int,
                        layout: str, tokens: int | str = TOKENS, pos: int | str = POS,
                        qk_norm: tuple[Tensor, Tensor] | None = None, eps: float = 1e-6) -> Op:
    """q_out = RoPE(q); cache[pos:pos + tokens] = f16(RoPE(k)), f16(v): ops.rope.rope on q and on k and
    kv_cache_write in one dispatch, for q [>= tokens, heads, D] and k, v [>= tokens, Hkv, D] f32, with
    head_dim a multiple of 4 and a cos/sin table from ops.rope (cos_sin_table_gpu or cos_sin_table).
    `qk_norm` (the q and k weights, f32 [D]) first normalizes each head of q and k (Qwen3's per-head
    RMSNorm, ops.norm.rms_norm(heads=) with `eps`): a workgroup per (token, head) row."""
    dim, kv_heads = cache.head_dim, cache.kv_heads
    problems = []
    for name, weight in zip(("q", "k"), qk_norm or ()):
        if weight.dtype != "f32" or weight.shape != (dim,):
            problems.append(f"the {name} norm weight {weight!r} must be f32 [{dim}]")
    if layout not in LAYOUTS:
        problems.append(f"unknown RoPE layout {layout!r} (known: {', '.join(LAYOUTS)})")
    if dim % 4:
        problems.append(f"head_dim {dim} is not a multiple of 4 (an invocation rotates two pairs into two cache words)")
    for name, t, h in (("q", q, heads), ("q_out", q_out, heads), ("k", k, kv_heads), ("v", v, kv_heads)):
        if t.dtype != "f32" or len(t.shape) != 3 or t.shape[1:] != (h, dim):
            problems.append(f"{name} {t!r} must be f32 [tokens, {h}, {dim}]")
    if table.dtype != "f32" or len(table.shape) != 3 or table.shape[1:] != (dim // 2, 2):
        problems.append(f"table {table!r} must be f32 [positions, {dim // 2}, 2] (ops.rope.cos_sin_table_gpu)")
    if q_out.name == q.name:
        problems.append("q_out must be another tensor than q (a buffer is read-only or writable in one dispatch)")
    if problems:
        raise ValueError("rope_kv_cache_write: " + "; ".join(problems))
    label = f"rope_kv_cache_write({cache.k.name})"
    held = min(t.shape[0] for t in (q, q_out, k, v))

    def sizing(spec, live) -> Sizing:
        t, p = _window(tokens, pos, live, cache.capacity, label)
        if t > held:
            raise ValueError(f"{label}: {t} tokens, but q/q_out/k/v hold {held}")
        if p + t > table.shape[0]:
            raise ValueError(f"{label}: positions [{p}, {p + t}) outside the {table.shape[0]}-row cos/sin table")
        work = t * (heads + kv_heads) * dim // 4
        fields = dict(tokens=t, heads=heads, kv_heads=kv_heads, half=dim // 2, pos=p, capacity=cache.capacity,
                      table_rows=table.shape[0])
        if qk_norm:                                         # a workgroup per (token, head) row
            grid = linear_grid(t * (heads + kv_heads), 1, live_limit(live)) if work else IDLE
            fields["eps"] = eps
        else:
            grid = linear_grid(work, spec.invocations, live_limit(live)) if work else IDLE
        return Sizing(workgroups=grid, params=spec.pack_params(**fields),
                      bytes_moved=4 * t * dim * (2 * heads + 2 * kv_heads) + 2 * 2 * t * kv_heads * dim
                      + 4 * t * dim * (heads + kv_heads), flops=6 * t * (heads + kv_heads) * dim // 2)

    tensors = {"q": q, "k": k, "v": v, "table": table, "q_out": q_out, "k_cache": cache.k, "v_cache": cache.v,
               "offset": cache.offset}
    if qk_norm:
        tensors.update(q_norm=qk_norm[0], k_norm=qk_norm[1])
    return single(OpCall(label=label, kernel=f"rope_kv_cache_write_{layout}{'_norm' if qk_norm else ''}",
                         route="rope_kv_cache_write_norm" if qk_norm else "rope_kv_cache_write", tensors=tensors,
                         sizing=sizing))


@dataclass(frozen=True)
class _Attention:
    q: Tensor
    cache: KVCache
    out: Tensor
    scratch: AttentionScratch
    heads: int
    scale: float
    tokens: int | str
    pos: int | str
    label: str
    adapter: object
    q32: bool = False
    flash_split: tuple[str, int] | None = None
    gpu_position: bool = False
    int8: object = None             # Int8Activations of out's row, written by the decode's reduce pass
    prefill_kernel: str | None = None   # an sdpa_prefill_sg(mat) variant in place of the tuning table's (sweeps)
    half: bool = False              # q and the softmax's probabilities may be rounded to f16 (the sgmat prefill)
    one_pass: tuple[str, int | None] | None = None  # the one-pass decode's kernel and reach (None: every context)
    short_prefill: int = 0          # the subgroup prefill serves prompts through this many tokens, the sgmat one above

    @property
    def group(self) -> int:
        return self.heads // self.cache.kv_heads


def max_flash_splits(kv_heads: int, workgroups: int = _TARGET_WORKGROUPS) -> int:
    """Splits per KV head the split pass wants at long contexts: `workgroups` over the KV heads, at
    most MAX_SPLITS (the scratch's)."""
    return max(1, min(MAX_SPLITS, -(-workgroups // kv_heads)))


def flash_splits(ctx: int, kv_heads: int, keys_per_step: int = _WORKGROUP_TILE,
                 workgroups: int = _TARGET_WORKGROUPS) -> tuple[int, int, int]:
    """(splits, keys per split, steps) of a split pass that covers keys_per_step keys per workgroup and
    step: splits of one step each until there are max_flash_splits, then longer splits; no split
    empty. The defaults are the workgroup-memory pass's (its 32-key tiles, _TARGET_WORKGROUPS); the
    subgroup pass passes its variant's step and the adapter's tuning. The kernels derive the same
    from (ctx, max splits, keys per step) in split_layout(), since the position may live on the GPU."""
    wanted = max(1, min(max_flash_splits(kv_heads, workgroups), -(-ctx // keys_per_step)))
    chunk = -(-ctx // wanted)
    return -(-ctx // chunk), chunk, -(-chunk // keys_per_step)


_SUBGROUP_SPLIT = "sdpa_flash_split_sg_"


def _subgroup_split_values() -> list[dict]:
    """The template values (G, W, ...) of every shipped subgroup split-pass variant."""
    return [kernel(name).template_values for name in kernel_names("shipped") if name.startswith(_SUBGROUP_SPLIT)]


def subgroup_flash_split(group: int, head_dim: int, adapter_info: dict) -> tuple[str, int] | None:
    """The sdpa_flash_split_sg variant for G query heads per KV head of head_dim dims and the workgroups
    it wants, from the adapter's tuning table: G exactly, the fewest words per lane (W: four lanes of
    W vec4 words, 8 dims each, cover a row); None where no shipped variant fits."""
    prefix = _SUBGROUP_SPLIT
    shipped = kernel_names("shipped")
    widths = [values["W"] for values in _subgroup_split_values() if values["G"] == group and 32 * values["W"] >= head_dim]
    if not widths:
        return None
    words = min(widths)
    table = tuning_table(adapter_info)
    suffix, workgroups = table.flash_split(group, words)
    name = f"{prefix}g{group}w{words}{suffix}"
    if name not in shipped:
        raise ValueError(f"tuning table {table.name!r} picks {name!r} for G {group}, W {words}, which is not a shipped kernel")
    return name, workgroups


def subgroup_flash_step_keys(split_spec) -> int:
    """Keys a workgroup of the subgroup split pass covers per step: a key per HS slots of four lanes, U each."""
    values = split_spec.template_values
    return split_spec.invocations // _LANES_PER_KEY // values["HS"] * values["U"]


def _params(spec, req: _Attention, t: int, p: int) -> bytes:
    return spec.pack_params(tokens=t, heads=req.heads, kv_heads=req.cache.kv_heads, head_dim=req.cache.head_dim,
                            pos=p, ctx=p + t, scale=req.scale)


def _materialized(req: _Attention, phase: str) -> list[OpCall]:
    """The three passes; `phase` "prefill" idles them at one live token (FlashDecoding serves it)."""
    cache, dim, heads = req.cache, req.cache.head_dim, req.heads

    def window(live) -> tuple[int, int, bool]:
        t, p = _window(req.tokens, req.pos, live, cache.capacity, req.label)
        if t > req.scratch.max_tokens or t > req.q.shape[0]:
            raise ValueError(f"{req.label}: {t} tokens, but q/scratch hold {min(req.q.shape[0], req.scratch.max_tokens)}")
        return t, p, t > 0 and (phase != "prefill" or t > 1)

    def scores(spec, live):
        t, p, active = window(live)
        work = t * heads * (p + t)
        return Sizing(workgroups=linear_grid(work, spec.invocations, live_limit(live)) if active else IDLE,
                      params=_params(spec, req, t, p), bytes_moved=(4 * t * heads * dim + 2 * (p + t) * cache.kv_heads
                                                                  * dim + 4 * work) if active else 0,
                      flops=2 * work * dim if active else 0)

    def softmax(spec, live):
        t, p, active = window(live)
        return Sizing(workgroups=linear_grid(t * heads, 1, live_limit(live)) if active else IDLE,
                      params=_params(spec, req, t, p), bytes_moved=8 * t * heads * (p + t) if active else 0,
                      flops=3 * t * heads * (p + t) if active else 0)

    def weighted(spec, live):
        t, p, active = window(live)
        outputs = t * heads * dim
        return Sizing(workgroups=linear_grid(outputs, spec.invocations, live_limit(live)) if active else IDLE,
                      params=_params(spec, req, t, p),
                      bytes_moved=(4 * t * heads * (p + t) + 2 * (p + t) * cache.kv_heads * dim + 4 * outputs)
                      if active else 0, flops=2 * outputs * (p + t) if active else 0)

    scratch = req.scratch.scores
    return [OpCall(label=f"{req.label}.scores", kernel="sdpa_scores", route="sdpa_materialized",
                   tensors={"q": req.q, "k_cache": cache.k, "scores": scratch}, sizing=scores, phase=phase),
            OpCall(label=f"{req.label}.softmax", kernel="sdpa_softmax", route="sdpa_materialized",
                   tensors={"scores": scratch}, sizing=softmax, phase=phase),
            OpCall(label=f"{req.label}.weighted", kernel="sdpa_weighted", route="sdpa_materialized",
                   tensors={"scores": scratch, "v_cache": cache.v, "out": req.out}, sizing=weighted, phase=phase)]


def _flash(subgroup: bool):
    """FlashDecoding's two passes: a split pass (the subgroup one, or the workgroup-memory one) writing
    per-split partials, then the reduce pass."""

    def build(req: _Attention) -> list[OpCall]:
        cache, dim, g = req.cache, req.cache.head_dim, req.group
        if subgroup:               # (decided once here: the sizings below run at every decode step)
            split_kernel, workgroups = req.flash_split or subgroup_flash_split(g, dim, req.adapter.info)
            step_keys = subgroup_flash_step_keys(kernel(split_kernel))
        else:
            split_kernel, workgroups, step_keys = "sdpa_flash_split", _TARGET_WORKGROUPS, _WORKGROUP_TILE
        route = "sdpa_flash_subgroup" if subgroup else "sdpa_flash_decode"

        # With the position on the GPU, the split pass is sized for the whole cache (the splits past the
        # live context return at once) and what it moves is unknown when it is sized.
        longest = flash_splits(cache.capacity, cache.kv_heads, step_keys, workgroups)[0]

        def plan(live) -> tuple[bool, int, dict]:
            t, p = _window(req.tokens, req.pos, live, cache.capacity, req.label)
            ctx = p + 1
            fields = dict(kv_heads=cache.kv_heads, group=g, head_dim=dim, ctx=ctx,
                          max_splits=max_flash_splits(cache.kv_heads, workgroups), step_keys=step_keys,
                          scale=req.scale * LOG2_E)
            splits = longest if req.gpu_position else flash_splits(ctx, cache.kv_heads, step_keys, workgroups)[0]
            return t == 1 and not _one_pass_serves(req, live, p), splits, fields

        def split(spec, live):
            active, splits, fields = plan(live)
            counted = active and not req.gpu_position
            kv_bytes = 2 * fields["ctx"] * cache.kv_heads * dim * 2
            return Sizing(workgroups=(splits, cache.kv_heads, 1) if active else IDLE, params=spec.pack_params(**fields),
                          bytes_moved=kv_bytes + 4 * req.heads * dim * (1 + splits) if counted else 0,
                          flops=4 * fields["ctx"] * req.heads * dim if counted else 0)

        def reduce(spec, live):
            active, splits, fields = plan(live)
            counted = active and not req.gpu_position
            if req.int8 is not None:
                fields.update(row=req.heads * dim, group_size=req.int8.group_size)
            return Sizing(workgroups=(req.heads, 1, 1) if active else IDLE, params=spec.pack_params(**fields),
                          bytes_moved=4 * req.heads * splits * (dim + 2) + 4 * req.heads * dim if counted else 0)

        reduce_tensors = {"part_ml": req.scratch.part_ml, "part_o": req.scratch.part_o, "out": req.out,
                          "offset": cache.offset}
        if req.int8 is not None:
            reduce_tensors.update(act_words=req.int8.words, act_stats=req.int8.stats)

        scratch = req.scratch
        return [OpCall(label=f"{req.label}.flash_split", kernel=split_kernel, route=route,
                       tensors={"q": req.q, "k_cache": cache.k, "v_cache": cache.v, "part_ml": scratch.part_ml,
                                "part_o": scratch.part_o, "offset": cache.offset}, sizing=split, phase="decode"),
                OpCall(label=f"{req.label}.flash_reduce",
                       kernel="sdpa_flash_reduce_i8x" if req.int8 is not None else "sdpa_flash_reduce", route=route,
                       tensors=reduce_tensors, sizing=reduce, phase="decode")]
    return build


def _one_pass_prefix(int8: bool) -> str:
    return "sdpa_decode_sg_i8x_" if int8 else "sdpa_decode_sg_"


def _one_pass_words(head_dim: int, int8: bool) -> int | None:
    """The fewest words per lane (W) of a shipped sdpa_decode_sg variant covering head_dim (a multiple of
    8: rows load as vec4 of f16 pairs); None where none does."""
    if head_dim % 8:
        return None
    prefix = _one_pass_prefix(int8)
    widths = [kernel(n).template_values["W"] for n in kernel_names("shipped") if n.startswith(prefix)]
    return min((w for w in widths if 32 * w >= head_dim), default=None)


def one_pass_decode(head_dim: int, adapter_info: dict, int8: bool = False,
                    table: Tuning | None = None) -> tuple[str, int] | None:
    """The sdpa_decode_sg variant for head_dim (its i8x twin where the o-proj reads int8) and its reach,
    from the adapter's tuning table (or `table`): the fewest words per lane covering the row; None where
    none fits or the table runs FlashDecoding at every context there."""
    words = _one_pass_words(head_dim, int8)
    table = table or tuning_table(adapter_info)
    picked = None if words is None else table.decode_attention(words)
    if picked is None:
        return None
    name = _one_pass_prefix(int8) + picked[0]
    if name not in kernel_names("shipped"):
        raise ValueError(f"tuning table {table.name!r} picks {name!r} for head_dim {head_dim}, which is not a shipped kernel")
    return name, picked[1]


def one_pass_kernel(head_dim: int, adapter_info: dict, int8: bool) -> str:
    """The one-pass variant for head_dim (its i8x twin where int8) that a forced route runs: the tuning
    table's, or where the table keeps FlashDecoding the portable table's (for a head_dim _one_pass_fits
    accepts)."""
    return (one_pass_decode(head_dim, adapter_info, int8) or one_pass_decode(head_dim, adapter_info, int8, PORTABLE))[0]


def context_band(ctx: int, capacity: int) -> int:
    """The CONTEXT live size for a step attending `ctx` keys: the smallest power of two holding them (at
    least 64), at most the cache's capacity. A plan re-sizes only when a step crosses a band."""
    return min(capacity, max(_CONTEXT_BAND_MIN, 1 << (ctx - 1).bit_length()))


ONE_PASS_SLOTS = 4             # sdpa_decode_subgroup.wgsl LANES: a slot per 4 invocations


def _one_pass_serves(req: _Attention, live, p: int) -> bool:
    """Whether the one-pass decode runs at these live sizes: a bound on the step's keys (the position + 1
    where the host knows it, else CONTEXT, else the whole cache) within its reach."""
    if req.one_pass is None:
        return False
    reach = req.one_pass[1]
    if reach is None:
        return True
    if req.gpu_position:
        bound = live.get(CONTEXT)
        bound = req.cache.capacity if bound is None else bound
    else:
        bound = p + 1
    return bound <= reach


def _one_pass_build(req: _Attention) -> list[OpCall]:
    cache, dim = req.cache, req.cache.head_dim
    name = req.one_pass[0]

    def sizing(spec, live):
        t, p = _window(req.tokens, req.pos, live, cache.capacity, req.label)
        active = t == 1 and _one_pass_serves(req, live, p)
        fields = dict(heads=req.heads, kv_heads=cache.kv_heads, head_dim=dim, ctx=p + 1, scale=req.scale * LOG2_E)
        if req.int8 is not None:
            fields.update(row=req.heads * dim, group_size=req.int8.group_size)
        counted = active and not req.gpu_position
        kv_bytes = 2 * (p + 1) * cache.kv_heads * dim * 2
        return Sizing(workgroups=(req.heads, 1, 1) if active else IDLE, params=spec.pack_params(**fields),
                      bytes_moved=kv_bytes + 8 * req.heads * dim if counted else 0,
                      flops=4 * (p + 1) * req.heads * dim if counted else 0)

    tensors = {"q": req.q, "k_cache": cache.k, "v_cache": cache.v, "out": req.out, "offset": cache.offset}
    if req.int8 is not None:
        tensors.update(act_words=req.int8.words, act_stats=req.int8.stats)
    return [OpCall(label=f"{req.label}.decode_one_pass", kernel=name, route="sdpa_decode_subgroup", tensors=tensors,
                   sizing=sizing, phase="decode")]


def _one_pass_fits(req: _Attention) -> str | None:
    """Whether the one pass can run here at all (a forced route needs no more)."""
    if "subgroups" not in req.adapter.device_features:
        return "needs the 'subgroups' feature"
    if req.flash_split is not None:
        return "a FlashDecoding split pass was asked for (flash_split)"
    if _one_pass_words(req.cache.head_dim, req.int8 is not None) is None:
        covered = max(32 * kernel(n).template_values["W"] for n in kernel_names("shipped")
                      if n.startswith(_one_pass_prefix(req.int8 is not None)))
        return f"no variant for head_dim {req.cache.head_dim} (a multiple of 8 up to {covered})"
    return None


def _one_pass_guard(req: _Attention) -> str | None:
    """The route table's: it fits, and the adapter's tuning table runs it (a speed choice)."""
    why = _one_pass_fits(req)
    if why is None and one_pass_decode(req.cache.head_dim, req.adapter.info, req.int8 is not None) is None:
        why = f"the tuning table {tuning_table(req.adapter.info).name!r} runs FlashDecoding at every context here"
    return why


# The one-pass tiled routes' exact geometries, from the seed's guards (the scale must be 1/sqrt(head_dim)
# exactly): (route, query heads, KV heads, head_dim, tokens per workgroup); the route's kernel has its
# name (and its workgroup memory and invocations). Q32 is opt-in (sdpa(q32=True)) and needs more workgroup memory than
# WebGPU's default 16 KiB: where the device lacks it, Q16 runs.
_LLAMA = (LLAMA_3_2_1B.heads, LLAMA_3_2_1B.kv_heads, LLAMA_3_2_1B.head_dim)     # 32, 8, 64
_QWEN = (QWEN3_0_6B.heads, QWEN3_0_6B.kv_heads, QWEN3_0_6B.head_dim)             # 16, 8, 128
TILED_ROUTES = (("sdpa_q32", *_QWEN, 16), ("sdpa_k16", *_LLAMA, 8), ("sdpa_q16", *_QWEN, 8))


def _tiled_guard(route: str):
    heads, kv_heads, dim, _ = next(r[1:] for r in TILED_ROUTES if r[0] == route)

    def guard(req: _Attention) -> str | None:
        here = (req.heads, req.cache.kv_heads, req.cache.head_dim)
        if route == "sdpa_q32" and not req.q32:
            return "not asked for (q32=True)"
        if here != (heads, kv_heads, dim):
            return f"Hq/Hkv/D {here[0]}/{here[1]}/{here[2]} is not its geometry {heads}/{kv_heads}/{dim}"
        if req.scale != 1.0 / math.sqrt(dim):
            return f"scale {req.scale} is not 1/sqrt({dim})"
        limits = req.adapter.limits
        spec = kernel(route)
        memory, invocations = spec.workgroup_bytes, spec.invocations
        if limits.get("maxComputeWorkgroupStorageSize", 0) < memory or \
                limits.get("maxComputeInvocationsPerWorkgroup", 0) < invocations:
            return (f"needs {memory} bytes of workgroup memory and {invocations} invocations; the device allows "
                    f"{limits.get('maxComputeWorkgroupStorageSize', 0)} and "
                    f"{limits.get('maxComputeInvocationsPerWorkgroup', 0)}")
        return None
    return guard


def _tiled(route: str):
    tokens_per_workgroup = next(r[4] for r in TILED_ROUTES if r[0] == route)

    def build(req: _Attention) -> list[OpCall]:
        cache = req.cache

        def sizing(spec, live):
            t, p = _window(req.tokens, req.pos, live, cache.capacity, req.label)
            if t > req.q.shape[0]:
                raise ValueError(f"{req.label}: {t} tokens, but q holds {req.q.shape[0]}")
            active = t > 1
            keys = t * p + t * (t + 1) // 2                      # causal (query, key) pairs per head
            return Sizing(workgroups=(-(-t // tokens_per_workgroup), cache.kv_heads, 1) if active else IDLE,
                          params=_params(spec, req, t, p),
                          bytes_moved=(8 * t * req.heads * cache.head_dim + 2 * 2 * (p + t) * cache.kv_heads
                                       * cache.head_dim * -(-t // tokens_per_workgroup)) if active else 0,
                          flops=4 * keys * req.heads * cache.head_dim if active else 0)

        return [OpCall(label=f"{req.label}.{route}", kernel=route, route=route,
                       tensors={"q": req.q, "k_cache": cache.k, "v_cache": cache.v, "out": req.out}, sizing=sizing,
                       phase="prefill")]
    return build


_SUBGROUP_PREFILL = "sdpa_prefill_sg_"


def subgroup_prefill_kernel(head_dim: int, adapter_info: dict) -> str | None:
    """The tuning table's sdpa_prefill_sg variant for head_dim, or None where none is shipped for it."""
    narrowest = adapter_info.get("subgroupMinSize") or 4
    name = _SUBGROUP_PREFILL + tuning_table(adapter_info).prefill_attention(head_dim, narrowest)
    return name if name in kernel_names("shipped") else None


def subgroup_prefill_tokens(spec, group: int) -> int:
    """Tokens a workgroup of an sdpa_prefill_sg variant owns: its rows (invocations / SUB / KS) over G heads."""
    return subgroup_prefill_rows(spec) // group


def subgroup_prefill_rows(spec) -> int:
    """Query rows a workgroup of an sdpa_prefill_sg variant holds: KS slots of SUB invocations each."""
    return spec.invocations // spec.template_values["SUB"] // spec.template_values["KS"]


def _subgroup_prefill_name(req: _Attention) -> str | None:
    if req.prefill_kernel is not None and req.prefill_kernel.startswith(_SUBGROUP_PREFILL):
        return req.prefill_kernel
    return subgroup_prefill_kernel(req.cache.head_dim, req.adapter.info)


def _subgroup_prefill_guard(req: _Attention) -> str | None:
    if "subgroups" not in req.adapter.device_features:
        return "needs the 'subgroups' feature"
    name = _subgroup_prefill_name(req)
    if name is None:
        shipped = sorted({8 * kernel(n).template_values["SUB"] * kernel(n).template_values["W"]
                          for n in kernel_names("shipped") if n.startswith(_SUBGROUP_PREFILL)})
        return f"no variant for head_dim {req.cache.head_dim} (shipped: {shipped})"
    spec = kernel(name)
    sub, narrowest = spec.template_values["SUB"], req.adapter.info.get("subgroupMinSize") or 4
    if sub > narrowest:
        return f"{name} needs subgroups of {sub} invocations at least; the adapter's smallest is {narrowest}"
    if subgroup_prefill_tokens(spec, req.group) < 1:
        return f"{req.group} query heads per KV head exceed {name}'s {subgroup_prefill_rows(spec)} rows"
    return None


def _subgroup_prefill(req: _Attention) -> list[OpCall]:
    name = _subgroup_prefill_name(req)
    return _single_pass_prefill(req, name, subgroup_prefill_tokens(kernel(name), req.group), "sdpa_prefill_subgroup",
                                longest=req.short_prefill or None)


def _single_pass_prefill(req: _Attention, name: str, per_workgroup: int, route: str, *, shortest: int = 2,
                         longest: int | None = None) -> list[OpCall]:
    """The one dispatch of a prefill kernel whose workgroup takes `per_workgroup` tokens of one KV head (every
    head of its group) and walks the causal keys once: the subgroup and subgroup-matrix prefills. It runs for
    live token counts from `shortest` through `longest` (None: any), idle otherwise."""
    cache = req.cache

    def sizing(spec, live):
        t, p = _window(req.tokens, req.pos, live, cache.capacity, req.label)
        if t > req.q.shape[0]:
            raise ValueError(f"{req.label}: {t} tokens, but q holds {req.q.shape[0]}")
        active = shortest <= t and (longest is None or t <= longest)
        tiles = -(-t // per_workgroup)
        keys = t * p + t * (t + 1) // 2                      # causal (query, key) pairs per head
        params = spec.pack_params(tokens=t, heads=req.heads, kv_heads=cache.kv_heads, head_dim=cache.head_dim, pos=p,
                                  ctx=p + t, scale=req.scale * LOG2_E)     # the softmax runs in base 2
        return Sizing(workgroups=(tiles, cache.kv_heads, 1) if active else IDLE, params=params,
                      bytes_moved=(8 * t * req.heads * cache.head_dim + 2 * 2 * (p + t) * cache.kv_heads
                                   * cache.head_dim * tiles) if active else 0,
                      flops=4 * keys * req.heads * cache.head_dim if active else 0)

    return [OpCall(label=f"{req.label}.{route}", kernel=name, route=route,
                   tensors={"q": req.q, "k_cache": cache.k, "v_cache": cache.v, "out": req.out}, sizing=sizing,
                   phase="prefill")]


_SGMAT_PREFILL = "sdpa_prefill_sgmat_"


def sgmat_prefill_kernel(head_dim: int, adapter_info: dict) -> str | None:
    """The tuning table's sdpa_prefill_sgmat variant for head_dim, or None where none is shipped for it."""
    name = _SGMAT_PREFILL + tuning_table(adapter_info).prefill_attention_sgmat(head_dim)
    return name if name in kernel_names("shipped") else None


def sgmat_prefill_rows(spec) -> int:
    """Query rows a workgroup of an sdpa_prefill_sgmat variant holds: SG subgroups of 16 FM."""
    return 16 * spec.template_values["FM"] * spec.template_values["SG"]


def _sgmat_prefill_name(req: _Attention) -> str | None:
    if req.prefill_kernel is not None and req.prefill_kernel.startswith(_SGMAT_PREFILL):
        return req.prefill_kernel
    return sgmat_prefill_kernel(req.cache.head_dim, req.adapter.info)


def _sgmat_prefill_guard(req: _Attention) -> str | None:
    if not req.half:
        return "f16 rounding of the queries and probabilities not asked for (half=True)"
    if why := subgroup_matrix_unavailable(req.adapter, "f16"):
        return why
    name = _sgmat_prefill_name(req)
    if name is None:
        shipped = sorted({kernel(n).template_values["D"] for n in kernel_names("shipped") if n.startswith(_SGMAT_PREFILL)})
        return f"no variant for head_dim {req.cache.head_dim} (shipped: {shipped})"
    spec = kernel(name)
    if req.group > sgmat_prefill_rows(spec):
        return f"{req.group} query heads per KV head exceed {name}'s {sgmat_prefill_rows(spec)} rows"
    limit = req.adapter.limits.get("maxComputeWorkgroupStorageSize", 16384)
    if spec.workgroup_bytes > limit:
        return f"{name} needs {spec.workgroup_bytes} bytes of workgroup memory; the device allows {limit}"
    return None


def _sgmat_prefill(req: _Attention) -> list[OpCall]:
    name = _sgmat_prefill_name(req)
    return _single_pass_prefill(req, name, sgmat_prefill_rows(kernel(name)) // req.group, "sdpa_prefill_sgmat_f16",
                                shortest=max(2, req.short_prefill + 1))


def _flash_guard(req: _Attention) -> str | None:
    g, dim = req.group, req.cache.head_dim
    if g > FLASH_MAX_GROUP or g * dim > FLASH_MAX_GROUP_DIMS or dim > FLASH_MAX_HEAD_DIM:
        return (f"{g} query heads per KV head of {dim} dims exceed its workgroup memory "
                f"(G <= {FLASH_MAX_GROUP}, G * D <= {FLASH_MAX_GROUP_DIMS}, D <= {FLASH_MAX_HEAD_DIM})")
    if dim % 8:
        return f"head_dim {dim} is not a multiple of 8 (cache rows load as vec4 of f16 pairs)"
    return None


def _subgroup_flash_guard(req: _Attention) -> str | None:
    if "subgroups" not in req.adapter.device_features:
        return "needs the 'subgroups' feature"
    if req.cache.head_dim % 8:
        return f"head_dim {req.cache.head_dim} is not a multiple of 8 (cache rows load as vec4 of f16 pairs)"
    if subgroup_flash_split(req.group, req.cache.head_dim, req.adapter.info) is None:
        shipped = sorted({(v["G"], 32 * v["W"]) for v in _subgroup_split_values()})
        return (f"no variant for {req.group} query heads per KV head of {req.cache.head_dim} dims (shipped (G, "
                f"head_dim up to): {', '.join(f'({g}, {d})' for g, d in shipped)})")
    return None


DECODE_ROUTES = (
    Route(name="sdpa_decode_subgroup", guard=_one_pass_guard, build=_one_pass_build),
    Route(name="sdpa_flash_subgroup", guard=_subgroup_flash_guard, build=_flash(subgroup=True)),
    Route(name="sdpa_flash_decode", guard=_flash_guard, build=_flash(subgroup=False)),
    Route(name="sdpa_materialized", build=lambda req: _materialized(req, "any")),
)
FLASH_ROUTES = ("sdpa_decode_subgroup", "sdpa_flash_subgroup", "sdpa_flash_decode")   # read the GPU position
_TILED = {route: Route(name=route, guard=_tiled_guard(route), build=_tiled(route)) for route, *_ in TILED_ROUTES}
_SUBGROUP_PREFILL_ROUTE = Route(name="sdpa_prefill_subgroup", guard=_subgroup_prefill_guard, build=_subgroup_prefill)
PREFILL_ROUTES = (_TILED["sdpa_q32"],
                  Route(name="sdpa_prefill_sgmat_f16", guard=_sgmat_prefill_guard, build=_sgmat_prefill),
                  _SUBGROUP_PREFILL_ROUTE, _TILED["sdpa_k16"], _TILED["sdpa_q16"],
                  Route(name="sdpa_materialized", build=lambda req: _materialized(req, "prefill")))


def _prefill_kernel_dim(name: str) -> int | None:
    """The head_dim a subgroup or subgroup-matrix prefill variant serves (None: not one of theirs)."""
    if name.startswith(_SGMAT_PREFILL):
        return kernel(name).template_values["D"]
    if name.startswith(_SUBGROUP_PREFILL):
        return 8 * kernel(name).template_values["SUB"] * kernel(name).template_values["W"]
    return None


@_kv_spelled
def sdpa(*, q: Tensor, cache: KVCache, out: Tensor, scratch: AttentionScratch, heads: int, adapter,
         scale: float | None = None, tokens: int | str = TOKENS, pos: int | str = POS, force: str | None = None,
         q32: bool = False, flash_split: tuple[str, int] | None = None, gpu_position: bool = False,
         int8=None, prefill_kernel: str | None = None, prefill_route: str | None = None,
         decode_kernel: str | None = None, one_pass: bool = True, half: bool = False,
         short_prefill: bool = True) -> Op:
    """out[t, h] = softmax(scale * q[t, h] . K[:pos + t + 1]) V[:pos + t + 1] for t < tokens, over the cache
    (which must already hold this step's keys: kv_cache_write first). q and out f32 [>= tokens, heads, D];
    scale defaults to 1/sqrt(D). A decode route and a prefill route are both recorded (see the module
    docstring); `force` records one route only, for every token count; `q32` opts Qwen3's geometry into
    the 32-row prefill schedule where the device has the workgroup memory for it; `flash_split` (a
    sdpa_flash_split_sg kernel of this geometry, workgroups wanted) replaces the tuning table's pick, for
    benchmark sweeps; `prefill_kernel` (an sdpa_prefill_sg or sdpa_prefill_sgmat variant of this head_dim)
    likewise for the subgroup or subgroup-matrix prefill; `half` lets a prefill round q and the softmax's
    probabilities to f16 (the subgroup-matrix route, where the device has it: attested); `prefill_route` forces the prefill's route alone (the decode's is still the table's
    choice). `gpu_position`: decode steps add the cache's offset to `pos`, which the GPU advances
    between steps (KVCache), so the FlashDecoding passes are sized once for any context; the
    materialized decode route, sized by the context, refuses it. `int8` (Int8Activations of out's rows
    as [tokens, heads * D]) makes a decode's FlashDecoding reduce (or the one pass) also write its row
    quantized for an int8x linear, in place of quantize_activations (heads of whole groups; a prefill
    still needs one). `decode_kernel` (an sdpa_decode_sg variant covering head_dim) replaces the table's
    pick where force="sdpa_decode_subgroup" (sweeps); one_pass=False leaves the one pass out of the
    decode's choice (FlashDecoding at every context). Where the subgroup-matrix prefill is chosen (neither
    pinned nor forced), the tuning table may hand short prompts to the subgroup prefill (both recorded, the
    live token count picks); short_prefill=False keeps the subgroup-matrix one at every length (checks)."""
    if decode_kernel is not None and (force != "sdpa_decode_subgroup" or not decode_kernel.startswith("sdpa_decode_sg_")
                                      or 32 * kernel(decode_kernel).template_values["W"] < cache.head_dim
                                      or kernel(decode_kernel).template_values["QUANT"] != (int8 is not None)):
        raise ValueError(f"sdpa: decode_kernel {decode_kernel} needs force='sdpa_decode_subgroup' and an sdpa_decode_sg "
                         f"variant covering head_dim {cache.head_dim} ({'with' if int8 is not None else 'without'} i8x)")
    if flash_split is not None:
        values = kernel(flash_split[0]).template_values
        if (values["G"], 32 * values["W"] >= cache.head_dim) != (heads // cache.kv_heads, True):
            raise ValueError(f"sdpa: {flash_split[0]} is not a subgroup split pass for G {heads // cache.kv_heads}, "
                             f"head_dim {cache.head_dim}")
    if prefill_kernel is not None and _prefill_kernel_dim(prefill_kernel) != cache.head_dim:
        raise ValueError(f"sdpa: {prefill_kernel} is not a subgroup (sdpa_prefill_sg_) or subgroup-matrix "
                         f"(sdpa_prefill_sgmat_) prefill kernel for head_dim {cache.head_dim}")
    dim, kv_heads = cache.head_dim, cache.kv_heads
    problems = []
    if heads % kv_heads:
        problems.append(f"{heads} query heads do not divide into {kv_heads} KV heads")
    for name, t in (("q", q), ("out", out)):
        if t.dtype != "f32" or len(t.shape) != 3 or t.shape[1:] != (heads, dim):
            problems.append(f"{name} {t!r} must be f32 [tokens, {heads}, {dim}]")
    if scratch.capacity < cache.capacity:
        problems.append(f"the scratch's scores hold {scratch.capacity} keys per row, fewer than the cache's {cache.capacity}")
    if int8 is not None and (int8.x.buffer != out.buffer or int8.k != heads * dim or dim % int8.group_size):
        problems.append(f"int8 activations of {int8.x.name!r} (K {int8.k}, groups of {int8.group_size}) are not of out's "
                        f"rows of {heads} x {dim} in whole groups per head")
    if problems:
        raise ValueError("sdpa: " + "; ".join(problems))
    label = f"sdpa({out.name})"
    req = _Attention(q, cache, out, scratch, heads, 1.0 / math.sqrt(dim) if scale is None else scale, tokens, pos, label,
                     adapter, q32, flash_split, gpu_position, int8, prefill_kernel, half)
    if force == "sdpa_decode_subgroup":                # every context, however long; whatever the tuning table says
        why = _one_pass_fits(req)
        if why is not None:
            raise RouteUnavailable(f"{label} [decode]: route {force!r} cannot run here: {why}")
        req = replace(req, one_pass=(decode_kernel or one_pass_kernel(dim, adapter.info, int8 is not None), None))
        return Op(label, tuple(_one_pass_build(req)), (Decision(label, "decode", force, (), forced=True),))
    if force is not None:
        slot, routes = ("decode", DECODE_ROUTES) if force in {r.name for r in DECODE_ROUTES} else ("prefill",
                                                                                                   PREFILL_ROUTES)
        route, decision = choose(routes, req, op=label, slot=slot, force=force)
        if (gpu_position or int8 is not None) and route.name not in FLASH_ROUTES:
            raise ValueError(f"{label}: {route.name} reads the position from its params alone and writes f32 "
                             f"only; gpu_position and int8 need a FlashDecoding route ({', '.join(FLASH_ROUTES)})")
        return Op(label, tuple(_materialized(req, "any") if route.name == "sdpa_materialized" else route.build(req)),
                  (decision,))
    decode, decode_why = choose(DECODE_ROUTES if one_pass else DECODE_ROUTES[1:], req, op=label, slot="decode")
    decisions = [decode_why]
    if decode.name == "sdpa_decode_subgroup":
        # The one pass serves contexts up to its reach; past it the next FlashDecoding route's dispatches
        # run (both recorded: the live context bound picks one per step). Where only the materialized
        # passes would remain, the one pass serves every context.
        kernel_name, reach = one_pass_decode(dim, adapter.info, int8 is not None)
        long_route, long_why = choose(DECODE_ROUTES[1:], req, op=label, slot="decode beyond the one pass's reach")
        if long_route.name == "sdpa_materialized":
            req = replace(req, one_pass=(kernel_name, None))
            decode_ops = decode.build(req)
        else:
            req = replace(req, one_pass=(kernel_name, reach))
            decisions.append(long_why)
            decode_ops = decode.build(req) + long_route.build(req)
    elif (gpu_position or int8 is not None) and decode.name == "sdpa_materialized":
        raise ValueError(f"{label}: the decode route here is sdpa_materialized ({decode_why}), whose passes are "
                         f"sized by the context on the host and write f32 only: neither gpu_position nor int8")
    elif decode.name == "sdpa_materialized":
        return Op(label, tuple(decode.build(req)), (decode_why,))
    else:
        decode_ops = decode.build(req)
    prefill, prefill_why = choose(PREFILL_ROUTES, req, op=label, slot="prefill", force=prefill_route)
    decisions.append(prefill_why)
    short = tuning_table(adapter.info).short_prefill_attention(dim)
    if (prefill.name == "sdpa_prefill_sgmat_f16" and short > 1 and short_prefill and prefill_kernel is None
            and prefill_route is None):
        # Through `short` tokens the subgroup route is faster than the tensor cores' staging (the table's
        # measurement); both are recorded and the live token count picks one.
        subgroup, short_why = choose([_SUBGROUP_PREFILL_ROUTE], req, op=label, slot=f"prefill through {short} tokens")
        decisions.append(short_why)
        if subgroup is not None:
            req = replace(req, short_prefill=short)
            return Op(label, tuple(decode_ops + subgroup.build(req) + prefill.build(req)), tuple(decisions))
    return Op(label, tuple(decode_ops + prefill.build(req)), tuple(decisions))
