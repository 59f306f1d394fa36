"""Real checkpoints into the Decoder through the native backend: tiny random Llama and Qwen3 models made
by transformers and saved as safetensors (f32, bf16, and f32 sharded with an index), loaded by our readers,
uploaded, decoded and quantized on the GPU, and judged against transformers loaded from the same files:
exactly the GPU's weights (the twin's requantization) within the f32 policy's tolerance, and the stored
weights within the bound derived from the measured Q4 requantization error (host/oracle/checkpoint.py).
Broken checkpoints (truncated, a wrong dtype, a missing tensor, a wrong shape) are refused naming the tensor."""

from __future__ import annotations

import asyncio
import json
import struct

import numpy as np
import pytest

from py_runtime.checkpoints import CheckpointError, FileSource, SafetensorsCheckpoint
from py_runtime.host.oracle.checkpoint import (as_stored_tolerance_sigmas, checkpoint_values_np, hf_logits,
                                               oracle_logits, requantization_errors, requantized_np)
from py_runtime.host.oracle.model import judge_logits, tolerance_sigmas
from py_runtime.models.checkpoint_weights import open_checkpoint
from py_runtime.models.decoder import Decoder

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

PROMPT = [5, 77, 190, 3, 250, 41, 118]
STEPS = 4
GEOMETRY = dict(vocab_size=320, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=32, rms_norm_eps=1e-6, hidden_act="silu", max_position_embeddings=64)


