"""The whole-model oracle: HF transformers (LlamaForCausalLM, Qwen3ForCausalLM) on CPU torch in float64,
built from the same ModelConfig and loaded with the dequantized Q4 weights the numpy twins reproduce.

What the oracle is, exactly:
  - transformers' own modules: embedding, decoder layers (GQA attention with its causal mask, Qwen3's
    per-head q/k norm, SwiGLU MLP, residuals), final norm, tied lm_head; eager attention
  - weights: the twins of the GPU's generator and quantizer (bit for bit), dequantized in float64;
    where the model's RoPE pairs are Meta's interleaved ones, q and k rows (and Qwen3's q/k norm
    weights) are permuted per head into HF's rotate-half order (the rotation then matches exactly)
  - three precision repairs so nothing in it is coarser than float64: HF computes RoPE angles in
    float32 even in a float64 model (position * f rounded: a relative error of position * 2^-24,
    larger than the f32 kernels' own), and its RMSNorm casts to float32; both are replaced by float64
    versions of the same formulas (the angles from an independent numpy evaluation of the config's
    frequencies). The KV cache rounds keys (after RoPE) and values to f16 as ours stores them, so
    the cache's format is modelled, not budgeted as error.
The prompt's logits are computed at its last position only; every decode step is fed the token the
GPU chose (teacher forcing), so each step's logits compare like for like.

Tolerance, per activation policy, on max_n |logit_gpu - logit_oracle| in units of sigma, the RMS of the
oracle's logits at that step. To first order, each rounding-bearing op on the residual path adds an
independent normwise relative error e to the hidden state; independent errors add in quadrature
through the residual stream, and the lm_head turns a normwise relative error e into logit errors of
about e sigma each, whose maximum over V logits is about sqrt(2 ln V) e sigma. So
    tolerance = SAFETY * sqrt(2 ln V) * sqrt(sum of e^2)
  f32    per layer 12 f32 ops (2 norms, 4 linears, q/k norms, RoPE, attention, SwiGLU, 2 adds), then the
         final norm and lm_head: e = sqrt(K_max) u each (a length-K sum's rounding error grows as
         sqrt(K) u for independent roundings, u = 2^-24); and the f16 KV cache: the oracle rounds its
         own keys and values to f16, but a GPU value a few f32 ULPs away from the oracle's can round
         to the neighbouring f16 value, so K and V are budgeted as if rounded independently:
         e = 2^-11 / sqrt(3) (f16's unit roundoff, uniform) for each of the 2 L cached tensors
  int8x  on top, each linear's input is rounded to int8 per group (decode and prefill alike): an error
         uniform in +-scale/2, scale = max|x_group| / 127, about 0.4% of the input's RMS for uniform
         values (the measured figure in ops/q4_linear.py), taken as 4x that for heavier-tailed
         activations: e = 0.016 for each of the step's 4 L + 1 quantized inputs, and as much again for
         the 4 L that made the keys and values it attends to (the prompt's among them)
  f16    f32 at decode steps; the prefill's linears round their input and each dequantized weight to f16
         (q4_gemm_sgmat_f16): e = 2 x 2^-11 / sqrt(3) (two uniform f16 roundings) for each of the prompt's
         4 L linears, which made the keys and values every later step attends to
  f16 and int8x alike: the prefill's attention may round q and the softmax's probabilities to f16
         (sdpa_prefill_sgmat_f16): e = 2^-11 / sqrt(3) for each of the 2 L roundings
  SAFETY = 4: the first-order model's constants are estimates; a real bug (a wrong position, layout,
         weight or cache row) moves logits by O(sigma), far above either tolerance
Greedy tokens must be identical except where the oracle's own top choice and the GPU's choice are
within 2 tolerances of each other (each may be off by one): those are counted and reported.
"""

from __future__ import annotations

import functools
import math
import types
from dataclasses import dataclass

import numpy as np

from ...models.config import LLAMA3_SCALING, ModelConfig, model_config
from ...models.weights import GROUP_SIZE, MatrixSpec, weight_specs
from .decoder_blocks import rope_cos_sin_reference
from .synth import synth_key_np, synth_values_np

__all__ = ["q4_dequantized_np", "q4_matrix_np", "HfTensor", "hf_layout", "hf_config", "model_weights_np", "hf_model",
           "OracleRun", "run_oracle", "tolerance_sigmas", "verify_generation", "verify_model_report", "judge_logits",
           "verify_peer_report", "PEER_POLICY"]

