"""A whole decoder (Llama 3, Qwen3) as one plan that serves a prefill of S tokens and then every
decode step, with the next token chosen (greedy, or sampled) and fed back on the GPU.

The plan, recorded once at live sizes TOKENS (the step's token rows), POS (its first position) and FED
(the rows whose ids the host wrote: a prefill's tokens; none at a decode step):

  q4_embedding(ids -> h)        (FED rows: a decode step's input row was written by the step before's argmax
                                 or sample)
  per layer:  rms_norm(h -> xn) | QKV (q4_linear_qkv) |
              rope_kv_cache_write (RoPE of q and k and the KV cache write in one dispatch, Qwen3's
              per-head RMSNorm of q and k folded in front; rms_norm, rope, rope, kv_cache_write where
              head_dim is not a multiple of 4; a decode's int8x QKV GEMV does it itself where its route
              q4_gemv_int8x_qkv_rope runs) | sdpa | h += o-proj(attn) |
              rms_norm(h -> xn) | gate, up, swiglu | h += down(act)
              (the residual adds are folded into the o-proj and down linears: q4_linear(accumulate=True))
  head:       last_row(h) (a prefill's; a decode step's one row is read in place) | final rms_norm |
              lm_head (the tied embedding) | argmax or sample -> ids[0], their second pass also storing it
              in history[pos + tokens] (TokenHistory) and writing its embedding row into h[0]
              (NextInput: the next step's input)

argmax (sampling None) or sample (a Sampling: seeded temperature / top-k / top-p, ops/sample.py) writes the
next token into ids[0] and its embedding row into h[0] (a decode step has no embedding dispatch), so decode
steps are submitted back to back with no host round trip; their second pass also keeps every token in a
history on the GPU for the host to read in batches. The sampler's draw depends on (seed, the token's
position), so a seed reproduces a run whatever the batch. The head always runs on one row (the last
position), at a prefill too.

The sequence's position lives on the GPU where every position-dependent dispatch can read it there
(position_on_gpu: the fused RoPE + cache write and a FlashDecoding route): those ops are recorded at
position 0, that history store advances the KV caches' shared offset after each step, and a decode step
costs the host one replay call, nothing re-sized. Elsewhere (head_dim not a multiple of 4, or the
materialized decode route) the host re-sizes the position's dispatches before each step.

Activation policies (POLICIES):
  f32    every linear reads f32 activations (GEMVs at a decode step, GEMMs at a prefill)
  f16    f32, except that the prefill's linears round x and the weights to f16 for the f16 subgroup-
         matrix GEMM (q4_gemm_sgmat_f16) where the device has it (Chromium on NVIDIA with the f16 flag;
         elsewhere the f32 GEMMs run, and attestation says so), and its attention rounds q and the
         probabilities to f16 for the f16 subgroup-matrix prefill (sdpa_prefill_sgmat_f16) where it runs
  int8x  every step quantizes each linear's input to int8 per group once, every row (rms_norm_int8x
         where a norm produces it, a decode's FlashDecoding reduce for the o-proj's, a decode's fused
         gate/up + SwiGLU for down's where its route q4_gemv_int8x_glu_q8 runs, quantize_activations
         otherwise; down's decode row in groups of 32, its prefill rows in the weights' 64): decode steps
         run the int8x GEMVs
         (the fused QKV and the fused gate/up + SwiGLU), prefills the int8 GEMMs (q, k and v, then gate
         and up apart and swiglu; on large grids the stacked QKV and gate/up + SwiGLU as one DP4A GEMM
         each: q4_qkv_fused_dp4a, q4_glu_dp4a; all idle at decode). The SwiGLU's f32 output (act) is still
         written at a decode step, but only the prefill reads it (its quantize_activations) where the fused
         GLU quantizes. The prefill's attention takes the f16 subgroup-matrix route as f16's does.

Route choices beside the policy (for comparing routes; the defaults are the fastest measured):
  attention  "auto" (the route tables' choice: the one-pass decode up to its reach and FlashDecoding past it,
             the tiled prefill routes, short prompts on the subgroup prefill where the table hands them over),
             "flash" (the same without the one pass), "sgmat" (the same without that handoff: the f16
             subgroup-matrix prefill at every length where it runs) or "materialized" (sdpa_materialized at
             every token count; its passes are sized on the host, so the position stays there)
  fused      True (the fused QKV GEMM/GEMV and, int8x, the fused gate/up + SwiGLU GEMV and GEMM where they
             apply) or False (q, k, v as three linears; gate, up and swiglu apart at every step)
  kv         "packed" (the KV caches' kernels read and write f16 pairs packed in u32) or "f16" (their shader-f16
             spellings where they have one and the device has the feature: ops/attention.py; else packed, and
             Decoder.kv_f16_refused says why)
  fuse_norm  True (int8x, fused: a decode step's RMSNorm + quantization runs inside the GEMV that reads it,
             each workgroup normalizing the residual row itself, where the route q4_gemv_int8x_qkv_rope_norm
             (Qwen3: _qkv_rope_qknorm_norm) or q4_gemv_int8x_glu_q8_norm runs; that norm's rms_norm_int8x
             then idles at a decode step) or False (the norm's own dispatch at every step)
With int8x and fused, a decode step's QKV GEMV applies RoPE and writes the KV cache where its workgroups
hold whole heads (head_dim 64, 32 or 128), Qwen3's q/k norm first (q4_gemv_int8x_qkv_rope_qknorm); the
prefill's rope_kv_cache_write then idles at a decode step. Elsewhere it stays a dispatch.

Bad input is refused before anything is dispatched: a prompt longer than the plan's rows or with
ids outside the vocabulary, a step past the KV cache (the context is full), an unknown policy.
"""

