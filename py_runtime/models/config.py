"""One description of a decoder model's geometry, read by every workload, route guard and test.

It is plain data at the bottom of the import graph (it imports nothing of the runtime), so ops' route
guards can read the shapes they were built for from it.

The presets are the real models' shapes (from their published configs) and two made-up ones: `tiny`
runs anywhere in seconds, `awkward` is a GQA geometry that misses every shape-specific fast route
(12 query heads over 4 KV heads of 80, sizes that are not powers of two) so the generic routes are
exercised at model scale. `config.with_depth(n)` keeps the geometry and changes the layer count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

__all__ = ["ModelConfig", "Llama3Scaling", "LLAMA3_SCALING", "LAYOUTS", "LLAMA_3_2_1B", "QWEN3_0_6B", "TINY",
           "AWKWARD", "MODELS", "model_config"]

LAYOUTS = ("interleaved", "half")       # RoPE pairs: Meta's (x[2i], x[2i+1]) or HF's rotate-half (x[i], x[i + D/2])


@dataclass(frozen=True)
class Llama3Scaling:
    """Llama 3's RoPE frequency scaling (ops/rope.py applies it to each inverse frequency)."""

    factor: float = 32.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_context: int = 8192

    def apply(self, f: float) -> float:
        wavelength = 2.0 * math.pi / f
        if wavelength < self.original_context / self.high_freq_factor:
            return f
        if wavelength > self.original_context / self.low_freq_factor:
            return f / self.factor
        s = (self.original_context / wavelength - self.low_freq_factor) / (self.high_freq_factor - self.low_freq_factor)
        return (1.0 - s) * f / self.factor + s * f


LLAMA3_SCALING = Llama3Scaling()


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    key: str                    # the short name a URL, a CLI flag or a bench case uses
    name: str
    vocab: int
    hidden: int
    intermediate: int           # the SwiGLU FFN's width
    layers: int
    heads: int                  # query heads
    kv_heads: int
    head_dim: int
    rope_layout: str            # "half" (HF rotate-half) or "interleaved" (Meta's pairs)
    rope_theta: float
    rope_scaling: Llama3Scaling | None
    norm_eps: float
    qk_norm: bool               # Qwen3: a per-head RMSNorm of q and k before RoPE
    tied_embeddings: bool       # lm_head reads the embedding table

    def __post_init__(self):
        problems = [f"{field} must be positive, not {getattr(self, field)}"
                    for field in ("vocab", "hidden", "intermediate", "layers", "heads", "kv_heads", "head_dim")
                    if getattr(self, field) < 1]
        if not problems and self.heads % self.kv_heads:
            problems.append(f"{self.heads} query heads do not divide into {self.kv_heads} KV heads")
        if self.head_dim % 2:
            problems.append(f"RoPE needs an even head_dim, not {self.head_dim}")
        if self.rope_layout not in LAYOUTS:
            problems.append(f"rope_layout {self.rope_layout!r} is not one of {LAYOUTS}")
        if not (self.norm_eps > 0 and self.rope_theta > 0):
            problems.append(f"norm_eps {self.norm_eps} and rope_theta {self.rope_theta} must be positive")
        if problems:
            raise ValueError(f"model config {self.key!r}: " + "; ".join(problems))

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def group(self) -> int:
        """Query heads per KV head (GQA)."""
        return self.heads // self.kv_heads

    def with_depth(self, layers: int) -> "ModelConfig":
        return replace(self, layers=layers)

    def linears(self) -> dict[str, tuple[int, int]]:
        """(K, N) of each projection of a layer and of the head, by its role: N outputs from K inputs.
        k and v share a shape, and so do gate and up."""
        return {"q": (self.hidden, self.q_dim), "kv": (self.hidden, self.kv_dim), "o": (self.q_dim, self.hidden),
                "gate_up": (self.hidden, self.intermediate), "down": (self.intermediate, self.hidden),
                "lm_head": (self.hidden, self.vocab)}

    def linear_shapes(self) -> list[tuple[str, int, int]]:
        """The distinct projection shapes as (name, K, N), roles of one shape joined by '_' ("q_o" where
        q and o are both square): one case per shape for the benchmarks and checks."""
        merged: dict[tuple[int, int], list[str]] = {}
        for role, shape in self.linears().items():
            merged.setdefault(shape, []).append(role)
        return [("_".join(roles), k, n) for (k, n), roles in merged.items()]

    def qkv_shape(self) -> tuple[int, int, int]:
        """(K, Nq, Nkv) of the fused QKV projection."""
        return self.hidden, self.q_dim, self.kv_dim

    def to_json(self) -> dict:
        return {"key": self.key, "name": self.name, "vocab": self.vocab, "hidden": self.hidden,
                "intermediate": self.intermediate, "layers": self.layers, "heads": self.heads,
                "kv_heads": self.kv_heads, "head_dim": self.head_dim, "rope_layout": self.rope_layout,
                "rope_theta": self.rope_theta, "llama3_scaling": self.rope_scaling is not None,
                "norm_eps": self.norm_eps, "qk_norm": self.qk_norm, "tied_embeddings": self.tied_embeddings}


# meta-llama/Llama-3.2-1B config.json; HF checkpoints permute q/k for rotate-half.
LLAMA_3_2_1B = ModelConfig(key="llama", name="Llama-3.2-1B", vocab=128256, hidden=2048, intermediate=8192, layers=16,
                           heads=32, kv_heads=8, head_dim=64, rope_layout="half", rope_theta=500000.0,
                           rope_scaling=LLAMA3_SCALING, norm_eps=1e-5, qk_norm=False, tied_embeddings=True)
# Qwen/Qwen3-0.6B config.json.
QWEN3_0_6B = ModelConfig(key="qwen3", name="Qwen3-0.6B", vocab=151936, hidden=1024, intermediate=3072, layers=28,
                         heads=16, kv_heads=8, head_dim=128, rope_layout="half", rope_theta=1000000.0,
                         rope_scaling=None, norm_eps=1e-6, qk_norm=True, tied_embeddings=True)
TINY = ModelConfig(key="tiny", name="tiny (made up)", vocab=512, hidden=256, intermediate=512, layers=2, heads=4,
                   kv_heads=2, head_dim=64, rope_layout="half", rope_theta=10000.0, rope_scaling=None, norm_eps=1e-5,
                   qk_norm=False, tied_embeddings=True)
AWKWARD = ModelConfig(key="awkward", name="awkward GQA (made up)", vocab=1000, hidden=960, intermediate=2624, layers=3,
                      heads=12, kv_heads=4, head_dim=80, rope_layout="interleaved", rope_theta=10000.0,
                      rope_scaling=LLAMA3_SCALING, norm_eps=1e-6, qk_norm=True, tied_embeddings=False)
MODELS = {config.key: config for config in (LLAMA_3_2_1B, QWEN3_0_6B, TINY, AWKWARD)}


def model_config(key: str, layers: int | None = None) -> ModelConfig:
    """A preset by key, optionally at another depth; an unknown key names the known ones."""
    if key not in MODELS:
        raise ValueError(f"unknown model {key!r}; known: {sorted(MODELS)}")
    return MODELS[key] if layers is None else MODELS[key].with_depth(layers)
