"""The oracle for checkpoint-loaded models: a checkpoint's values read independently of the loader (numpy
for f32/f16/bf16, the `gguf` package for ggml blocks), requantized by the numpy twin of our quantizer, and
HF transformers in float64 on them (host/oracle/model.py's hf_model and its precision repairs).

Two references, two tolerances:
  requantized   transformers on the twin's dequantized q4gsw weights, i.e. exactly the weights the GPU
                holds: the f32 policy's tolerance (model.py tolerance_sigmas), as for synthetic models.
                A wrong tensor, row range, layout or format decode moves logits by O(sigma).
  as stored     transformers on the checkpoint's own values (what a user's transformers computes): our
                Q4 requantization adds a normwise relative error e_W = ||W - Q(W)||_F / ||W||_F to each
                matrix, measured here on the actual weights. Each matrix on the residual path (the
                embedding, per layer q, k, v, o, gate, up, down, and the head) passes about e_W of its
                input's norm on as an independent error (the same first-order model as model.py), so
                tolerance = SAFETY * sqrt(2 ln V) * sqrt(sum e_W^2 + the f32 policy's own terms).
"""

from __future__ import annotations

import math

import numpy as np

from ...checkpoints import StoredTensor
from ...models.checkpoint_weights import CheckpointWeights
from ...models.config import ModelConfig
from ...models.weights import GROUP_SIZE, MatrixSpec, weight_specs
from .model import SAFETY, _f16_cache, hf_model, tolerance_sigmas
from .q4 import q4_levels_np

__all__ = ["stored_values_np", "checkpoint_values_np", "requantized_np", "requantization_errors",
           "as_stored_tolerance_sigmas", "oracle_logits", "hf_logits"]

_GGML = {"q4_0": "Q4_0", "q4_1": "Q4_1", "q8_0": "Q8_0"}


async def stored_values_np(tensor: StoredTensor) -> np.ndarray:
    """The tensor's values as f32 [rows, row_length] (or [length] for a vector), decoded without py_runtime."""
    raw = np.frombuffer(await tensor.read_rows(), np.uint8)
    if tensor.format == "f32":
        values = raw.view("<f4")
    elif tensor.format == "f16":
        values = raw.view("<f2").astype(np.float32)
    elif tensor.format == "bf16":
        values = (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)
    else:
        from gguf import GGMLQuantizationType
        from gguf.quants import dequantize

        values = dequantize(raw.reshape(tensor.rows, tensor.row_bytes), GGMLQuantizationType[_GGML[tensor.format]])
    return np.asarray(values, np.float32).reshape(tensor.shape)


async def checkpoint_values_np(config: ModelConfig, checkpoint: CheckpointWeights) -> dict[str, np.ndarray]:
    """Every weight by our spec name (weights.py), f32, assembled from its pieces as stored."""
    layout = checkpoint.validate(config)
    out = {}
    for spec in weight_specs(config):
        parts = [await stored_values_np(checkpoint.tensors[piece.name]) for piece in layout[spec.name]]
        out[spec.name] = np.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]
    return out


def _requantize(w: np.ndarray) -> np.ndarray:
    levels, scales = q4_levels_np(np.ascontiguousarray(w, np.float32), GROUP_SIZE)
    n, k = w.shape
    return ((levels.astype(np.float64) - 8.0).reshape(n, k // GROUP_SIZE, GROUP_SIZE)
            * scales.astype(np.float64)[:, :, None]).reshape(n, k)


def requantized_np(config: ModelConfig, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The weights the GPU holds after loading `values`: matrices through the quantizer's twin, float64."""
    matrices = {spec.name for spec in weight_specs(config) if isinstance(spec, MatrixSpec)}
    return {name: _requantize(w) if name in matrices else w.astype(np.float64) for name, w in values.items()}


def requantization_errors(config: ModelConfig, values: dict[str, np.ndarray],
                          requantized: dict[str, np.ndarray]) -> dict[str, float]:
    """e_W per matrix: ||W - Q(W)||_F / ||W||_F (q, k, v and gate, up apart: each is one linear)."""
    errors = {}
    for spec in weight_specs(config):
        if not isinstance(spec, MatrixSpec):
            continue
        exact, held = values[spec.name].astype(np.float64), requantized[spec.name]
        role = spec.name.rsplit(".", 1)[-1]
        bounds = {"qkv": (config.q_dim, config.q_dim + config.kv_dim),
                  "gate_up": (config.intermediate,)}.get(role, ())
        for index, (lo, hi) in enumerate(zip((0, *bounds), (*bounds, spec.rows))):
            part = exact[lo:hi]
            errors[f"{spec.name}[{index}]"] = float(np.linalg.norm(part - held[lo:hi]) / np.linalg.norm(part))
    return errors


def as_stored_tolerance_sigmas(config: ModelConfig, errors: dict[str, float]) -> float:
    """The module docstring's bound against transformers on the stored values (the tied head counted twice:
    it quantizes the embedding's error into the logits a second time)."""
    base = tolerance_sigmas(config, "f32") / (SAFETY * math.sqrt(2 * math.log(config.vocab)))
    total = base ** 2 + sum(e ** 2 for e in errors.values())
    if config.tied_embeddings:
        total += errors["embed[0]"] ** 2
    return SAFETY * math.sqrt(2 * math.log(config.vocab)) * math.sqrt(total)


def oracle_logits(model, prompt: list[int], fed: list[int], *, f16_cache: bool = True) -> list[np.ndarray]:
    """float64 logits at the prompt's last position, then after each fed token (model.py's OracleRun
    with any transformers model)."""
    import torch

    from transformers import DynamicCache

    cache = _f16_cache() if f16_cache else DynamicCache()
    out = []
    with torch.no_grad():
        result = model(input_ids=torch.tensor([prompt]), cache=cache, use_cache=True, logits_to_keep=1)
        out.append(result.logits[0, -1].to(torch.float64).numpy().copy())
        for token in fed:
            result = model(input_ids=torch.tensor([[token]]), cache=cache, use_cache=True)
            out.append(result.logits[0, -1].to(torch.float64).numpy().copy())
    return out


def hf_logits(config: ModelConfig, weights: dict[str, np.ndarray], prompt: list[int], fed: list[int]) -> list[np.ndarray]:
    """transformers (float64, model.py's hf_model) on these weights by spec name."""
    return oracle_logits(hf_model(config, weights, len(prompt) + len(fed) + 1), prompt, fed)