U = 2.0 ** -24
SAFETY = 4.0
INT8_INPUT_ERROR = 0.016
F16_STORAGE_ERROR = 2.0 ** -11 / math.sqrt(3)
_TWO_FIFTEENTHS = np.float32(2 / 15)
_MIN_SCALE = np.float32(1e-10)
_PCG = (np.uint32(747796405), np.uint32(2891336453), np.uint32(277803737))


def _pcg_in_place(v: np.ndarray, scratch: np.ndarray) -> None:
    """synth.py's pcg over an array, in place (scratch: a buffer of v's size)."""
    multiplier, increment, mix = _PCG
    v *= multiplier
    v += increment
    np.right_shift(v, np.uint32(28), out=scratch)
    scratch += np.uint32(4)
    np.right_shift(v, scratch, out=scratch)
    scratch ^= v
    scratch *= mix
    np.right_shift(scratch, np.uint32(22), out=v)
    v ^= scratch


def _levels(w: np.ndarray, s: np.ndarray) -> np.ndarray:
    """q4_levels_np's levels (q + 8 = #{t < 15 : w > f32((t - 7.5) s)}) for groups w [G, gs] with scales
    s [G, 1], from an f32 estimate and two exact threshold comparisons instead of 15: the thresholds
    increase with t, and the estimate floor(w / s + 8.5) is off by at most one. Returns f32 levels."""
    level = w / s
    level += np.float32(8.5)
    np.floor(level, out=level)
    np.clip(level, 0, 15, out=level)
    level -= (level > 0) & ~(w > (level - np.float32(8.5)) * s)
    level += (level < 15) & (w > (level - np.float32(7.5)) * s)
    return level


def _q4_chunks(spec: MatrixSpec, seed: int, chunk: int):
    """The GPU's quantized synthetic matrix in chunks of whole groups: (start element, f32 levels 0..15
    [G, gs], f32 scales [G, 1]); the generator's and the quantizer's twins, bit for bit with synth_rows_np
    and q4_levels_np (which the tests check), with in-place arithmetic (a few ns per element)."""
    total = spec.rows * spec.cols
    step, offset = np.float32(2.0 ** spec.value_range.scale_log2), np.float32(spec.value_range.offset)
    seed_key = synth_key_np(seed, spec.stream)
    v, scratch = np.empty(chunk, np.uint32), np.empty(chunk, np.uint32)
    for start in range(0, total, chunk):
        n = min(chunk, total - start)
        h, tmp = v[:n], scratch[:n]
        h[:] = np.arange(start, start + n, dtype=np.uint64).astype(np.uint32)
        h += seed_key
        _pcg_in_place(h, tmp)
        h ^= seed_key
        _pcg_in_place(h, tmp)
        w = ((h >> np.uint32(8)).astype(np.float32) * step + offset).reshape(-1, GROUP_SIZE)
        s = np.maximum(np.max(np.abs(w), axis=1, keepdims=True) * _TWO_FIFTEENTHS, _MIN_SCALE)
        yield start, _levels(w, s), s


def q4_dequantized_np(spec: MatrixSpec, seed: int, *, chunk: int = 1 << 18) -> np.ndarray:
    """The GPU's quantized synthetic matrix [rows, cols], dequantized in float64: (level - 8) * scale."""
    out = np.empty(spec.rows * spec.cols, np.float64)
    for start, levels, s in _q4_chunks(spec, seed, chunk):
        out[start:start + levels.size] = ((levels - np.float32(8)).astype(np.float64) * s).reshape(-1)
    return out.reshape(spec.rows, spec.cols)


