"""Decoder building blocks at real model shapes, run identically in the page and natively.

For each model geometry (Llama-3.2-1B, Qwen3-0.6B, and one with awkward sizes) one plan is recorded
once with the live sizes `seq` (tokens) and `pos` (start position) and then resized through a
prefill-then-decode sequence of steps (the longest S at position 0, the shorter ones continuing the
context, then each S again at the last positions of the RoPE table). Every step runs RMSNorm (both
reduction routes where the device has subgroups), Qwen3's per-head q/k norm, RoPE on q and k, fused
SwiGLU, the residual add (out of place and in place) and the f32 embedding lookup. A second pair
of plans runs argmax at vocab sizes and awkward sizes with planted ties, NaNs and signed zeros.

Inputs come from the GPU's counter-based generator, so the host oracle rebuilds them with
synth_values_np; outputs (plus one guard row past the live rows, poisoned before every step) go
to the sink. In the page this module checks structure only (unwritten elements, guard rows,
embedding status words, routes) and argmax exactly; every number is checked by the host oracle
(py_runtime/host/oracle/, verify_decoder_blocks_report) on both backends.
"""

from __future__ import annotations

import struct
import time
from array import array
from dataclasses import dataclass

from ..dispatch import POS, TOKENS
from ..models.config import LLAMA3_SCALING, LLAMA_3_2_1B, QWEN3_0_6B, Llama3Scaling, ModelConfig
from ..ops.argmax import argmax, argmax_blocks_needed
from ..ops.embedding import embedding_f32
from ..ops.norm import rms_norm, rms_norm_kernel
from ..ops.rope import cos_sin_table_gpu, inverse_frequencies, rope
from ..ops.sequence import TokenHistory
from ..ops.swiglu import residual_add, swiglu
from ..ops.synth import UniformRange, fill_uniform, synth_hash, synth_value
from ..plan import Plan
from ..runtime import Runtime
from .outcome import no_progress, verdict

__all__ = ["ModelShape", "MODELS", "RANGES", "STREAMS", "ROPE_POSITIONS", "ARGMAX_SIZES", "ARGMAX_RANGE", "ARGMAX_POS",
           "DEFAULT_LENGTHS", "POISON", "steps_for", "step_ids", "argmax_cases", "argmax_reference", "run_decoder_blocks",
           "DecoderBlocksOptions"]

POISON = bytes.fromhex("addbba7f")      # f32 NaN 0x7FBADBAD (u32 0x7FBADBAD for status words)
POISON_WORD = struct.unpack("<I", POISON)[0]
ROPE_POSITIONS = 4096                   # rows of each cos/sin table: positions 0..4095
DEFAULT_LENGTHS = (1, 7, 128)
ALLOWED_LENGTHS = (1, 7, 128, 512)      # 512 only when asked for (options.lengths)


@dataclass(frozen=True)
class ModelShape:
    key: str
    name: str
    hidden: int
    q_heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    theta: float
    scaling: Llama3Scaling | None
    eps: float
    layout: str                 # RoPE pair layout: "interleaved" (Meta) or "half" (HF rotate-half)
    qk_norm: bool               # Qwen3: per-head RMSNorm of q and k before RoPE
    table_rows: int             # rows of the embedding table the check allocates (see below)

    def to_json(self) -> dict:
        return {"key": self.key, "name": self.name, "hidden": self.hidden, "q_heads": self.q_heads,
                "kv_heads": self.kv_heads, "head_dim": self.head_dim, "ffn": self.ffn, "vocab": self.vocab,
                "theta": self.theta, "llama3_scaling": self.scaling is not None, "eps": self.eps,
                "layout": self.layout, "qk_norm": self.qk_norm, "table_rows": self.table_rows}


# The embedding table has the model's D but only `table_rows` rows: a full f32 table (128256 x 2048,
# 1 GiB; 151936 x 1024, 594 MiB) is above lavapipe's 128 MiB maxStorageBufferBindingSize and too
# slow to generate on CPU adapters. The kernel's addressing (id * D + c) is the same at any row count;
# ids past the table, including real-vocab ids, exercise the out-of-range path.
def _block_of(config: ModelConfig, *, layout: str | None = None, table_rows: int) -> ModelShape:
    """One decoder block's geometry, read from the model's config."""
    return ModelShape(key=config.key, name=config.name, hidden=config.hidden, q_heads=config.heads,
                      kv_heads=config.kv_heads, head_dim=config.head_dim, ffn=config.intermediate, vocab=config.vocab,
                      theta=config.rope_theta, scaling=config.rope_scaling, eps=config.norm_eps,
                      layout=layout or config.rope_layout, qk_norm=config.qk_norm, table_rows=table_rows)