def _tiny_model(family: str):
    """A random model of `family` with norm weights away from 1 (so a norm loaded wrong shows)."""
    torch.manual_seed(17 if family == "llama" else 23)
    if family == "llama":
        config = transformers.LlamaConfig(**GEOMETRY, tie_word_embeddings=False,
                                          rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
        model = transformers.LlamaForCausalLM(config)
    else:
        config = transformers.Qwen3Config(**GEOMETRY, tie_word_embeddings=True,
                                          rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
        model = transformers.Qwen3ForCausalLM(config)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.copy_(1.0 + 0.25 * torch.randn_like(parameter))
            else:       # weights of std ~1/sqrt(K): activations of unit scale, logits that are not all ties
                parameter.copy_(torch.randn_like(parameter) / parameter.shape[-1] ** 0.5)
    return model.eval()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """family -> {variant: folder}: f32, bf16 and f32 sharded (several files and an index)."""
    root = tmp_path_factory.mktemp("checkpoints")
    out = {}
    for family in ("llama", "qwen3"):
        model = _tiny_model(family)
        folders = {"f32": root / f"{family}-f32", "sharded": root / f"{family}-sharded", "bf16": root / f"{family}-bf16"}
        model.save_pretrained(folders["f32"])
        model.save_pretrained(folders["sharded"], max_shard_size="150KB")
        model.to(torch.bfloat16).save_pretrained(folders["bf16"])
        out[family] = folders
    return out


async def _run_decoder(runtime, config, weights, policy="f32"):
    decoder = await Decoder.create(runtime, config, checkpoint=weights, max_prompt=len(PROMPT),
                                   capacity=len(PROMPT) + STEPS + 1, policy=policy)
    try:
        await decoder.prefill(PROMPT)
        logits = [await decoder.read_logits()]
        for _ in range(STEPS):
            await decoder.step(wait=True)
            logits.append(await decoder.read_logits())
        tokens = (await decoder.tokens())[len(PROMPT):]
    finally:
        decoder.release()
    return tokens, [np.frombuffer(row, np.float32).astype(np.float64) for row in logits]


def _judge(native_runtime, folder):
    async def go():
        config, weights, _ = await open_checkpoint(folder)
        tokens, logits = await _run_decoder(native_runtime, config, weights)
        values = await checkpoint_values_np(config, weights)
        return config, tokens, logits, values

    config, tokens, logits, values = asyncio.run(go())
    held = requantized_np(config, values)
    fed = tokens[:-1]
    exact = judge_logits(config, 0, PROMPT, tokens, logits, tolerance_sigmas(config, "f32"), "f32",
                         hf_logits(config, held, PROMPT, fed))
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64,
                                                              attn_implementation="eager")
    bound = as_stored_tolerance_sigmas(config, requantization_errors(config, values, held))
    stored = judge_logits(config, 0, PROMPT, tokens, logits, bound, "Q4 requantization",
                          oracle_logits(model.eval(), PROMPT, fed, f16_cache=False))
    return config, tokens, exact, stored


@pytest.mark.parametrize("family", ["llama", "qwen3"])
@pytest.mark.parametrize("variant", ["f32", "bf16", "sharded"])
def test_a_safetensors_checkpoint_runs_as_transformers_does(native_runtime, checkpoints, family, variant):
    config, tokens, exact, stored = _judge(native_runtime, checkpoints[family][variant])
    assert config.qk_norm == (family == "qwen3") and config.rope_layout == "half"
    assert exact["worst_of_tolerance"] <= 1, exact
    assert stored["worst_of_tolerance"] <= 1, stored
    assert len(set(tokens)) > 1, tokens
    print(f"\n{family}-{variant}: requantized {exact['worst_sigma']:.3g}/{exact['tolerance_sigma']:.3g} sigma, "
          f"as stored {stored['worst_sigma']:.3g}/{stored['tolerance_sigma']:.3g} sigma, tokens {tokens}")


def test_the_requantized_oracle_fails_a_wrongly_loaded_checkpoint(native_runtime, checkpoints):
    """The verifier can fail: a checkpoint whose q and k rows are read in the other RoPE layout (what
    loading an HF checkpoint as interleaved would do) is far outside the tolerance."""
    from dataclasses import replace

    async def go():
        config, weights, _ = await open_checkpoint(checkpoints["llama"]["f32"])
        wrong = replace(config, rope_layout="interleaved")
        return config, await _run_decoder(native_runtime, wrong, weights), await checkpoint_values_np(config, weights)

    config, (tokens, logits), values = asyncio.run(go())
    oracle = hf_logits(config, requantized_np(config, values), PROMPT, tokens[:-1])
    with pytest.raises(AssertionError, match="sigma"):
        judge_logits(config, 0, PROMPT, tokens, logits, tolerance_sigmas(config, "f32"), "f32", oracle)


def test_a_checkpoint_runs_on_the_int8x_policy_within_its_bound(native_runtime, checkpoints):
    """int8x loads each matrix's row-major scale copy too (q4_scales_rows after the upload)."""
    async def go():
        config, weights, _ = await open_checkpoint(checkpoints["llama"]["bf16"])
        return config, await _run_decoder(native_runtime, config, weights, "int8x"), \
            await checkpoint_values_np(config, weights)

    config, (tokens, logits), values = asyncio.run(go())
    oracle = hf_logits(config, requantized_np(config, values), PROMPT, tokens[:-1])
    judged = judge_logits(config, 0, PROMPT, tokens, logits, tolerance_sigmas(config, "int8x"), "int8x", oracle)
    assert judged["worst_of_tolerance"] <= 1, judged


# --- broken checkpoints: refused with the tensor named -----------------------------------------------

def _rewrite_header(path, edit):
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    body = edit(header, data[8 + length:])
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + body)


def _copy(folder, target):
    target.mkdir()
    for item in folder.iterdir():
        (target / item.name).write_bytes(item.read_bytes())
    return target


def test_a_truncated_safetensors_file_names_the_tensor_cut_off(checkpoints, tmp_path):
    folder = _copy(checkpoints["llama"]["f32"], tmp_path / "cut")
    path = folder / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(data[:len(data) - 1000])
    last = max(json.loads(data[8:8 + struct.unpack("<Q", data[:8])[0]]).items(),
               key=lambda item: item[1].get("data_offsets", [0, 0])[1])[0]
    with pytest.raises(CheckpointError, match=rf"tensor '{last}' needs bytes .* it is truncated"):
        asyncio.run(open_checkpoint(folder))