def q4_matrix_np(spec: MatrixSpec, seed: int, *, chunk: int = 1 << 20) -> tuple[np.ndarray, np.ndarray]:
    """The GPU's quantized synthetic matrix as stored: levels 0..15 (uint8 [rows, cols], the value is
    (level - 8) * scale) and the f32 scales [rows, cols / GROUP_SIZE] of its groups along a row."""
    levels = np.empty(spec.rows * spec.cols, np.uint8)
    scales = np.empty(spec.rows * spec.cols // GROUP_SIZE, np.float32)
    for start, chunk_levels, s in _q4_chunks(spec, seed, chunk):
        levels[start:start + chunk_levels.size] = chunk_levels.reshape(-1)
        scales[start // GROUP_SIZE:start // GROUP_SIZE + s.size] = s.reshape(-1)
    return levels.reshape(spec.rows, spec.cols), scales.reshape(spec.rows, spec.cols // GROUP_SIZE)


def model_weights_np(config: ModelConfig, seed: int) -> dict[str, np.ndarray]:
    """Every weight by spec name: matrices dequantized float64 [N, K], norm weights float64."""
    weights = {}
    for spec in weight_specs(config):
        if isinstance(spec, MatrixSpec):
            weights[spec.name] = q4_dequantized_np(spec, seed)
        else:
            weights[spec.name] = synth_values_np(spec.value_range, seed, spec.stream, spec.length).astype(np.float64)
    return weights


def _rotate_half_order(head_dim: int) -> np.ndarray:
    """Row order within a head that turns Meta's interleaved pairs (2i, 2i + 1) into (i, i + D/2)."""
    return np.concatenate([np.arange(0, head_dim, 2), np.arange(1, head_dim, 2)])


@dataclass(frozen=True)
class HfTensor:
    """Where an HF checkpoint tensor comes from: rows [lo, hi) of our weight `spec` (all rows: hi None),
    with rows (or a norm weight's elements) reordered per head of `head_dim` by `order` where RoPE's
    pairs are interleaved (`order` None: as stored)."""

    name: str
    spec: str
    lo: int = 0
    hi: int | None = None
    order: tuple[int, ...] | None = None

    def take(self, array: np.ndarray) -> np.ndarray:
        """This tensor from our weight (a matrix [N, K] or a vector), or any row-aligned array of it (levels,
        scales)."""
        part = array[self.lo:self.hi]
        if self.order is None:
            return part
        hd = len(self.order)
        return part.reshape(-1, hd, *part.shape[1:])[:, list(self.order)].reshape(part.shape)


def hf_layout(config: ModelConfig) -> list[HfTensor]:
    """Every tensor of the HF checkpoint (LlamaForCausalLM, Qwen3ForCausalLM) and where it comes from."""
    interleaved = config.rope_layout == "interleaved"
    order = tuple(int(i) for i in _rotate_half_order(config.head_dim)) if interleaved else None
    layout = [HfTensor("model.embed_tokens.weight", "embed"), HfTensor("model.norm.weight", "final_norm")]
    if not config.tied_embeddings:
        layout.append(HfTensor("lm_head.weight", "lm_head"))
    q_rows, kv_rows, f = config.q_dim, config.kv_dim, config.intermediate
    for i in range(config.layers):
        p, w = f"model.layers.{i}.", f"layers.{i}."
        layout += [HfTensor(p + "self_attn.q_proj.weight", w + "qkv", 0, q_rows, order),
                   HfTensor(p + "self_attn.k_proj.weight", w + "qkv", q_rows, q_rows + kv_rows, order),
                   HfTensor(p + "self_attn.v_proj.weight", w + "qkv", q_rows + kv_rows, None),
                   HfTensor(p + "self_attn.o_proj.weight", w + "o")]
        if config.qk_norm:
            layout += [HfTensor(p + "self_attn.q_norm.weight", w + "q_norm", order=order),
                       HfTensor(p + "self_attn.k_norm.weight", w + "k_norm", order=order)]
        layout += [HfTensor(p + "input_layernorm.weight", w + "attn_norm"),
                   HfTensor(p + "post_attention_layernorm.weight", w + "mlp_norm"),
                   HfTensor(p + "mlp.gate_proj.weight", w + "gate_up", 0, f),
                   HfTensor(p + "mlp.up_proj.weight", w + "gate_up", f, None),
                   HfTensor(p + "mlp.down_proj.weight", w + "down")]
    return layout


def _hf_state(config: ModelConfig, weights: dict[str, np.ndarray]) -> dict:
    import torch

    return {t.name: torch.from_numpy(np.ascontiguousarray(t.take(weights[t.spec]))) for t in hf_layout(config)}


def _rms_norm_f64(self, x):
    """HF's RMSNorm formula without its cast to float32."""
    import torch

    return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


def _rotary_f64(config: ModelConfig):
    """HF's rotary forward (cos, sin of [batch, seq, head_dim], the frequencies twice), in float64."""
    import torch

    if config.rope_scaling not in (None, LLAMA3_SCALING):
        raise ValueError(f"{config.name}: the oracle's RoPE knows Llama 3's default scaling only")

    def forward(self, x, position_ids):
        positions = position_ids[0].cpu().numpy()
        cos, sin = rope_cos_sin_reference(config.head_dim, config.rope_theta, config.rope_scaling is not None,
                                          positions)
        cos, sin = (torch.from_numpy(np.concatenate([a, a], axis=-1))[None].to(x.dtype) for a in (cos, sin))
        return cos, sin
    return forward


def hf_config(config: ModelConfig, capacity: int, dtype: str = "float64"):
    """The transformers config (LlamaConfig or Qwen3Config) of `config`, positions up to `capacity`."""
    import torch
    from transformers import LlamaConfig, Qwen3Config

    rope = {"rope_type": "default", "rope_theta": config.rope_theta}
    if config.rope_scaling is not None:
        s = config.rope_scaling
        rope = {"rope_type": "llama3", "rope_theta": config.rope_theta, "factor": s.factor,
                "low_freq_factor": s.low_freq_factor, "high_freq_factor": s.high_freq_factor,
                "original_max_position_embeddings": s.original_context}
    common = dict(vocab_size=config.vocab, hidden_size=config.hidden, intermediate_size=config.intermediate,
                  num_hidden_layers=config.layers, num_attention_heads=config.heads,
                  num_key_value_heads=config.kv_heads, head_dim=config.head_dim, rms_norm_eps=config.norm_eps,
                  max_position_embeddings=capacity, tie_word_embeddings=config.tied_embeddings,
                  rope_parameters=rope, attention_bias=False, hidden_act="silu", dtype=getattr(torch, dtype))
    return (Qwen3Config if config.qk_norm else LlamaConfig)(**common)


def hf_model(config: ModelConfig, weights: dict[str, np.ndarray], capacity: int):
    """The transformers model of `config` in float64 with these weights (built on the meta device, no
    random init, the weights assigned, the head tied)."""
    import torch
    from transformers import LlamaForCausalLM, Qwen3ForCausalLM

    hf = hf_config(config, max(capacity, 2 * (config.rope_scaling or LLAMA3_SCALING).original_context))
    hf._attn_implementation = "eager"
    with torch.device("meta"):
        model = (Qwen3ForCausalLM if config.qk_norm else LlamaForCausalLM)(hf)
    missing, unexpected = model.load_state_dict(_hf_state(config, weights), strict=False, assign=True)
    allowed_missing = {"lm_head.weight"} if config.tied_embeddings else set()
    if set(missing) != allowed_missing or unexpected:
        raise AssertionError(f"HF state mismatch: missing {missing}, unexpected {unexpected}")
    if config.tied_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    for module in model.modules():
        if type(module).__name__.endswith("RMSNorm"):
            module.forward = types.MethodType(_rms_norm_f64, module)
    model.model.rotary_emb.forward = types.MethodType(_rotary_f64(config), model.model.rotary_emb)
    return model.eval()


def _f16_cache():
    """A DynamicCache that stores keys and values rounded to f16, as the GPU's KV cache does."""
    import torch
    from transformers import DynamicCache

    class F16Cache(DynamicCache):
        def update(self, key_states, value_states, layer_idx, *args, **kwargs):
            rounded = [s.to(torch.float32).to(torch.float16).to(s.dtype) for s in (key_states, value_states)]
            return super().update(*rounded, layer_idx, *args, **kwargs)

    return F16Cache()


class OracleRun:
    """The oracle's logits for the prompt's last position and after each given token (float64 [V])."""

    def __init__(self, config: ModelConfig, seed: int, capacity: int):
        self.model = hf_model(config, model_weights_np(config, seed), capacity)

    def logits(self, prompt: list[int], fed: list[int]) -> list[np.ndarray]:
        import torch

        cache = _f16_cache()
        out = []
        with torch.no_grad():
            result = self.model(input_ids=torch.tensor([prompt]), cache=cache, use_cache=True,
                                logits_to_keep=1)
            out.append(result.logits[0, -1].numpy().copy())
            for token in fed:
                result = self.model(input_ids=torch.tensor([[token]]), cache=cache, use_cache=True)
                out.append(result.logits[0, -1].numpy().copy())
        return out


@functools.lru_cache(maxsize=8)
def run_oracle(config: ModelConfig, seed: int, prompt: tuple[int, ...], fed: tuple[int, ...]) -> list[np.ndarray]:
    """The oracle's logits for a run (cached: the native and the browser runs of one session share it)."""
    return OracleRun(config, seed, len(prompt) + len(fed) + 1).logits(list(prompt), list(fed))


def tolerance_sigmas(config: ModelConfig, policy: str) -> float:
    """The tolerance of the module docstring, in units of the oracle logits' RMS."""
    k_max = max(config.hidden, config.intermediate, config.q_dim)
    variance = (12 * config.layers + 2) * (math.sqrt(k_max) * U) ** 2 + 2 * config.layers * F16_STORAGE_ERROR ** 2
    if policy == "int8x":
        variance += (8 * config.layers + 1) * INT8_INPUT_ERROR ** 2
    elif policy == "f16":
        variance += 4 * config.layers * (2 * 2.0 ** -11 / math.sqrt(3)) ** 2
    elif policy != "f32":
        raise ValueError(f"no tolerance for policy {policy!r}")
    if policy != "f32":
        variance += 2 * config.layers * F16_STORAGE_ERROR ** 2
    return SAFETY * math.sqrt(2 * math.log(config.vocab)) * math.sqrt(variance)


def verify_model_report(report: dict, read, oracle_logits: list[np.ndarray] | None = None) -> dict:
    """Judge a model run against the transformers oracle. `read(name)` gives an artifact's bytes.
    Raises AssertionError on a logit over the tolerance or a token that differs where the oracle's margin
    is wider; returns the worst error (in sigmas and as a fraction of the tolerance) and the near ties."""
    options = report["options"]
    config = model_config(options["model"], options["layers"])
    assert report["config"] == config.to_json(), "the run's config is not the preset's"
    assert report["free_tokens"] == report["tokens"], \
        f"the free-running pass chose {report['free_tokens']}, the checked pass {report['tokens']}"
    tokens = report["tokens"]
    assert len(tokens) == options["decode"] + 1 == len(report["logits_artifacts"])
    logits = [np.frombuffer(read(name), np.float32).astype(np.float64) for name in report["logits_artifacts"]]
    return judge_logits(config, options["seed"], report["prompt_ids"], tokens, logits,
                        tolerance_sigmas(config, options["policy"]), options["policy"], oracle_logits)


def judge_logits(config: ModelConfig, seed: int, prompt: list[int], tokens: list[int], logits: list[np.ndarray],
                 tolerance: float, label: str, oracle_logits: list[np.ndarray] | None = None) -> dict:
    """Judge an engine's logits (the prompt's last position, then each decode step fed the engine's own
    previous token) and its greedy tokens against the oracle, with `tolerance` in sigmas (see verify_model_report)."""
    assert len(tokens) == len(logits), f"{len(tokens)} tokens for {len(logits)} logits rows"
    if oracle_logits is None:
        oracle_logits = run_oracle(config, seed, tuple(prompt), tuple(tokens[:-1]))
    worst, near_ties, rows = 0.0, [], []
    for index, (gpu, exact) in enumerate(zip(logits, oracle_logits)):
        gpu = np.asarray(gpu, np.float64)
        assert gpu.shape == exact.shape, f"step {index}: {gpu.size} logits, the oracle has {exact.size}"
        assert np.all(np.isfinite(gpu)), f"step {index}: non-finite logits"
        # The engine's greedy choice is exactly numpy's argmax of the logits it wrote.
        assert tokens[index] == int(np.argmax(gpu)), f"step {index}: token {tokens[index]}, argmax {np.argmax(gpu)}"
        sigma = float(np.sqrt(np.mean(exact ** 2)))
        error = float(np.max(np.abs(gpu - exact))) / sigma
        assert error <= tolerance, (f"step {index}: logits off by {error:.3g} sigma (sigma {sigma:.4g}), over the "
                                    f"{label} tolerance {tolerance:.3g}; worst at "
                                    f"{int(np.argmax(np.abs(gpu - exact)))}")
        best = int(np.argmax(exact))
        gap = float(exact[best] - exact[tokens[index]]) / sigma
        if tokens[index] != best:
            assert gap <= 2 * tolerance, (f"step {index}: the engine chose {tokens[index]}, the oracle {best}, "
                                          f"{gap:.3g} sigma apart (over 2 x {tolerance:.3g})")
            near_ties.append({"step": index, "gpu": tokens[index], "oracle": best, "gap_sigma": gap})
        worst = max(worst, error)
        rows.append({"step": index, "error_sigma": error, "sigma": sigma})
    return {"tolerance_sigma": tolerance, "worst_sigma": worst, "worst_of_tolerance": worst / tolerance,
            "near_ties": near_ties, "steps": rows}


def verify_generation(run: dict, logits: dict[int, np.ndarray]) -> dict:
    """Judge a generated sequence (the page's `generate` and `compare` views) against the transformers oracle.

    `run`: model, layers, seed, policy, prompt_ids and tokens (the greedy token after the prompt and after
    each decode step); `logits`: the GPU's f32 logits at some of those steps (step -> [V]). Every token must
    be the oracle's argmax, fed the GPU's own tokens, except within 2 tolerances of it (a near tie); every
    given step's logits must be within the policy's tolerance and their argmax the token chosen.
    Returns {"verdict": "passed" | "failed", "failures", "worst_sigma", "tolerance_sigma", "near_ties", ...}."""
    config = model_config(run["model"], run["layers"])
    tokens = [int(t) for t in run["tokens"]]
    if not tokens:
        raise ValueError("no generated tokens to judge")
    oracle = run_oracle(config, int(run["seed"]), tuple(int(t) for t in run["prompt_ids"]), tuple(tokens[:-1]))
    tolerance = tolerance_sigmas(config, run["policy"])
    failures, near_ties, worst, checked_logits = [], [], 0.0, []
    for step, token in enumerate(tokens):
        exact = oracle[step]
        sigma = float(np.sqrt(np.mean(exact ** 2)))
        best = int(np.argmax(exact))
        if token != best:
            gap = float(exact[best] - exact[token]) / sigma if 0 <= token < exact.size else math.inf
            if gap <= 2 * tolerance:
                near_ties.append({"step": step, "gpu": token, "oracle": best, "gap_sigma": gap})
            else:
                failures.append(f"step {step}: the GPU chose {token}, the oracle {best}, {gap:.3g} sigma apart "
                                f"(over 2 x {tolerance:.3g})")
    for step, gpu in sorted(logits.items()):
        if not 0 <= step < len(tokens):
            failures.append(f"logits of step {step}: no such step (0..{len(tokens) - 1})")
            continue
        exact = oracle[step]
        if gpu.shape != exact.shape:
            failures.append(f"step {step}: {gpu.size} logits, the oracle has {exact.size}")
            continue
        if not np.all(np.isfinite(gpu)):
            failures.append(f"step {step}: non-finite logits")
            continue
        if int(np.argmax(gpu)) != tokens[step]:
            failures.append(f"step {step}: token {tokens[step]}, but its logits' argmax is {int(np.argmax(gpu))}")
        sigma = float(np.sqrt(np.mean(exact ** 2)))
        error = float(np.max(np.abs(gpu.astype(np.float64) - exact))) / sigma
        worst = max(worst, error)
        checked_logits.append(step)
        if error > tolerance:
            failures.append(f"step {step}: logits off by {error:.3g} sigma, over the {run['policy']} tolerance "
                            f"{tolerance:.3g}")
    return {"verdict": "failed" if failures else "passed", "failures": failures[:8], "worst_sigma": worst,
            "tolerance_sigma": tolerance, "worst_of_tolerance": worst / tolerance, "near_ties": near_ties,
            "tokens_checked": len(tokens), "logits_checked": checked_logits}


PEER_POLICY = "int8x"       # the peer build's MatMulNBits carry accuracy_level 4: int8 activations allowed


def verify_peer_report(report: dict, read) -> dict:
    """Judge both engines of a peer comparison (checks/peer_bench.py) against one transformers oracle run
    per engine (each fed its own greedy tokens): ours with its policy's tolerance, the peer with the int8x
    one. Returns {engine: verdict}; a verdict has "passed" and either judge_logits' figures or "error"."""
    options = report["options"]
    config = model_config(options["model"], options["layers"])
    assert report["config"] == config.to_json(), "the run's config is not the preset's"
    verdicts = {}
    for engine, policy in (("ours", options["policy"]), ("peer", PEER_POLICY)):
        run = report["engines"][engine]
        try:
            steps = options.get("checked", options["decode"])
            assert len(run["tokens"]) == steps + 1 == len(run["logits_artifacts"]), \
                f"{len(run['tokens'])} tokens, {len(run['logits_artifacts'])} logits rows for {steps} checked steps"
            logits = [np.frombuffer(read(name), np.float32).astype(np.float64) for name in run["logits_artifacts"]]
            judged = judge_logits(config, options["seed"], report["prompt_ids"], run["tokens"], logits,
                                  tolerance_sigmas(config, policy), f"{engine} {policy}")
            verdicts[engine] = {"passed": True, "policy": policy, **{k: judged[k] for k in
                                ("tolerance_sigma", "worst_sigma", "worst_of_tolerance", "near_ties")}}
        except AssertionError as error:
            verdicts[engine] = {"passed": False, "policy": policy, "error": str(error)}
    return verdicts