MODELS = {
    # Llama's block takes Meta's interleaved RoPE pairs, so that both layouts run at a real geometry.
    "llama": _block_of(LLAMA_3_2_1B, layout="interleaved", table_rows=2048),
    "qwen3": _block_of(QWEN3_0_6B, table_rows=2048),
    # Rows that are not multiples of the workgroup sizes (1000 vs 256, head_dim 96 vs 64), an odd FFN,
    # 3 q heads over 1 kv head, and the other RoPE layout with scaling; the table is the whole vocab.
    "awkward": ModelShape(key="awkward", name="awkward sizes", hidden=1000, q_heads=3, kv_heads=1, head_dim=96,
                          ffn=1001, vocab=37, theta=10000.0, scaling=LLAMA3_SCALING, eps=1e-6,
                          layout="half", qk_norm=True, table_rows=37),
}

# Every range is exact in f32 by construction (UniformRange). The norm inputs are small on purpose:
# with mean(x^2) ~ 8e-5 (x) and ~5e-6 (q, k) the eps terms (1e-5, 1e-6) move the result by percents,
# far above the rounding budget, so a kernel that dropped or misplaced eps would fail.
RANGES = {
    "x": UniformRange(scale_log2=-29, offset=-2.0 ** -6),       # [-1/64, 1/64)
    "norm_w": UniformRange(scale_log2=-22, offset=-2.0),        # [-2, 2)
    "q": UniformRange(scale_log2=-31, offset=-2.0 ** -8),       # [-1/256, 1/256)
    "k": UniformRange(scale_log2=-31, offset=-2.0 ** -8),
    "q_norm_w": UniformRange(scale_log2=-22, offset=-2.0),
    "k_norm_w": UniformRange(scale_log2=-22, offset=-2.0),
    "gate": UniformRange(scale_log2=-20, offset=-8.0),          # [-8, 8)
    "up": UniformRange(scale_log2=-21, offset=-4.0),
    "res_a": UniformRange(scale_log2=-21, offset=-4.0),
    "res_b": UniformRange(scale_log2=-23, offset=-1.0),         # [-1, 1)
    "emb_table": UniformRange(scale_log2=-23, offset=-1.0),
}
_ROLES = tuple(RANGES)
STREAMS = {model: {role: 5000 + 100 * m + r for r, role in enumerate(_ROLES)} for m, model in enumerate(MODELS)}
IDS_STREAM = 4000
ARGMAX_RANGE = UniformRange(scale_log2=-19, offset=-16.0)       # [-16, 16)
ARGMAX_STREAM = 4500
ARGMAX_SIZES = (1, 255, 257, 2048, 2049, 65537, LLAMA_3_2_1B.vocab, QWEN3_0_6B.vocab)     # ... and the vocabularies
ARGMAX_TIE = 64.0                                               # above the range: the planted maximum
ARGMAX_HISTORY = 8          # the argmax check's token history: its reduce stores the winner at 1 + ARGMAX_POS + offset
ARGMAX_POS = 2


@dataclass(frozen=True, kw_only=True)
class DecoderBlocksOptions:
    seed: int = 31337
    lengths: tuple[int, ...] = DEFAULT_LENGTHS
    models: tuple[str, ...] = tuple(MODELS)
    argmax: bool = True
    profile: bool = True
    artifacts: bool = True

    @classmethod
    def with_parts(cls, parts, **values) -> "DecoderBlocksOptions":
        """`parts` (the page's `ops` list) picks what runs: model keys and/or "argmax"."""
        return cls(models=tuple(m for m in MODELS if m in parts), argmax="argmax" in parts, **values)

def steps_for(lengths, positions: int = ROPE_POSITIONS) -> list[tuple[int, int]]:
    """(S, start position) per step: the longest S prefills at 0, each shorter S continues the context,
    then every S again at the end of the table (last position = positions - 1)."""
    ordered = sorted(set(lengths), reverse=True)
    steps, pos = [], 0
    for s in ordered:
        steps.append((s, pos))
        pos += s
    steps += [(s, positions - s) for s in ordered]
    return steps