def test_a_tensor_of_another_dtype_is_refused_by_name(checkpoints, tmp_path):
    folder = _copy(checkpoints["llama"]["f32"], tmp_path / "f64")

    def to_f64(header, body):
        entry = header["model.norm.weight"]
        begin, end = entry["data_offsets"]
        entry["dtype"] = "F64"
        entry["shape"] = [(end - begin) // 8]
        return body

    _rewrite_header(folder / "model.safetensors", to_f64)
    with pytest.raises(CheckpointError, match=r"tensor 'model.norm.weight' is F64; only F32, F16, BF16 are read"):
        asyncio.run(open_checkpoint(folder))


def test_a_missing_tensor_and_a_wrong_shape_are_named(checkpoints, tmp_path):
    folder = _copy(checkpoints["qwen3"]["f32"], tmp_path / "missing")

    def drop_and_reshape(header, body):
        del header["model.layers.1.self_attn.k_norm.weight"]
        header["model.layers.0.mlp.down_proj.weight"]["shape"] = [256, 128]   # transposed: as many bytes
        return body

    _rewrite_header(folder / "model.safetensors", drop_and_reshape)

    async def go():
        config, weights, _ = await open_checkpoint(folder)
        weights.validate(config)

    with pytest.raises(CheckpointError) as refused:
        asyncio.run(go())
    message = str(refused.value)
    assert "tensor 'model.layers.1.self_attn.k_norm.weight' is missing (our layers.1.k_norm [32])" in message
    assert "tensor 'model.layers.0.mlp.down_proj.weight' is [256, 128] f32; missing needs [128, 256]" in message


def test_a_shard_that_lacks_a_tensor_its_index_names_is_refused(checkpoints, tmp_path):
    folder = _copy(checkpoints["llama"]["sharded"], tmp_path / "index")
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    index["weight_map"]["model.extra.weight"] = sorted(set(index["weight_map"].values()))[0]
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match=r"tensor 'model.extra.weight' is not in its shard model-00001"):
        asyncio.run(open_checkpoint(folder))


def test_a_sharded_checkpoint_reads_as_one(checkpoints):
    async def go():
        one = await SafetensorsCheckpoint.open(FileSource(checkpoints["llama"]["f32"] / "model.safetensors"))
        _, weights, _ = await open_checkpoint(checkpoints["llama"]["sharded"])
        return one, weights

    one, weights = asyncio.run(go())
    assert len({t.source.name for t in weights.tensors.values()}) > 1
    assert set(one.tensors) == set(weights.tensors)

    async def same(name):
        return await one.tensors[name].read_rows() == await weights.tensors[name].read_rows()

    assert all(asyncio.run(same(name)) for name in one.tensors)


# --- the CLI: webgpu-llm-lab generate ------------------------------------------------------------------

def _byte_level_tokenizer(folder, vocab_size: int) -> None:
    """A byte-level BPE tokenizer.json of `vocab_size` ids trained on a few sentences (the tiny models'
    vocabulary is random, so any tokenizer of their size serves)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"], show_progress=False)
    tokenizer.train_from_iterator(["the quick brown fox jumps over the lazy dog"] * 20 +
                                  ["hello world, a checkpoint speaks"] * 20, trainer)
    assert tokenizer.get_vocab_size() <= vocab_size
    tokenizer.save(str(folder / "tokenizer.json"))


def test_generate_prints_the_greedy_continuation_of_a_checkpoint(checkpoints, tmp_path, capsys):
    from py_runtime.host.cli import main
    from py_runtime.text import Tokenizer

    folder = _copy(checkpoints["qwen3"]["bf16"], tmp_path / "qwen3")
    _byte_level_tokenizer(folder, GEOMETRY["vocab_size"])
    out = tmp_path / "generate.json"
    assert main(["generate", "--model", str(folder), "--prompt", "hello world", "--steps", "6", "--batch", "4",
                 "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    printed = capsys.readouterr()
    tokenizer = Tokenizer.from_file(folder / "tokenizer.json")
    assert result["prompt_ids"] == tokenizer.encode("hello world")
    assert result["text"] == tokenizer.decode(result["ids"], skip_special_tokens=True)
    assert printed.out.strip() == result["text"].strip() and '"decode_tok_s"' in printed.err
    eos = tokenizer.token_to_id("<|endoftext|>")
    assert 1 <= len(result["ids"]) <= 7 and eos not in result["ids"]
    if not result["stopped"]:
        assert len(result["ids"]) == 7           # the prefill's token and 6 steps

    async def values():
        config, weights, _ = await open_checkpoint(folder)
        return config, await checkpoint_values_np(config, weights)

    config, weights = asyncio.run(values())
    prompt, ids = result["prompt_ids"], result["ids"]
    oracle = hf_logits(config, requantized_np(config, weights), prompt, ids[:-1])
    assert ids == [int(np.argmax(row)) for row in oracle]     # greedy on the weights the GPU holds
