"""A checkpoint's geometry as our ModelConfig: from an HF config.json (LlamaForCausalLM,
Qwen3ForCausalLM) or from GGUF metadata (the `llama` architecture).

RoPE's pair layout is the one the checkpoint's q and k rows are stored in, so the weights load as they
are and the RoPE kernels rotate the matching pairs (ops/rope.py has both): HF checkpoints are in
rotate-half order ("half"); llama.cpp's converter permutes Llama's q and k rows per head back into
Meta's interleaved pairs, so GGUF llama tensors are "interleaved".

Anything the decoder does not model is refused with the field that says so (biases, another
activation, RoPE scaling other than Llama 3's, sliding windows), rather than run differently.
"""

from __future__ import annotations

from .config import Llama3Scaling, ModelConfig

__all__ = ["ARCHITECTURES", "config_from_hf", "config_from_gguf"]

ARCHITECTURES = ("LlamaForCausalLM", "Qwen3ForCausalLM")


class _Refused(ValueError):
    pass


def _rope_hf(spec: dict, where: str) -> tuple[float, Llama3Scaling | None]:
    """(theta, scaling) from transformers 4's rope_theta/rope_scaling or 5's rope_parameters."""
    parameters = spec.get("rope_parameters") or {}
    scaling = spec.get("rope_scaling") or parameters
    theta = float(parameters.get("rope_theta", spec.get("rope_theta", 10000.0)))
    kind = scaling.get("rope_type", scaling.get("type", "default")) if scaling else "default"
    if kind == "default":
        return theta, None
    if kind == "llama3":
        return theta, Llama3Scaling(factor=float(scaling["factor"]), low_freq_factor=float(scaling["low_freq_factor"]),
                                    high_freq_factor=float(scaling["high_freq_factor"]),
                                    original_context=int(scaling["original_max_position_embeddings"]))
    raise _Refused(f"{where}: RoPE scaling {kind!r} is not modelled (default and llama3 are)")


def config_from_hf(spec: dict, *, key: str = "checkpoint", name: str | None = None) -> ModelConfig:
    """ModelConfig from a parsed config.json."""
    architectures = spec.get("architectures") or [spec.get("model_type", "?")]
    where = f"config.json ({architectures[0]})"
    if architectures[0] not in ARCHITECTURES:
        raise ValueError(f"{where}: not one of {', '.join(ARCHITECTURES)}")
    refused = [field for field in ("attention_bias", "mlp_bias") if spec.get(field)]
    if spec.get("hidden_act", "silu") != "silu":
        refused.append(f"hidden_act {spec['hidden_act']!r}")
    if spec.get("use_sliding_window"):
        refused.append("use_sliding_window")
    if refused:
        raise ValueError(f"{where}: {', '.join(refused)} not modelled by the decoder")
    try:
        theta, scaling = _rope_hf(spec, where)
    except _Refused as error:
        raise ValueError(str(error)) from None
    heads = int(spec["num_attention_heads"])
    hidden = int(spec["hidden_size"])
    return ModelConfig(key=key, name=name or spec.get("_name_or_path") or architectures[0],
                       vocab=int(spec["vocab_size"]), hidden=hidden, intermediate=int(spec["intermediate_size"]),
                       layers=int(spec["num_hidden_layers"]), heads=heads,
                       kv_heads=int(spec.get("num_key_value_heads") or heads),
                       head_dim=int(spec.get("head_dim") or hidden // heads), rope_layout="half", rope_theta=theta,
                       rope_scaling=scaling, norm_eps=float(spec.get("rms_norm_eps", 1e-6)),
                       qk_norm=architectures[0] == "Qwen3ForCausalLM",
                       tied_embeddings=bool(spec.get("tie_word_embeddings", False)))


def config_from_gguf(metadata: dict, *, tied_embeddings: bool, key: str = "checkpoint") -> ModelConfig:
    """ModelConfig from GGUF metadata; `tied_embeddings`: the file has no output.weight (the head reads
    token_embd)."""
    arch = metadata.get("general.architecture")
    if arch != "llama":
        raise ValueError(f"GGUF architecture {arch!r}: only 'llama' is read")
    field = lambda name, default=None: metadata.get(f"llama.{name}", default)   # noqa: E731
    missing = [f"llama.{name}" for name in ("block_count", "embedding_length", "feed_forward_length",
                                              "attention.head_count") if field(name) is None]
    if missing:
        raise ValueError(f"GGUF metadata lacks {', '.join(missing)}")
    if field("rope.scaling.type") not in (None, "none"):
        raise ValueError(f"GGUF llama.rope.scaling.type {field('rope.scaling.type')!r} is not modelled")
    hidden, heads = int(field("embedding_length")), int(field("attention.head_count"))
    head_dim = int(field("rope.dimension_count") or hidden // heads)
    if head_dim * heads != hidden:
        raise ValueError(f"GGUF llama: rope.dimension_count {head_dim} x {heads} heads is not embedding_length "
                         f"{hidden} (partial rotary is not modelled)")
    vocab = field("vocab_size") or len(metadata.get("tokenizer.ggml.tokens") or ())
    if not vocab:
        raise ValueError("GGUF metadata has neither llama.vocab_size nor tokenizer.ggml.tokens")
    name = metadata.get("general.name") or metadata.get("general.basename") or "GGUF llama"
    return ModelConfig(key=key, name=str(name), vocab=int(vocab), hidden=hidden,
                       intermediate=int(field("feed_forward_length")), layers=int(field("block_count")), heads=heads,
                       kv_heads=int(field("attention.head_count_kv") or heads), head_dim=head_dim,
                       rope_layout="interleaved", rope_theta=float(field("rope.freq_base", 10000.0)), rope_scaling=None,
                       norm_eps=float(field("attention.layer_norm_rms_epsilon", 1e-5)), qk_norm=False,
                       tied_embeddings=tied_embeddings)
