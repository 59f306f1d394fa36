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
  SAFETY = 4: the first-order model's constants are estimates; a real bug (a wrong position, layout,
         weight or cache row) moves logits by O(sigma), far above either tolerance
Greedy tokens must be identical except where the oracle's own top choice and the GPU's choice are
within 2 tolerances of each other (each may be off by one): those are counted and reported.
"""

from __future__ import annotations

import functools
import math
import types

import numpy as np

from ...models.config import LLAMA3_SCALING, ModelConfig, model_config
from ...models.weights import GROUP_SIZE, MatrixSpec, weight_specs
from .decoder_blocks import rope_cos_sin_reference
from .synth import synth_key_np, synth_values_np

__all__ = ["q4_dequantized_np", "model_weights_np", "hf_model", "OracleRun", "run_oracle", "tolerance_sigmas",
           "verify_generation", "verify_model_report"]

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


def q4_dequantized_np(spec: MatrixSpec, seed: int, *, chunk: int = 1 << 18) -> np.ndarray:
    """The GPU's quantized synthetic matrix [rows, cols], dequantized in float64: the generator's and
    the quantizer's twins (bit for bit with synth_rows_np and q4_levels_np, which the tests check),
    worked in cache-sized chunks (whole groups) with in-place arithmetic (a few ns per element)."""
    total = spec.rows * spec.cols
    step, offset = np.float32(2.0 ** spec.value_range.scale_log2), np.float32(spec.value_range.offset)
    seed_key = synth_key_np(seed, spec.stream)
    out = np.empty(total, np.float64)
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
        out[start:start + n] = ((_levels(w, s) - np.float32(8)).astype(np.float64) * s).reshape(-1)
    return out.reshape(spec.rows, spec.cols)


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


def _hf_state(config: ModelConfig, weights: dict[str, np.ndarray]) -> dict:
    import torch

    hd, interleaved = config.head_dim, config.rope_layout == "interleaved"
    order = _rotate_half_order(hd)

    def heads_permuted(matrix: np.ndarray, heads: int) -> np.ndarray:
        if not interleaved:
            return matrix
        return matrix.reshape(heads, hd, -1)[:, order, :].reshape(heads * hd, -1)

    def t(array: np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(array))

    state = {"model.embed_tokens.weight": t(weights["embed"]), "model.norm.weight": t(weights["final_norm"])}
    if not config.tied_embeddings:
        state["lm_head.weight"] = t(weights["lm_head"])
    q_rows, kv_rows = config.q_dim, config.kv_dim
    for i in range(config.layers):
        w, p = (lambda name: weights[f"layers.{i}.{name}"]), f"model.layers.{i}."     # noqa: E731
        qkv = w("qkv")
        state[p + "self_attn.q_proj.weight"] = t(heads_permuted(qkv[:q_rows], config.heads))
        state[p + "self_attn.k_proj.weight"] = t(heads_permuted(qkv[q_rows:q_rows + kv_rows], config.kv_heads))
        state[p + "self_attn.v_proj.weight"] = t(qkv[q_rows + kv_rows:])
        state[p + "self_attn.o_proj.weight"] = t(w("o"))
        if config.qk_norm:
            state[p + "self_attn.q_norm.weight"] = t(w("q_norm")[order] if interleaved else w("q_norm"))
            state[p + "self_attn.k_norm.weight"] = t(w("k_norm")[order] if interleaved else w("k_norm"))
        state[p + "input_layernorm.weight"] = t(w("attn_norm"))
        state[p + "post_attention_layernorm.weight"] = t(w("mlp_norm"))
        gate_up, f = w("gate_up"), config.intermediate
        state[p + "mlp.gate_proj.weight"] = t(gate_up[:f])
        state[p + "mlp.up_proj.weight"] = t(gate_up[f:])
        state[p + "mlp.down_proj.weight"] = t(w("down"))
    return state


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


def hf_model(config: ModelConfig, weights: dict[str, np.ndarray], capacity: int):
    """The transformers model of `config` in float64 with these weights (built on the meta device, no
    random init, the weights assigned, the head tied)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

    rope = {"rope_type": "default", "rope_theta": config.rope_theta}
    if config.rope_scaling is not None:
        s = config.rope_scaling
        rope = {"rope_type": "llama3", "rope_theta": config.rope_theta, "factor": s.factor,
                "low_freq_factor": s.low_freq_factor, "high_freq_factor": s.high_freq_factor,
                "original_max_position_embeddings": s.original_context}
    common = dict(vocab_size=config.vocab, hidden_size=config.hidden, intermediate_size=config.intermediate,
                  num_hidden_layers=config.layers, num_attention_heads=config.heads,
                  num_key_value_heads=config.kv_heads, head_dim=config.head_dim, rms_norm_eps=config.norm_eps,
                  max_position_embeddings=max(capacity, 2 * (config.rope_scaling or LLAMA3_SCALING).original_context),
                  tie_word_embeddings=config.tied_embeddings, rope_parameters=rope, attention_bias=False,
                  hidden_act="silu", dtype=torch.float64)
    family = (Qwen3Config, Qwen3ForCausalLM) if config.qk_norm else (LlamaConfig, LlamaForCausalLM)
    hf_config = family[0](**common)
    hf_config._attn_implementation = "eager"
    with torch.device("meta"):
        model = family[1](hf_config)
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
    elif policy != "f32":
        raise ValueError(f"no tolerance for policy {policy!r}")
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
    if oracle_logits is None:
        oracle_logits = run_oracle(config, options["seed"], tuple(report["prompt_ids"]), tuple(tokens[:-1]))
    tolerance = tolerance_sigmas(config, options["policy"])
    worst, near_ties, rows = 0.0, [], []
    for index, (name, exact) in enumerate(zip(report["logits_artifacts"], oracle_logits)):
        gpu = np.frombuffer(read(name), np.float32).astype(np.float64)
        assert gpu.shape == exact.shape, f"step {index}: {gpu.size} logits, the oracle has {exact.size}"
        assert np.all(np.isfinite(gpu)), f"step {index}: non-finite logits"
        # The GPU's argmax kernel chose exactly numpy's argmax of the logits it wrote.
        assert tokens[index] == int(np.argmax(gpu)), f"step {index}: token {tokens[index]}, argmax {np.argmax(gpu)}"
        sigma = float(np.sqrt(np.mean(exact ** 2)))
        error = float(np.max(np.abs(gpu - exact))) / sigma
        assert error <= tolerance, (f"step {index}: logits off by {error:.3g} sigma (sigma {sigma:.4g}), over the "
                                    f"{options['policy']} tolerance {tolerance:.3g}; worst at "
                                    f"{int(np.argmax(np.abs(gpu - exact)))}")
        best = int(np.argmax(exact))
        gap = float(exact[best] - exact[tokens[index]]) / sigma
        if tokens[index] != best:
            assert gap <= 2 * tolerance, (f"step {index}: the GPU chose {tokens[index]}, the oracle {best}, "
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