from __future__ import annotations

import asyncio
import time
from array import array
from dataclasses import dataclass, replace

from ..dispatch import CONTEXT, IDLE, POS, TOKENS, Op, idle_where, live_value
from ..ops.argmax import argmax, argmax_blocks_needed
from ..ops.attention import (FLASH_ROUTES, AttentionScratch, KVCache, context_band, kv_cache_write,
                             rope_kv_cache_write, sdpa)
from ..ops.int8_activations import Int8Activations, quantize_activations, rms_norm_int8x
from ..ops.norm import rms_norm
from ..ops.q4 import q4_embedding
from ..ops.q4_linear import NormPrologue, QKVRope, q4_linear, q4_linear_glu, q4_linear_qkv, split_k_room
from ..ops.rope import cos_sin_table_gpu, inverse_frequencies, rope
from ..ops.sample import Sampling, sample, sample_candidates_needed
from ..ops.sequence import NextInput, TokenHistory, last_row
from ..ops.swiglu import swiglu
from ..plan import Execution, Plan
from ..tensors import Tensor
from .config import ModelConfig
from .checkpoint_weights import load_weights
from .weights import GROUP_SIZE, ModelWeights

__all__ = ["POLICIES", "ATTENTION", "KV_SPELLINGS", "Decoder", "DecodeRun", "ContextFull"]

POLICIES = ("f32", "int8x", "f16")
ATTENTION = ("auto", "flash", "sgmat", "materialized")    # the attention routes' choice: the guards',
                                                # FlashDecoding at every decode context (the one pass off), the
                                                # tensor-core prefill at every length, or the materialized one
KV_SPELLINGS = ("packed", "f16")                # the KV caches' kernels: u32-packed f16 pairs, or shader-f16 types
SUBMIT_STEPS = 4            # decode steps per submit (decode(per_submit=)): the same step repeated in one command buffer
FED = "fed"                 # live size: the rows the embedding reads from ids (the host's), 0 at a decode step
DOWN_DECODE_GROUP = 32      # one 32-value chunk: the finest group the int8x GEMVs' per-chunk scales allow


def _no_progress(stage: str, done: int, total: int) -> None:
    pass


class ContextFull(ValueError):
    """A step would write past the KV cache."""


@dataclass(frozen=True)
class DecodeRun:
    """What Decoder.decode returns: the ids the steps chose, the host time of the steps' calls (GPU not
    waited on), and the last step's execution (its attested routes)."""

    ids: list[int]
    host_ns: int
    execution: Execution | None


def _view(tensor: Tensor, shape: tuple[int, ...]) -> Tensor:
    """The same buffer seen with another shape of as many elements ([S, H, D] as [S, H * D])."""
    view = Tensor(tensor.name, shape, tensor.dtype, tensor.usage, tensor.buffer)
    assert view.numel == tensor.numel, (tensor, shape)
    return view


def _prefill_only(op: Op) -> Op:
    """The op's dispatches idle at one live token (a decode step's fused int8x ops take their place)."""
    return _gated(op, "prefill")


