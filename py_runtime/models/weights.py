"""A decoder's weights: synthetic (seeded), generated and Q4-quantized on the GPU, the whole model resident;
or a checkpoint's, uploaded and quantized on the GPU (checkpoint_weights.py), in the same layout.

Every weight is named by `weight_specs(config)`: its role, shape and the (range, stream) of the
counter-based generator (ops/synth.py) that fills it, so the host oracle (host/oracle/model.py)
rebuilds the same values bit for bit from the same list. A Q4 matrix w[n, k] is element n * K + k
of its stream (q4_quantize's synthetic mode: no f32 copy of a large weight ever exists).

Ranges keep a synthetic model's activations near unit scale at any width: a linear's weights are
uniform in [-a, a) with a the power of two nearest sqrt(3 / K) (outputs of about the inputs' RMS);
norm weights in [0, 2) (mean 1); the embedding table, which the tied lm_head also reads, in
[-1/8, 1/8) (logits of a few units, so greedy choices are neither ties nor foregone). The QKV
projection has twice a linear's gain, so attention scores spread over several units: with unit-scale
q and k a random model's attention averages its whole prefix, every position's state drifts towards
one shared direction, and greedy decoding repeats one token (Llama's geometry does at 2 layers).

Packed layouts: a layer's q, k and v rows are one [Nq + 2 Nkv, K] weight (the fused QKV routes read it
whole, the separate linears as row views), gate and up one [2 F, D] weight (gate rows, then up rows:
the fused gate/up + SwiGLU GEMV's layout).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..ops.q4 import Q4Weight, q4_quantize, q4_scales_rows
from ..ops.synth import UniformRange, fill_uniform
from ..plan import Plan
from .config import ModelConfig

__all__ = ["GROUP_SIZE", "MatrixSpec", "VectorSpec", "weight_specs", "linear_range", "EMBED_RANGE", "NORM_RANGE", "QKV_GAIN_LOG2",
           "ModelWeights", "allocate_matrix", "check_group_size"]

GROUP_SIZE = 64
EMBED_RANGE = UniformRange(scale_log2=-26, offset=-0.125)       # [-1/8, 1/8)
NORM_RANGE = UniformRange(scale_log2=-23, offset=0.0)           # [0, 2)
QKV_GAIN_LOG2 = 1       # q, k and v at twice the inputs' scale: see the module docstring


def linear_range(k: int, gain_log2: int = 0) -> UniformRange:
    """[-a, a) with a = 2^(gain_log2 - round(log2(sqrt(K / 3)))): outputs of about 2^gain_log2 times
    the inputs' RMS."""
    exponent = gain_log2 - round(math.log2(math.sqrt(k / 3)))
    return UniformRange(scale_log2=exponent + 1 - 24, offset=-(2.0 ** exponent))


@dataclass(frozen=True)
class MatrixSpec:
    """A synthetic Q4 matrix [rows, cols]: N outputs of K inputs."""

    name: str
    rows: int
    cols: int
    value_range: UniformRange
    stream: int


@dataclass(frozen=True)
class VectorSpec:
    """A synthetic f32 norm weight."""

    name: str
    length: int
    value_range: UniformRange
    stream: int


def weight_specs(config: ModelConfig) -> list[MatrixSpec | VectorSpec]:
    """Every weight of the model, named `embed`, `final_norm`, `lm_head` (untied models only) and
    `layers.{i}.{attn_norm, qkv, q_norm, k_norm, o, mlp_norm, gate_up, down}` (q_norm, k_norm: Qwen3)."""
    d, f, hd = config.hidden, config.intermediate, config.head_dim
    specs: list[MatrixSpec | VectorSpec] = [MatrixSpec("embed", config.vocab, d, EMBED_RANGE, 1),
                                            VectorSpec("final_norm", d, NORM_RANGE, 2)]
    if not config.tied_embeddings:
        specs.append(MatrixSpec("lm_head", config.vocab, d, linear_range(d), 3))
    for i in range(config.layers):
        stream = 100 + 16 * i
        p = f"layers.{i}."
        specs += [VectorSpec(p + "attn_norm", d, NORM_RANGE, stream),
                  MatrixSpec(p + "qkv", config.q_dim + 2 * config.kv_dim, d, linear_range(d, QKV_GAIN_LOG2),
                             stream + 1)]
        if config.qk_norm:
            specs += [VectorSpec(p + "q_norm", hd, NORM_RANGE, stream + 2),
                      VectorSpec(p + "k_norm", hd, NORM_RANGE, stream + 3)]
        specs += [MatrixSpec(p + "o", d, config.q_dim, linear_range(config.q_dim), stream + 4),
                  VectorSpec(p + "mlp_norm", d, NORM_RANGE, stream + 5),
                  MatrixSpec(p + "gate_up", 2 * f, d, linear_range(d), stream + 6),
                  MatrixSpec(p + "down", d, f, linear_range(f), stream + 7)]
    return specs