def step_ids(model: ModelShape, seed: int, step: int, tokens: int) -> list[int]:
    """Token ids of one step: hashed ids in the table, the table's first/last rows, and planted
    out-of-range ids (just past the table, the real vocab's last id, 0xFFFFFFFF)."""
    rows = model.table_rows
    ids = [synth_hash(seed, IDS_STREAM + step, t) % rows for t in range(tokens)]
    ids[0] = rows - 1 if step % 2 == 0 else 0
    if tokens == 1 and step % 2 == 1:
        ids[0] = model.vocab - 1
    if tokens >= 2:
        ids[1] = rows
    if tokens >= 3:
        ids[-1] = 0xFFFFFFFF
    return ids


def _bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


def argmax_cases(sizes=ARGMAX_SIZES) -> list[dict]:
    """Every argmax case: kind, n, plants [(index, f32 bits)] written over the generated values in
    order, or a whole vector ('full', f32 bits) that replaces them. Kinds: random (no plants), last
    (the maximum at n - 1), ties (one maximum planted 2-3 times: the lowest index must win), nan (+inf
    at 0, NaNs of both signs: the first NaN must win), signed_zeros, all_neg_inf."""
    nan, neg_nan, inf = 0x7FC00000, 0xFFC00001, 0x7F800000
    tie = _bits(ARGMAX_TIE)
    cases = []
    for n in sizes:
        cases.append({"kind": "random", "n": n, "plants": [], "full": None})
        if n >= 2:      # the maximum alone in the last (usually partial) block
            cases.append({"kind": "last", "n": n, "plants": [[n - 1, tie]], "full": None})
        spots = sorted({n - 1, (2 * n) // 3, n // 2 + 1} & set(range(n)), reverse=True)
        cases.append({"kind": "ties", "n": n, "plants": [[i, tie] for i in spots], "full": None})
        if n >= 4:
            cases.append({"kind": "nan", "n": n, "full": None,
                          "plants": [[0, inf], [n - 1, nan], [n // 2, neg_nan], [n // 2 + 1, tie]]})
    neg_zero, pos_zero = 0x80000000, 0x00000000
    cases.append({"kind": "signed_zeros", "n": 5, "plants": [],
                  "full": [_bits(-1.0), neg_zero, _bits(-3.0), pos_zero, neg_zero]})
    cases.append({"kind": "all_neg_inf", "n": 257, "plants": [], "full": [0xFF800000] * 257})
    return cases


def _order_key(bits: int) -> int:
    magnitude = bits & 0x7FFFFFFF
    if magnitude > 0x7F800000:
        return 0xFFFFFFFF
    if magnitude == 0:
        return 0x80000000
    return (~bits & 0xFFFFFFFF) if bits != magnitude else bits | 0x80000000


def argmax_reference(words) -> int:
    """Pure-Python argmax of f32 bit patterns with the kernels' semantics (first of the largest key)."""
    best, best_key = 0, -1
    for i, bits in enumerate(words):
        key = _order_key(bits)
        if key > best_key:
            best, best_key = i, key
    return best


def _poison_count(data: bytes) -> int:
    words = array("I")
    words.frombytes(data)
    return words.count(POISON_WORD)


class _Model:
    """Tensors and the two plans (weights/inputs once, the step plan per step) of one geometry."""

    def __init__(self, runtime: Runtime, shape: ModelShape, capacity: int, seed: int, subgroups: bool):
        self.runtime, self.shape, self.capacity, self.seed, self.subgroups = runtime, shape, capacity, seed, subgroups
        self.tensors = {}
        self.outputs = {}           # name -> elements per token row

    async def _tensor(self, name, shape, dtype="f32"):
        tensor = await self.runtime.tensors.allocate(f"{self.shape.key}.{name}", shape, dtype)
        self.tensors[name] = tensor
        return tensor

    async def build(self) -> tuple[Plan, Plan]:
        m, cap = self.shape, self.capacity
        d, hd, f = m.hidden, m.head_dim, m.ffn
        t = self._tensor
        streams = STREAMS[m.key]
        inputs = {
            "norm_w": await t("norm_w", (d,)),
            "q": await t("q", (cap, m.q_heads, hd)),
            "k": await t("k", (cap, m.kv_heads, hd)),
            "x": await t("x", (cap, d)),
            "gate": await t("gate", (cap, f)),
            "up": await t("up", (cap, f)),
            "res_b": await t("res_b", (cap, d)),
            "emb_table": await t("emb_table", (m.table_rows, d)),
        }
        if m.qk_norm:
            inputs["q_norm_w"] = await t("q_norm_w", (hd,))
            inputs["k_norm_w"] = await t("k_norm_w", (hd,))
        setup = Plan(self.runtime, f"{m.key}.setup")
        for role, tensor in inputs.items():
            await setup.add(fill_uniform(target=tensor, value_range=RANGES[role], seed=self.seed, stream=streams[role]))
        setup.record()

        # Outputs carry one spare token row so the row after the live ones can be checked at S = capacity.
        out = {}
        for name, row in (("xn", (d,)), ("q_rot", (m.q_heads, hd)), ("k_rot", (m.kv_heads, hd)), ("act", (f,)),
                          ("res_out", (d,)), ("emb", (d,))):
            out[name] = await t(name, (cap + 1, *row))
        if self.subgroups:
            out["xn_sg"] = await t("xn_sg", (cap + 1, d))
        if m.qk_norm:
            out["qn"] = await t("qn", (cap + 1, m.q_heads, hd))
            out["kn"] = await t("kn", (cap + 1, m.kv_heads, hd))
            if self.subgroups:
                out["qn_sg"] = await t("qn_sg", (cap + 1, m.q_heads, hd))
        res_a = await t("res_a", (cap + 1, d))
        status = await t("status", (cap + 1,), "u32")
        ids = await t("ids", (cap,), "u32")
        table = await t("rope_table", (ROPE_POSITIONS, hd // 2, 2))
        await cos_sin_table_gpu(self.runtime, table, inverse_frequencies(hd, m.theta, m.scaling))
        self.outputs = {name: tensor.numel // (cap + 1) for name, tensor in out.items()}

        adapter = self.runtime.device.adapter
        step = Plan(self.runtime, f"{m.key}.step", live={TOKENS: cap, POS: 0})
        await step.add(fill_uniform(target=res_a, value_range=RANGES["res_a"], seed=self.seed,
                                    stream=streams["res_a"]))
        await step.add(rms_norm(x=inputs["x"], weight=inputs["norm_w"], out=out["xn"], tokens=TOKENS, eps=m.eps,
                                adapter=adapter, force="rms_norm"))
        if self.subgroups:
            await step.add(rms_norm(x=inputs["x"], weight=inputs["norm_w"], out=out["xn_sg"], tokens=TOKENS,
                                    eps=m.eps, adapter=adapter, force="rms_norm_subgroup"))
        q_src, k_src = inputs["q"], inputs["k"]
        if m.qk_norm:
            await step.add(rms_norm(x=q_src, weight=inputs["q_norm_w"], out=out["qn"], tokens=TOKENS,
                                    heads=m.q_heads, eps=m.eps, adapter=adapter, force="rms_norm"))
            await step.add(rms_norm(x=k_src, weight=inputs["k_norm_w"], out=out["kn"], tokens=TOKENS,
                                    heads=m.kv_heads, eps=m.eps, adapter=adapter, force="rms_norm"))
            if self.subgroups:
                await step.add(rms_norm(x=q_src, weight=inputs["q_norm_w"], out=out["qn_sg"], tokens=TOKENS,
                                        heads=m.q_heads, eps=m.eps, adapter=adapter, force="rms_norm_subgroup"))
            q_src, k_src = out["qn"], out["kn"]
        self.rope_index = len(step)
        await step.add(rope(src=q_src, dst=out["q_rot"], table=table, heads=m.q_heads, head_dim=hd, tokens=TOKENS,
                            pos=POS, layout=m.layout))
        await step.add(rope(src=k_src, dst=out["k_rot"], table=table, heads=m.kv_heads, head_dim=hd, tokens=TOKENS,
                            pos=POS, layout=m.layout))
        await step.add(swiglu(gate=inputs["gate"], up=inputs["up"], out=out["act"], tokens=TOKENS))
        await step.add(residual_add(a=res_a, b=inputs["res_b"], out=out["res_out"], tokens=TOKENS))
        await step.add(residual_add(a=res_a, b=inputs["res_b"], tokens=TOKENS))
        await step.add(embedding_f32(ids=ids, table=inputs["emb_table"], out=out["emb"], status=status, tokens=TOKENS))
        step.record()
        self.out, self.res_a, self.status, self.ids = out, res_a, status, ids
        return setup, step

    def kernels(self) -> dict:
        m = self.shape
        chosen = {"rms_norm": rms_norm_kernel(m.hidden, subgroup=False)[0]}
        if self.subgroups:
            chosen["rms_norm_subgroup"] = rms_norm_kernel(m.hidden, subgroup=True)[0]
        if m.qk_norm:
            chosen["qk_norm"] = rms_norm_kernel(m.head_dim, subgroup=False)[0]
        return chosen


async def _run_model(runtime: Runtime, shape: ModelShape, options: DecoderBlocksOptions, subgroups: bool,
                     sink, timings: list) -> dict:
    device = runtime.device
    capacity = max(options.lengths)
    model = _Model(runtime, shape, capacity, options.seed, subgroups)
    setup, step_plan = await model.build()
    await setup.replay()
    profile = options.profile and "timestamp-query" in device.adapter.device_features
    steps = []
    for index, (tokens, pos) in enumerate(steps_for(options.lengths)):
        step_plan.resize(tokens=tokens, pos=pos)
        ids = step_ids(shape, options.seed, index, tokens)
        device.write_buffer(model.ids.buffer, array("I", ids).tobytes())
        for name, tensor in model.out.items():
            device.write_buffer(tensor.buffer, POISON * ((tokens + 1) * model.outputs[name]))
        device.write_buffer(model.status.buffer, POISON * (tokens + 1))
        execution = await step_plan.replay(profile=profile and index == 0)
        if execution.rows:
            timings += [{"model": shape.key, "seq": tokens, **row.to_json()} for row in execution.rows]
        unwritten, guard_intact = {}, {}
        for name, tensor in model.out.items():
            row = model.outputs[name]
            data = await device.read_buffer(tensor.buffer, 4 * (tokens + 1) * row)
            unwritten[name] = _poison_count(data[:4 * tokens * row])
            guard_intact[name] = _poison_count(data[4 * tokens * row:]) == row
            if sink and options.artifacts:
                await sink(f"{shape.key}_{index}_{name}.f32", data)
        res_a = await device.read_buffer(model.res_a.buffer, 4 * (tokens + 1) * shape.hidden)
        status_words = array("I")
        status_words.frombytes(await device.read_buffer(model.status.buffer, 4 * (tokens + 1)))
        # The in-place add must leave the row after the live ones as generated.
        spare = array("f")
        spare.frombytes(res_a[4 * tokens * shape.hidden:])
        spare_intact = all(spare[c] == synth_value(RANGES["res_a"], options.seed, STREAMS[shape.key]["res_a"],
                                                   tokens * shape.hidden + c) for c in range(shape.hidden))
        if sink and options.artifacts:
            await sink(f"{shape.key}_{index}_res_a.f32", res_a)
        expected_status = [int(i >= shape.table_rows) for i in ids]
        rope_params = array("I")
        rope_params.frombytes(step_plan.params_of(model.rope_index)[:20])
        steps.append({
            "seq": tokens, "pos": pos, "ids": ids, "status": list(status_words[:tokens]),
            "status_guard_intact": status_words[tokens] == POISON_WORD, "expected_status": expected_status,
            "unwritten": unwritten, "guard_intact": guard_intact, "res_a_spare_row_intact": spare_intact,
            "routes": list(execution.routes), "route_mask": execution.route_mask,
            "rope_params": list(rope_params), "workgroups": list(step_plan.workgroups),
        })
    setup.release()
    step_plan.release()
    for tensor in model.tensors.values():
        runtime.tensors.release(tensor.name)
    passed = all(not any(s["unwritten"].values()) and all(s["guard_intact"].values()) and s["status_guard_intact"]
                 and s["status"] == s["expected_status"] and s["res_a_spare_row_intact"] for s in steps)
    return {**shape.to_json(), "capacity": capacity, "subgroups": subgroups, "kernels": model.kernels(),
            "outputs": sorted(model.out), "rope_positions": ROPE_POSITIONS,
            "steps": steps, "passed": passed}


async def _run_argmax(runtime: Runtime, options: DecoderBlocksOptions, timings: list) -> dict:
    device = runtime.device
    largest = max(ARGMAX_SIZES)
    tensors = runtime.tensors
    values = await tensors.allocate("argmax.values", (largest,))
    block_keys = await tensors.allocate("argmax.block_keys", (argmax_blocks_needed(largest),), "u32")
    block_index = await tensors.allocate("argmax.block_index", (argmax_blocks_needed(largest),), "u32")
    result = await tensors.allocate("argmax.result", (1,), "u32")
    history = await tensors.allocate("argmax.history", (ARGMAX_HISTORY,), "u32")
    offset = await tensors.allocate("argmax.offset", (1,), "u32")
    fill = Plan(runtime, "argmax.fill", live={"n": largest})
    await fill.add(fill_uniform(target=values, value_range=ARGMAX_RANGE, seed=options.seed, stream=ARGMAX_STREAM,
                                length="n"))
    fill.record()
    plan = Plan(runtime, "argmax", live={"n": largest, "pos": ARGMAX_POS})
    stored = TokenHistory(history, offset, tokens=1, pos="pos", advance=True)
    for call in argmax(values=values, block_keys=block_keys, block_index=block_index, result=result, length="n",
                       history=stored):
        await plan.add(call)
    plan.record()
    profile = options.profile and "timestamp-query" in device.adapter.device_features
    cases = []
    for number, case in enumerate(argmax_cases()):
        n = case["n"]
        offset_before = number % 4
        fill.resize(n=n)
        plan.resize(n=n)
        await fill.replay()
        if case["full"] is not None:
            device.write_buffer(values.buffer, array("I", case["full"]).tobytes())
        for index, bits in case["plants"]:
            device.write_buffer(values.buffer, struct.pack("<I", bits), 4 * index)
        device.write_buffer(result.buffer, POISON)
        device.write_buffer(history.buffer, POISON * ARGMAX_HISTORY)
        device.write_buffer(offset.buffer, struct.pack("<I", offset_before))
        execution = await plan.replay(profile=profile and n == largest and case["kind"] == "random")
        if execution.rows:
            timings += [{"model": "argmax", "seq": n, **row.to_json()} for row in execution.rows]
        (index,) = struct.unpack("<I", await device.read_buffer(result.buffer, 4))
        words = array("I")
        words.frombytes(await device.read_buffer(values.buffer, 4 * n))
        expected = argmax_reference(words)
        stored_words = array("I")
        stored_words.frombytes(await device.read_buffer(history.buffer, 4 * ARGMAX_HISTORY))
        (offset_after,) = struct.unpack("<I", await device.read_buffer(offset.buffer, 4))
        cases.append({**case, "index": index, "expected_in_page": expected, "routes": list(execution.routes),
                      "blocks": argmax_blocks_needed(n), "workgroups": list(plan.workgroups),
                      "offset_before": offset_before, "offset_after": offset_after, "history": list(stored_words)})
    fill.release()
    plan.release()
    for tensor in (values, block_keys, block_index, result, history, offset):
        tensors.release(tensor.name)

    def stored_right(c) -> bool:
        at = 1 + ARGMAX_POS + c["offset_before"]
        return (c["offset_after"] == c["offset_before"] + 1 and c["history"][at] == c["index"]
                and all(word == POISON_WORD for i, word in enumerate(c["history"]) if i != at))
    return {"sizes": list(ARGMAX_SIZES), "cases": cases, "history_pos": ARGMAX_POS,
            "passed": all(c["index"] == c["expected_in_page"] and stored_right(c) for c in cases)}


async def run_decoder_blocks(runtime: Runtime, options: DecoderBlocksOptions | None = None, sink=None,
                             progress=no_progress) -> dict:
    options = options or DecoderBlocksOptions()
    started = time.perf_counter()
    subgroups = "subgroups" in runtime.device.adapter.device_features
    timings: list = []
    blocks = [*options.models, *(("argmax",) if options.argmax else ())]
    models = []
    for done, key in enumerate(options.models):
        progress("decoder blocks", done, len(blocks))
        models.append(await _run_model(runtime, MODELS[key], options, subgroups, sink, timings))
    progress("decoder blocks", len(models), len(blocks))
    argmax_report = await _run_argmax(runtime, options, timings) if options.argmax else None
    progress("decoder blocks", len(blocks), len(blocks))
    return {
        "suite": "decoder_blocks",
        "adapter": runtime.device.adapter.to_json(),
        "seed": options.seed,
        "options": {"lengths": list(options.lengths), "models": list(options.models), "argmax": options.argmax,
                    "steps": [list(s) for s in steps_for(options.lengths)], "rope_positions": ROPE_POSITIONS,
                    "poison_hex": POISON.hex()},
        "subgroups": subgroups,
        "checked_in_page": "unwritten outputs, guard rows, embedding status words, argmax (exact); numbers: host oracle",
        "models": models,
        "argmax": argmax_report,
        "timings": timings,
        "pipelines_created": runtime.pipelines.created,
        "wall_ms": round((time.perf_counter() - started) * 1000, 3),
        "result": verdict(all(m["passed"] for m in models) and (argmax_report is None or argmax_report["passed"])),
    }
