"""A checkpoint's tensors as a decoder's weights: which stored tensor fills which rows of which weight,
checked before anything is allocated, then uploaded a run of rows at a time.

Our weights are weights.py's specs (`weight_specs`): the packed QKV weight takes q, k and v as its rows
[0, Nq), [Nq, Nq + Nkv), [Nq + Nkv, Nq + 2 Nkv), gate/up takes gate then up; every other weight is one
tensor. Two naming schemes:
  hf    model.embed_tokens, model.layers.{i}.self_attn.q_proj, ... (LlamaForCausalLM, Qwen3ForCausalLM)
  gguf  token_embd, blk.{i}.attn_q, ... (llama.cpp's names)
Rows are loaded in the order they are stored: HF's q/k rows are in rotate-half order and GGUF's in
Meta's interleaved order, and checkpoint_config.py sets the config's rope_layout to match, so no row
is permuted.

The way in, per run of rows: the stored bytes are written to the GPU as they are, decoded to f32 there
(ops/dequantize.py; f32 bytes need no decoding) and quantized to q4gsw into their rows of the weight
(q4_quantize first_row/rows), so the host holds one run of rows at a time (`chunk_bytes` of f32) and
never converts a value itself. Norm weights (f32 vectors) are decoded on the host: a few KB each.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from ..checkpoints import (INDEX_NAME, CheckpointError, FileSource, GgufCheckpoint, SafetensorsCheckpoint,
                           StoredTensor)
from ..ops.dequantize import dequantize
from ..ops.q4 import q4_quantize, q4_scales_rows
from ..oneshot import run_op
from ..tensors import Tensor
from .checkpoint_config import config_from_gguf, config_from_hf
from .config import ModelConfig
from .weights import MatrixSpec, ModelWeights, allocate_matrix, check_group_size, weight_specs

__all__ = ["NAMINGS", "Piece", "CheckpointWeights", "checkpoint_layout", "open_checkpoint", "open_gguf", "load_weights",
           "CHUNK_BYTES"]

NAMINGS = ("hf", "gguf")
CHUNK_BYTES = 32 << 20      # f32 bytes of one run of rows on its way to the quantizer


@dataclass(frozen=True)
class Piece:
    """Stored tensor `name` fills rows [first_row, first_row + rows) of one of our weights."""

    name: str
    first_row: int
    rows: int


def _names(config: ModelConfig, naming: str) -> dict[str, list[str]]:
    """Our weight name -> the stored tensors that make it, in row order."""
    if naming not in NAMINGS:
        raise ValueError(f"unknown checkpoint naming {naming!r}; known: {NAMINGS}")
    hf = naming == "hf"
    names = {"embed": ["model.embed_tokens.weight" if hf else "token_embd.weight"],
             "final_norm": ["model.norm.weight" if hf else "output_norm.weight"]}
    if not config.tied_embeddings:
        names["lm_head"] = ["lm_head.weight" if hf else "output.weight"]
    for i in range(config.layers):
        ours, p = f"layers.{i}.", (f"model.layers.{i}." if hf else f"blk.{i}.")
        if hf:
            names.update({ours + "attn_norm": [p + "input_layernorm.weight"],
                          ours + "qkv": [p + f"self_attn.{x}_proj.weight" for x in "qkv"],
                          ours + "q_norm": [p + "self_attn.q_norm.weight"],
                          ours + "k_norm": [p + "self_attn.k_norm.weight"],
                          ours + "o": [p + "self_attn.o_proj.weight"],
                          ours + "mlp_norm": [p + "post_attention_layernorm.weight"],
                          ours + "gate_up": [p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"],
                          ours + "down": [p + "mlp.down_proj.weight"]})
        else:
            names.update({ours + "attn_norm": [p + "attn_norm.weight"],
                          ours + "qkv": [p + f"attn_{x}.weight" for x in "qkv"],
                          ours + "q_norm": [p + "attn_q_norm.weight"], ours + "k_norm": [p + "attn_k_norm.weight"],
                          ours + "o": [p + "attn_output.weight"], ours + "mlp_norm": [p + "ffn_norm.weight"],
                          ours + "gate_up": [p + "ffn_gate.weight", p + "ffn_up.weight"],
                          ours + "down": [p + "ffn_down.weight"]})
    return names


def checkpoint_layout(config: ModelConfig, naming: str) -> dict[str, list[Piece]]:
    """Our weight name -> its pieces (stored tensor, rows it fills), for every weight of weight_specs."""
    names = _names(config, naming)
    f, q, kv = config.intermediate, config.q_dim, config.kv_dim
    split = {"qkv": (q, kv, kv), "gate_up": (f, f)}
    layout = {}
    for spec in weight_specs(config):
        stored = names[spec.name]
        widths = split.get(spec.name.rsplit(".", 1)[-1], (spec.rows if isinstance(spec, MatrixSpec) else spec.length,))
        first, pieces = 0, []
        for name, rows in zip(stored, widths):
            pieces.append(Piece(name, first, rows))
            first += rows
        layout[spec.name] = pieces
    return layout


@dataclass(frozen=True)
class CheckpointWeights:
    """A checkpoint's tensors by stored name, the naming scheme, and the tensors of types we cannot read."""

    tensors: dict[str, StoredTensor]
    naming: str
    unsupported: dict[str, str]

    def validate(self, config: ModelConfig) -> dict[str, list[Piece]]:
        """The layout, after checking every tensor it needs is there, readable and of the shape it fills;
        every problem is named in one error."""
        layout = checkpoint_layout(config, self.naming)
        problems = []
        if "rope_freqs.weight" in self.tensors or "rope_freqs.weight" in self.unsupported:
            problems.append("rope_freqs.weight (per-frequency RoPE factors) is not modelled")
        for spec in weight_specs(config):
            for piece in layout[spec.name]:
                expected = (piece.rows, spec.cols) if isinstance(spec, MatrixSpec) else (spec.length,)
                tensor = self.tensors.get(piece.name)
                if piece.name in self.unsupported:
                    problems.append(f"tensor {piece.name!r} is stored as {self.unsupported[piece.name]}, which is "
                                    f"not read (f32, f16, bf16, Q4_0, Q4_1, Q8_0 are)")
                elif tensor is None:
                    problems.append(f"tensor {piece.name!r} is missing (our {spec.name} {list(expected)})")
                elif tensor.shape != expected:
                    problems.append(f"tensor {piece.name!r} is {list(tensor.shape)} {tensor.format}; {config.name} "
                                    f"needs {list(expected)}")
        if problems:
            raise CheckpointError(f"{config.name} from a checkpoint ({self.naming} names): " + "; ".join(problems[:8]) +
                                  (f" (and {len(problems) - 8} more)" if len(problems) > 8 else ""))
        return layout