def check_group_size(config: ModelConfig) -> None:
    uneven = [f"{spec.name} (K {spec.cols})" for spec in weight_specs(config)
              if isinstance(spec, MatrixSpec) and spec.cols % GROUP_SIZE]
    if uneven:
        raise ValueError(f"{config.name}: Q4 weights need K a multiple of the group size {GROUP_SIZE}: "
                         f"{', '.join(uneven)}")


async def allocate_matrix(runtime, name: str, spec: MatrixSpec, *, scales_rows: bool) -> Q4Weight:
    """The device tensors of a Q4 matrix of `spec`'s shape (and its row-major scale copy where asked)."""
    n, k, tensors = spec.rows, spec.cols, runtime.tensors
    groups = k // GROUP_SIZE
    return Q4Weight(await tensors.allocate(f"{name}.packed", (n, k // 8), "u32"),
                    await tensors.allocate(f"{name}.scales", (groups, n)), k, n, GROUP_SIZE,
                    scales_rows=await tensors.allocate(f"{name}.scales_rows", (n, groups)) if scales_rows else None)


class ModelWeights:
    """The model's weights on the device, by spec name: Q4Weight for matrices, Tensor for norm weights."""

    def __init__(self, runtime, config: ModelConfig, seed: int, tensors: dict, plan: Plan):
        self.runtime, self.config, self.seed = runtime, config, seed
        self._weights = tensors
        self._plan = plan

    def __getitem__(self, name: str):
        return self._weights[name]

    @property
    def lm_head(self) -> Q4Weight:
        return self._weights["embed" if self.config.tied_embeddings else "lm_head"]

    @classmethod
    async def allocate(cls, runtime, config: ModelConfig, *, seed: int, scales_rows: bool = False) -> "ModelWeights":
        """Allocate every weight and record the plan that generates them (nothing runs until generate()).
        `scales_rows` also makes each matrix's row-major scale copy, which the int8x decode GEMVs read."""
        specs = weight_specs(config)
        check_group_size(config)
        tensors, weights = runtime.tensors, {}
        plan = Plan(runtime, f"{config.key}.weights")
        prefix = f"{config.key}.w"
        for spec in specs:
            name = f"{prefix}.{spec.name}"
            if isinstance(spec, VectorSpec):
                vector = await tensors.allocate(name, (spec.length,))
                await plan.add(fill_uniform(target=vector, value_range=spec.value_range, seed=seed, stream=spec.stream))
                weights[spec.name] = vector
                continue
            weight = await allocate_matrix(runtime, name, spec, scales_rows=scales_rows)
            await plan.add(q4_quantize(weight=weight, synth=(spec.value_range, seed, spec.stream)))
            if scales_rows:
                await plan.add(q4_scales_rows(weight))
            weights[spec.name] = weight
        plan.record()
        return cls(runtime, config, seed, weights, plan)

    @property
    def pending(self) -> bool:
        """Synthetic weights not generated yet (generate() runs their plan); loaded weights never are."""
        return self._plan is not None

    async def generate(self) -> None:
        """Generate and quantize every weight on the GPU (once)."""
        if self._plan is None:
            raise RuntimeError(f"{self.config.name}: the weights are already generated")
        await self._plan.replay()
        self._plan.release()
        self._plan = None

    def tensors(self) -> list:
        """Every device tensor the weights own (to release them)."""
        out = []
        for item in self._weights.values():
            out += [item] if not isinstance(item, Q4Weight) else \
                [t for t in (item.packed, item.scales, item.scales_rows) if t is not None]
        return out

    def release(self) -> None:
        if self._plan is not None:
            self._plan.release()
        for tensor in self.tensors():
            self.runtime.tensors.release(tensor.name)