def _decode_only(op: Op) -> Op:
    """The op's dispatches idle at more than one live token."""
    return _gated(op, "decode")


def _gated(op: Op, phase: str) -> Op:
    def gated(sizing):
        def size(spec, live):
            result = sizing(spec, live)
            if (live_value(TOKENS, live, op.name) > 1) == (phase == "prefill"):
                return result
            return replace(result, workgroups=IDLE, bytes_moved=0, flops=0)
        return size

    return Op(op.name, tuple(replace(call, sizing=gated(call.sizing), phase=phase) for call in op.calls),
              op.decisions)


class Decoder:
    """One model's weights, buffers and step plan. Make one with `await Decoder.create(...)`; run
    `await prefill(prompt)`, then `await step()` per token; `await tokens()` reads the sequence."""

    def __init__(self, runtime, config: ModelConfig, weights: ModelWeights, *, max_prompt: int, capacity: int,
                 policy: str, gpu_position: bool | None, attention: str = "auto", fused: bool = True,
                 fuse_norm: bool = True, sampling: Sampling | None = None, kv: str = "packed"):
        self.runtime, self.config, self.weights = runtime, config, weights
        self.sampling = sampling
        self.max_prompt, self.capacity, self.policy = max_prompt, capacity, policy
        self.attention, self.fused, self.fuse_norm, self.kv = attention, fused, fuse_norm, kv
        self.kv_f16_refused: str | None = None     # why kv="f16" runs packed here
        self.gpu_position = gpu_position     # None: wherever the plan allows (position_on_gpu says)
        self.position_on_gpu = False
        self.position = 0           # positions the KV cache holds; the next step starts here (the host's count)
        self._prefilled = False     # the first prefill runs inside error scopes
        self._layer_op: int | None = None     # while recording a layer: the index of its next op
        self.ops: list[Op] = []
        self._owned: list[Tensor] = []
        self.plan: Plan | None = None

    @classmethod
    async def create(cls, runtime, config: ModelConfig, *, seed: int = 0, max_prompt: int, capacity: int,
                     policy: str = "f32", gpu_position: bool | None = None, attention: str = "auto",
                     fused: bool = True, fuse_norm: bool = True, sampling: Sampling | None = None, progress=None,
                     checkpoint=None, kv: str = "packed") -> "Decoder":
        """Allocate the synthetic weights and every buffer, record the plan (every op validates its
        shapes here, before anything runs), then generate the weights on the GPU. `checkpoint` (a
        models.checkpoint_weights.CheckpointWeights, validated against `config`) loads its weights
        instead, uploaded and quantized on the GPU (`seed` is then unused). `gpu_position`
        False keeps the position on the host (every step re-sized); True refuses a plan that cannot
        keep it on the GPU; None (default) keeps it there where the plan allows. `progress(stage, done,
        total)` hears "pipelines" once per layer recorded (and the head) and "weights" around their generation.
        `attention`, `fused`, `fuse_norm` and `kv`: the route choices of the module docstring. `sampling` (a
        Sampling) draws each token on the GPU; None picks greedily (argmax)."""
        if sampling is not None and not isinstance(sampling, Sampling):
            raise TypeError(f"sampling must be a Sampling or None (greedy), not {type(sampling).__name__}")
        if policy not in POLICIES:
            raise ValueError(f"unknown activation policy {policy!r}; known: {POLICIES}")
        if attention not in ATTENTION:
            raise ValueError(f"unknown attention choice {attention!r}; known: {ATTENTION}")
        if kv not in KV_SPELLINGS:
            raise ValueError(f"unknown KV cache spelling {kv!r}; known: {KV_SPELLINGS}")
        if not 1 <= max_prompt <= capacity:
            raise ValueError(f"{config.name}: max_prompt {max_prompt} must be 1..capacity ({capacity})")
        progress = progress or _no_progress
        if checkpoint is None:
            weights = await ModelWeights.allocate(runtime, config, seed=seed, scales_rows=policy == "int8x")
        else:
            weights = await load_weights(runtime, config, checkpoint, scales_rows=policy == "int8x", progress=progress)
        decoder = cls(runtime, config, weights, max_prompt=max_prompt, capacity=capacity, policy=policy,
                      gpu_position=gpu_position, attention=attention, fused=fused, fuse_norm=fuse_norm,
                      sampling=sampling, kv=kv)
        try:
            await decoder._record(progress)
            if weights.pending:
                progress("weights", 0, 1)
                await weights.generate()
                progress("weights", 1, 1)
        except BaseException:
            decoder.release()
            raise
        return decoder

    async def _tensor(self, name: str, shape, dtype: str = "f32") -> Tensor:
        tensor = await self.runtime.tensors.allocate(f"{self.config.key}.{name}", shape, dtype)
        self._owned.append(tensor)
        return tensor

    async def _int8(self, x: Tensor, rows: int = 1, group_size: int = GROUP_SIZE, tag: str = "") -> Int8Activations:
        act = await Int8Activations.allocate(self.runtime, x, group_size, rows=rows, tag=tag)
        self._owned += act.tensors
        return act

    async def _add(self, op: Op) -> None:
        """Add to the plan; the n-th op of every layer is added like the first layer's (layers differ in
        tensors, not in sizes: the plan sizes one layer and the others share its sizing and params)."""
        self.ops.append(op)
        like = None
        if self._layer_op is not None:
            like, self._layer_op = ("layer op", self._layer_op), self._layer_op + 1
        await self.plan.add(op, like=like)

    async def _record(self, progress) -> None:
        c, w, rows, t = self.config, self.weights, self.max_prompt, self._tensor
        adapter = self.runtime.device.adapter
        d, hd, f = c.hidden, c.head_dim, c.intermediate
        int8x = self.policy == "int8x"
        half = self.policy == "f16"         # the prefill linears may take the f16 subgroup-matrix GEMM
        half_attention = self.policy != "f32"   # the prefill's attention may take the f16 subgroup-matrix route
        self.ids = await t("ids", (rows,), "u32")
        status = await t("status", (rows,), "u32")
        self.history = await t("history", (self.capacity + 1,), "u32")
        h = await t("h", (rows, d))
        xn = await t("xn", (rows, d))
        q, k, v = (await t("q", (rows, c.heads, hd)), await t("k", (rows, c.kv_heads, hd)),
                   await t("v", (rows, c.kv_heads, hd)))
        q_rot = await t("q_rot", (rows, c.heads, hd))
        k_rot = await t("k_rot", (rows, c.kv_heads, hd)) if hd % 4 else None
        if c.qk_norm and hd % 4:
            qn, kn = await t("qn", (rows, c.heads, hd)), await t("kn", (rows, c.kv_heads, hd))
        attn = await t("attn", (rows, c.heads, hd))
        attn_rows = _view(attn, (rows, c.q_dim))
        gate, up, act = await t("gate", (rows, f)), await t("up", (rows, f)), await t("act", (rows, f))
        last, last_n = await t("last", (1, d)), await t("last_n", (1, d))
        self.logits = await t("logits", (1, c.vocab))
        table = await t("rope_table", (self.capacity, hd // 2, 2))
        await cos_sin_table_gpu(self.runtime, table, inverse_frequencies(hd, c.rope_theta, c.rope_scaling))
        self.offset = await t("position_offset", (1,), "u32")
        caches = []
        for i in range(c.layers):
            cache = await KVCache.allocate(self.runtime, f"{c.key}.kv{i}", capacity=self.capacity,
                                           kv_heads=c.kv_heads, head_dim=hd, offset=self.offset, f16=self.kv == "f16")
            self._owned += [cache.k, cache.v]
            caches.append(cache)
        self.kv_f16_refused = caches[0].f16_refused       # (one device: every layer's cache alike)
        scratch = await AttentionScratch.allocate(self.runtime, f"{c.key}.attn_scratch", heads=c.heads, head_dim=hd,
                                                  max_tokens=rows, capacity=self.capacity)
        self._owned += [scratch.scores, scratch.part_ml, scratch.part_o]
        forced = "sdpa_materialized" if self.attention == "materialized" else None
        one_pass = self.attention != "flash"
        decode_route = sdpa(q=q_rot, cache=caches[0], out=attn, scratch=scratch, heads=c.heads,
                            adapter=adapter, force=forced, one_pass=one_pass).calls[0].route
        possible = hd % 4 == 0 and decode_route in FLASH_ROUTES
        if self.gpu_position and not possible:
            raise ValueError(f"{c.name}: the position cannot live on the GPU here (head_dim {hd}"
                             f"{' is not a multiple of 4' if hd % 4 else ''}, decode route {decode_route}; it needs "
                             f"the fused RoPE + cache write and one of {', '.join(FLASH_ROUTES)})")
        gpu = self.position_on_gpu = possible and self.gpu_position is not False
        pos = 0 if gpu else POS
        reduce_quantizes = int8x and decode_route in FLASH_ROUTES and hd % GROUP_SIZE == 0
        partials = None
        if int8x:
            # every row quantized: the prefill's linears take the DP4A GEMMs (the head reads one row)
            xn_q, attn_q, act_q = [await self._int8(x, rows) for x in (xn, attn_rows, act)]
            # a decode step's down reads its own, in finer groups: the fused GLU that writes them then needs
            # whole groups of DOWN_DECODE_GROUP rows per workgroup, not 64 (more, smaller workgroups)
            act_dq = await self._int8(act, 1, DOWN_DECODE_GROUP, tag="decode")
            last_q = await self._int8(last_n)
            # where the subgroup-matrix GEMM's grid is small, its K splits (one linear runs at a time)
            partials = await t("gemm_partials", (split_k_room(),)) if rows > 1 else None

        self.plan = Plan(self.runtime, f"{c.key}.decoder", live={TOKENS: rows, POS: 0, CONTEXT: self.capacity,
                                                                  FED: rows})
        add = self._add
        await add(q4_embedding(ids=self.ids, weight=w["embed"], out=h, status=status, tokens=FED))

        async def norm_into_xn(weight: Tensor, consumer: Op | None = None) -> None:
            """The norm before a linear; where its consumer's decode GEMV normalizes for itself (a _norm
            route), the norm's dispatch serves the prefill only."""
            if int8x:
                norm = rms_norm_int8x(x=h, weight=weight, act=xn_q, eps=c.norm_eps)
                in_gemv = consumer is not None and any(call.route.endswith("_norm") for call in consumer.calls)
                await add(_prefill_only(norm) if in_gemv else norm)
            else:
                await add(rms_norm(x=h, weight=weight, out=xn, eps=c.norm_eps, adapter=adapter))

        def prologue(weight: Tensor) -> NormPrologue | None:
            return NormPrologue(x=h, weight=weight, eps=c.norm_eps) if int8x and self.fuse_norm else None

        for i in range(c.layers):
            progress("pipelines", i, c.layers + 1)
            self._layer_op = 0
            layer = lambda name: w[f"layers.{i}.{name}"]    # noqa: E731
            qkv, qkv_outs = layer("qkv"), (_view(q, (rows, c.q_dim)), _view(k, (rows, c.kv_dim)),
                                           _view(v, (rows, c.kv_dim)))
            qkv_ropes = False
            if self.fused:
                # int8x: the decode QKV may apply RoPE (after Qwen3's q/k norm) and write the cache too
                # (where hd % 4 == 0 and a workgroup holds whole heads), and normalize its own input (fuse_norm)
                qkv_rope = QKVRope(q_out=q_rot, table=table, cache=caches[i], layout=c.rope_layout, pos=pos,
                                   qk_norm=(layer("q_norm"), layer("k_norm")) if c.qk_norm else None,
                                   eps=c.norm_eps) if int8x and hd % 4 == 0 else None
                qkv_op = q4_linear_qkv(x=xn, weight=qkv, adapter=adapter, int8=xn_q if int8x else None, outs=qkv_outs,
                                       rope=qkv_rope, half=half, norm=prologue(layer("attn_norm")), partials=partials)
                qkv_ropes = any(call.route.startswith("q4_gemv_int8x_qkv_rope") for call in qkv_op.calls)
                await norm_into_xn(layer("attn_norm"), qkv_op)
                await add(qkv_op)
            else:
                await norm_into_xn(layer("attn_norm"))
                first = 0
                for out in qkv_outs:
                    width = out.shape[-1]
                    await add(q4_linear(x=xn, weight=qkv.rows(qkv.n_offset + first, width), out=out, adapter=adapter,
                                        int8=xn_q if int8x else False, half=half, partials=partials))
                    first += width
            q_src, k_src = q, k
            fused_norm = c.qk_norm and hd % 4 == 0      # folded into the fused RoPE + cache write
            if c.qk_norm and not fused_norm:
                await add(rms_norm(x=q, weight=layer("q_norm"), out=qn, heads=c.heads, eps=c.norm_eps,
                                   adapter=adapter))
                await add(rms_norm(x=k, weight=layer("k_norm"), out=kn, heads=c.kv_heads, eps=c.norm_eps,
                                   adapter=adapter))
                q_src, k_src = qn, kn
            if hd % 4 == 0:         # the fused kernel rotates two pairs per invocation
                rope_write = rope_kv_cache_write(q=q_src, k=k_src, v=v, q_out=q_rot, table=table, cache=caches[i],
                                                 heads=c.heads, layout=c.rope_layout, pos=pos, eps=c.norm_eps,
                                                 qk_norm=(layer("q_norm"), layer("k_norm")) if fused_norm else None)
                # (a decode's QKV GEMV does its work where qkv_ropes)
                await add(_prefill_only(rope_write) if qkv_ropes else rope_write)
            else:
                await add(rope(src=q_src, dst=q_rot, table=table, heads=c.heads, head_dim=hd, layout=c.rope_layout))
                await add(rope(src=k_src, dst=k_rot, table=table, heads=c.kv_heads, head_dim=hd, layout=c.rope_layout))
                await add(kv_cache_write(k=k_rot, v=v, cache=caches[i]))
            await add(sdpa(q=q_rot, cache=caches[i], out=attn, scratch=scratch, heads=c.heads, adapter=adapter,
                           pos=pos, gpu_position=gpu, int8=attn_q if reduce_quantizes else None, force=forced,
                           one_pass=one_pass, half=half_attention, short_prefill=self.attention != "sgmat"))
            if int8x:           # (a decode's FlashDecoding reduce writes it where reduce_quantizes)
                quantize = quantize_activations(attn_q)
                await add(_prefill_only(quantize) if reduce_quantizes else quantize)
            await add(q4_linear(x=attn_rows, weight=layer("o"), out=h, adapter=adapter,
                                int8=attn_q if int8x else False, accumulate=True, half=half, partials=partials))
            gate_up = layer("gate_up")
            separate = [q4_linear(x=xn, weight=gate_up.rows(0, f), out=gate, adapter=adapter, int8=xn_q if int8x else False,
                                  half=half, partials=partials),
                        q4_linear(x=xn, weight=gate_up.rows(f, f), out=up, adapter=adapter, int8=xn_q if int8x else False,
                                  half=half, partials=partials),
                        swiglu(gate=gate, up=up, out=act)]
            glu = int8x and self.fused         # the fused gate/up + SwiGLU GEMV serves the decode
            glu_op = q4_linear_glu(act=xn_q, weight=gate_up, out=act, adapter=adapter, int8_out=act_dq,
                                   norm=prologue(layer("mlp_norm"))) if glu else None
            await norm_into_xn(layer("mlp_norm"), glu_op)
            # the GLU op's prefill GEMM, where it has one, does gate, up and swiglu's work on large prefills
            fused_prefill = [call for call in glu_op.calls if call.phase == "prefill"] if glu else []
            for op in separate:
                op = idle_where(op, fused_prefill[0]) if fused_prefill else op
                await add(_prefill_only(op) if glu else op)
            glu_quantizes = False
            if glu:
                glu_quantizes = glu_op.calls[0].route.startswith("q4_gemv_int8x_glu_q8")
                await add(glu_op)
            down = layer("down")
            if int8x:           # the prefill's rows, and a decode's row (unless the fused GLU wrote it)
                await add(_prefill_only(quantize_activations(act_q)))
                if not glu_quantizes:
                    await add(_decode_only(quantize_activations(act_dq, tokens=1)))
                await add(_prefill_only(q4_linear(x=act, weight=down, out=h, adapter=adapter, int8=act_q,
                                                  accumulate=True, partials=partials)))
                await add(_decode_only(q4_linear(x=act, weight=down, out=h, adapter=adapter, int8=act_dq, tokens=1,
                                                 accumulate=True)))
            else:
                await add(q4_linear(x=act, weight=down, out=h, adapter=adapter, int8=False, accumulate=True,
                                    half=half, partials=partials))

        self._layer_op = None
        # The head reads one row at every step: its sizes are fixed, not the live TOKENS.
        progress("pipelines", c.layers, c.layers + 1)
        # (a decode step's one row is its last: the final norm reads it in place, last_row idles)
        await add(_prefill_only(last_row(x=h, out=last)))
        for row, gate in ((last, _prefill_only), (h, _decode_only)):
            if int8x:
                await add(gate(rms_norm_int8x(x=row, weight=w["final_norm"], act=last_q, eps=c.norm_eps, tokens=1)))
            else:
                await add(gate(rms_norm(x=row, weight=w["final_norm"], out=last_n, eps=c.norm_eps, adapter=adapter,
                                        tokens=1)))
        await add(q4_linear(x=last_n, weight=w.lm_head, out=self.logits, adapter=adapter, tokens=1,
                            int8=last_q if int8x else False))
        # (the chosen token's second pass also stores it in the history and advances the position there)
        history = TokenHistory(self.history, self.offset, pos=pos, advance=gpu)
        # (and the chosen token's embedding row into h[0]: a decode step starts at its first layer)
        next_input = NextInput(w["embed"], h)
        if self.sampling is None:
            blocks = (argmax_blocks_needed(c.vocab),)
            await add(argmax(values=self.logits, block_keys=await t("argmax_keys", blocks, "u32"),
                             block_index=await t("argmax_index", blocks, "u32"), result=self.ids, history=history,
                             embed=next_input))
        else:
            candidates = (sample_candidates_needed(c.vocab),)
            await add(sample(values=self.logits, candidate_keys=await t("sample_keys", candidates, "u32"),
                             candidate_index=await t("sample_index", candidates, "u32"), result=self.ids,
                             offset=self.offset, sampling=self.sampling, pos=pos, history=history, embed=next_input))
        self.plan.record()
        progress("pipelines", c.layers + 1, c.layers + 1)

    def _check_step(self, tokens: int) -> None:
        if self.position + tokens > self.capacity:
            raise ContextFull(f"{self.config.name}: {tokens} token(s) at position {self.position} do not fit the "
                              f"{self.capacity}-position KV cache (the context is full)")

    async def prefill(self, prompt: list[int], *, wait: bool = True, profile: bool | str = False) -> Execution:
        """Start a sequence: the prompt's tokens at positions 0..S-1, then the first generated token
        (history[S], and ids[0] for the next step). wait=False returns once it is submitted (a read of the
        tokens then waits for it: one round trip to the first token); the decoder's first prefill waits
        inside error scopes whatever `wait` says."""
        s, vocab = len(prompt), self.config.vocab
        if not 1 <= s <= self.max_prompt:
            raise ValueError(f"{self.config.name}: a prompt of {s} tokens; this plan takes 1..{self.max_prompt}")
        bad = [token for token in prompt if not 0 <= token < vocab]
        if bad:
            raise ValueError(f"{self.config.name}: prompt ids {bad[:5]} are outside the vocabulary of {vocab}")
        self.position = 0
        self._check_step(s)
        words = array("I", prompt).tobytes()
        self.runtime.device.write_buffer(self.ids.buffer, words)
        self.runtime.device.write_buffer(self.history.buffer, words)
        self.runtime.device.write_buffer(self.offset.buffer, bytes(4))      # a new sequence starts at 0
        # (the band of the first decode step's keys: the steps after it re-size only where they cross one)
        self.plan.resize(tokens=s, fed=s, pos=0, context=context_band(s + 1, self.capacity))
        execution = await self.plan.replay(wait=wait or not self._prefilled, profile=profile)
        self._prefilled = True
        self.position = s
        return execution

    async def step(self, *, wait: bool = False, profile: bool | str = False, count: int = 1) -> Execution:
        """One decode step of the token at the current position (on the GPU, from ids[0]); count=N: N
        steps in one submit (unwaited, unprofiled), which needs the position on the GPU and the N steps
        in one context band (submit_steps says how many may go together)."""
        if self.position == 0:
            raise ValueError(f"{self.config.name}: no sequence; prefill a prompt first")
        if count < 1 or count > self.submit_steps(count):
            raise ValueError(f"{self.config.name}: {count} step(s) at position {self.position} cannot go in one "
                             f"submit (at most {self.submit_steps(count)} here)")
        self._check_step(count)
        if not self.position_on_gpu:
            self.plan.resize(tokens=1, fed=0, pos=self.position)
        else:       # the first step after a prefill, and a step into a new context band; others re-size nothing
            band = context_band(self.position + 1, self.capacity)
            if (self.plan.live[TOKENS], self.plan.live[FED], self.plan.live[CONTEXT]) != (1, 0, band):
                self.plan.resize(tokens=1, fed=0, context=band)
        execution = await self.plan.replay(wait=wait, profile=profile, repeat=count)
        self.position += count
        return execution

    def submit_steps(self, wanted: int) -> int:
        """How many of `wanted` decode steps from the current position may go in one submit: the same
        recorded step repeated reads its position from the GPU, so the steps must share a context band
        (the sizes they run at) and fit the cache; with the position on the host, one."""
        if not self.position_on_gpu or wanted <= 1:
            return min(wanted, 1)
        band = context_band(self.position + 1, self.capacity)
        return max(1, min(wanted, band - self.position, self.capacity - self.position))

    async def tokens(self, start: int = 0, end: int | None = None) -> list[int]:
        """The sequence's tokens [start, end) from the GPU's history (default: all so far, the prompt, each
        generated token, and the one chosen by the last step)."""
        end = self.position + 1 if end is None else end
        if not 0 <= start <= end <= self.position + 1:
            raise ValueError(f"tokens [{start}, {end}) outside the sequence's {self.position + 1}")
        words = array("I")
        words.frombytes(await self.runtime.device.read_buffer(self.history.buffer, 4 * (end - start), 4 * start))
        return list(words)

    async def read_logits(self) -> bytes:
        """The last step's logits (f32, the vocabulary's length)."""
        return await self.runtime.device.read_buffer(self.logits.buffer, 4 * self.config.vocab)

    async def generate(self, prompt: list[int], steps: int, *, batch: int = 16, on_batch=None) -> dict:
        """Prefill, then `steps` decode steps (decode()). Returns the generated ids (the prefill's
        token first) and the host-side timings."""
        if steps < 0 or batch < 1:
            raise ValueError(f"steps {steps} and batch {batch} must be >= 0 and >= 1")
        if len(prompt) + steps > self.capacity:
            raise ContextFull(f"{self.config.name}: a prompt of {len(prompt)} and {steps} steps need "
                              f"{len(prompt) + steps} positions; the KV cache holds {self.capacity}")
        started = time.perf_counter()
        await self.prefill(prompt, wait=False)
        first = await self.tokens(len(prompt), len(prompt) + 1)
        prefill_s = time.perf_counter() - started
        decode_started = time.perf_counter()
        run = await self.decode(steps, batch=batch, on_batch=on_batch)
        return {"ids": first + run.ids, "prefill_s": prefill_s, "decode_s": time.perf_counter() - decode_started}

    async def decode(self, steps: int, *, batch: int = 16, on_batch=None, per_submit: int | None = None) -> "DecodeRun":
        """`steps` decode steps of the current sequence, submitted back to back, up to `per_submit` of
        them in one submit (default SUBMIT_STEPS; fewer where a batch or a context band ends); the ids
        they choose are read after every `batch` steps and after the last (the only host round trips),
        and `on_batch(done, ids)` hears each read (the steps done, every id read so far). A batch's read
        is awaited only once the next batch is submitted (the last one's at the end), so the GPU never
        idles through a read's round trip: on_batch hears a batch one batch late."""
        per_submit = SUBMIT_STEPS if per_submit is None else per_submit
        if per_submit < 1:
            raise ValueError(f"per_submit {per_submit} must be >= 1")
        ids, host_ns, execution = [], 0, None
        reads = []                          # (a read in flight, the steps done when it started), oldest first

        async def take() -> None:
            nonlocal ids
            task, done = reads[0]
            ids += await task
            reads.pop(0)
            if on_batch is not None:
                on_batch(done, ids)

        first = self.position + 1           # history index of the first step's token
        read_from = first
        try:
            done = 0
            while done < steps:
                began = time.perf_counter_ns()
                count = self.submit_steps(min(per_submit, steps - done, batch - done % batch))
                execution = await self.step(count=count)
                done += count
                host_ns += time.perf_counter_ns() - began
                if done % batch == 0 or done == steps:
                    reads.append((asyncio.ensure_future(self.tokens(read_from, first + done)), done))
                    read_from = first + done
                    await asyncio.sleep(0)      # the read's task starts: its copy follows this batch's steps
                    if len(reads) > 1:
                        await take()
            while reads:
                await take()
        except BaseException:
            for task, _ in reads:           # (nothing left in flight unawaited)
                task.cancel()
            raise
        return DecodeRun(ids, host_ns, execution)

    def release(self) -> None:
        if self.plan is not None:
            self.plan.release()
        for tensor in self._owned:
            self.runtime.tensors.release(tensor.name)
        self._owned = []
        self.weights.release()