async def open_gguf(source, *, key: str = "checkpoint") -> tuple[ModelConfig, CheckpointWeights, dict]:
    """(config, weights, extras) of a GGUF file from any ranged source (checkpoints/source.py): a file here,
    a URL or a picked file in the page; extras as open_checkpoint's."""
    checkpoint = await GgufCheckpoint.open(source)
    config = config_from_gguf(checkpoint.metadata, key=key,
                              tied_embeddings="output.weight" not in checkpoint.tensors and
                              "output.weight" not in checkpoint.unsupported)
    eos = checkpoint.metadata.get("tokenizer.ggml.eos_token_id")
    return config, CheckpointWeights(checkpoint.tensors, "gguf", checkpoint.unsupported), \
        {"gguf_metadata": checkpoint.metadata, "eos_ids": [] if eos is None else [eos]}


async def open_checkpoint(path, *, key: str = "checkpoint") -> tuple[ModelConfig, CheckpointWeights, dict]:
    """(config, weights, extras) of a model at `path`: a .gguf file, or a folder with config.json and
    model.safetensors (or model.safetensors.index.json and its shards). `extras` holds what else was found:
    "tokenizer_json" (the folder's tokenizer.json path) or "gguf_metadata", and "eos_ids" (the end-of-sequence
    ids the config, generation_config.json or metadata name)."""
    path = os.fspath(path)
    if os.path.isfile(path) and path.endswith(".gguf"):
        return await open_gguf(FileSource(path), key=key)
    if not os.path.isdir(path):
        raise CheckpointError(f"{path}: neither a .gguf file nor a folder with config.json and safetensors")
    with open(os.path.join(path, "config.json"), "rb") as file:
        spec = json.loads(file.read())
    config = config_from_hf(spec, key=key, name=os.path.basename(os.path.normpath(path)))
    eos = [spec.get("eos_token_id")]
    if os.path.exists(os.path.join(path, "generation_config.json")):
        with open(os.path.join(path, "generation_config.json"), "rb") as file:
            eos.append(json.loads(file.read()).get("eos_token_id"))
    eos_ids = sorted({i for item in eos for i in (item if isinstance(item, list) else [item]) if isinstance(i, int)})
    index = os.path.join(path, INDEX_NAME)
    if os.path.exists(index):
        with open(index, "rb") as file:
            checkpoint = await SafetensorsCheckpoint.open_sharded(file.read(),
                                                                  lambda shard: FileSource(os.path.join(path, shard)))
    else:
        checkpoint = await SafetensorsCheckpoint.open(FileSource(os.path.join(path, "model.safetensors")))
    tokenizer = os.path.join(path, "tokenizer.json")
    return config, CheckpointWeights(checkpoint.tensors, "hf", {}), \
        {"tokenizer_json": tokenizer if os.path.exists(tokenizer) else None, "eos_ids": eos_ids}


async def upload_matrix(runtime, weight, pieces: list[Piece], tensors: dict[str, StoredTensor], staging: Tensor,
                        raw: Tensor) -> None:
    """Fill the Q4 weight's rows from its pieces, a run of rows at a time through `staging` (flat f32)
    and `raw` (flat u32, the stored bytes of a run)."""
    k = weight.k
    per_run = max(1, staging.numel // k)
    for piece in pieces:
        tensor = tensors[piece.name]
        for first in range(0, piece.rows, per_run):
            count = min(per_run, piece.rows - first)
            data = await tensor.read_rows(first, count)
            ops = []
            if tensor.format == "f32":
                runtime.device.write_buffer(staging.buffer, data)
            else:
                runtime.device.write_buffer(raw.buffer, data + bytes(-len(data) % 4))
                ops.append(dequantize(src=raw, out=staging, stored=tensor.format, count=count * k))
            ops.append(q4_quantize(weight=weight, w=staging, first_row=piece.first_row + first, rows=count))
            await run_op(runtime, *ops)


def staging_sizes(config: ModelConfig, tensors: dict[str, StoredTensor], layout: dict[str, list[Piece]],
                  chunk_bytes: int = CHUNK_BYTES) -> tuple[int, int]:
    """(f32 elements, raw bytes) the staging buffers need for the largest run of rows of any matrix."""
    values, raw = 1, 4
    for spec in weight_specs(config):
        if not isinstance(spec, MatrixSpec):
            continue
        per_run = max(1, chunk_bytes // (4 * spec.cols))
        for piece in layout[spec.name]:
            rows = min(per_run, piece.rows)
            values = max(values, rows * spec.cols)
            raw = max(raw, rows * tensors[piece.name].row_bytes)
    return values, raw


async def load_weights(runtime, config: ModelConfig, checkpoint: CheckpointWeights, *, scales_rows: bool = False,
                       chunk_bytes: int = CHUNK_BYTES, progress=None) -> ModelWeights:
    """Every weight of `config` from the checkpoint, resident on the GPU in weights.py's layout (validated
    first: nothing is allocated for a checkpoint that does not fit). `progress(stage, done, total)` hears
    "weights" after each weight."""
    check_group_size(config)
    layout = checkpoint.validate(config)
    tensors, pool, weights = checkpoint.tensors, runtime.tensors, {}
    prefix = f"{config.key}.w"
    values, raw_bytes = staging_sizes(config, tensors, layout, chunk_bytes)
    staging = await pool.allocate(f"{prefix}.staging", (values,))
    raw = await pool.allocate(f"{prefix}.staging_raw", (-(-raw_bytes // 4),), "u32")
    specs = weight_specs(config)
    try:
        for done, spec in enumerate(specs):
            name = f"{prefix}.{spec.name}"
            if isinstance(spec, MatrixSpec):
                weight = weights[spec.name] = await allocate_matrix(runtime, name, spec, scales_rows=scales_rows)
                await upload_matrix(runtime, weight, layout[spec.name], tensors, staging, raw)
                if scales_rows:
                    await run_op(runtime, q4_scales_rows(weight))
            else:
                vector = weights[spec.name] = await pool.allocate(name, (spec.length,))
                runtime.device.write_buffer(vector.buffer, (await tensors[layout[spec.name][0].name].values()).tobytes())
            if progress is not None:
                progress("weights", done + 1, len(specs))
    except BaseException:
        for item in weights.values():
            for tensor in ([item] if isinstance(item, Tensor) else
                           [t for t in (item.packed, item.scales, item.scales_rows) if t is not None]):
                pool.release(tensor.name)
        raise
    finally:
        pool.release(staging.name)
        pool.release(raw.name)
    return ModelWeights(runtime, config, None, weights, None)
