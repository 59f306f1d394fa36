"""Decoder building blocks through the native backend (lavapipe here): the same workload and the
same host verifier as the browser test (e2e/test_decoder_blocks_browser.py)."""

from __future__ import annotations

import asyncio
import struct

import numpy as np
import pytest

from py_runtime.checks.decoder_blocks import (MODELS, DecoderBlocksOptions, argmax_reference, run_decoder_blocks,
                                              steps_for)
from py_runtime.gpu.device import AdapterReport
from py_runtime.kernels import kernel
from py_runtime.ops.argmax import BLOCK, argmax, argmax_blocks_needed
from py_runtime.ops.embedding import embedding_f32
from py_runtime.ops.norm import rms_norm
from py_runtime.ops.rope import rope
from py_runtime.host.oracle import rope_cos_sin_reference, verify_decoder_blocks_report
from py_runtime.models.config import LLAMA3_SCALING
from py_runtime.ops.rope import cos_sin_table, cos_sin_table_gpu, inverse_frequencies
from py_runtime.runtime import Runtime
from py_runtime.tensors import Tensor
from py_runtime.workloads import get


def _run(options: DecoderBlocksOptions):
    async def run():
        artifacts = {}

        async def sink(name, data):
            artifacts[name] = data

        return await run_decoder_blocks(await Runtime.create("native"), options, sink), artifacts

    return asyncio.run(run())


@pytest.fixture(scope="module")
def native_run():
    return _run(DecoderBlocksOptions())


def test_every_block_at_model_shapes_matches_the_float64_oracle(native_run):
    report, artifacts = native_run
    assert report["adapter"]["backend"] == "native"
    assert report["result"] == "passed", "the in-runtime structural checks failed"
    worst = verify_decoder_blocks_report(report, artifacts)
    # Every route ran and was checked (lavapipe has subgroups, so both RMSNorm routes).
    assert report["subgroups"], "lavapipe should offer 'subgroups'; the subgroup route went unchecked"
    assert set(worst) == {"rms_norm", "rms_norm_subgroup", "qk_norm", "qk_norm_subgroup", "rope_interleaved",
                          "rope_half", "swiglu"}, worst
    assert all(0 <= ratio <= 1 for ratio in worst.values()), worst


def test_the_verifier_catches_wrong_outputs(native_run):
    """The checks can fail: corrupt one element per output kind, or one attested route, and the
    verifier must name it."""
    report, artifacts = native_run
    step = next(i for i, (s, _) in enumerate(steps_for(report["options"]["lengths"])) if s == 7)
    for name, flip in (("llama_%d_xn.f32" % step, 1 << 12), ("qwen3_%d_qn_sg.f32" % step, 1 << 12),
                       ("qwen3_%d_q_rot.f32" % step, 1 << 5), ("llama_%d_act.f32" % step, 1 << 8),
                       ("awkward_%d_res_out.f32" % step, 1), ("llama_%d_emb.f32" % step, 1)):
        corrupted = bytearray(artifacts[name])
        word = struct.unpack_from("<I", corrupted, 4 * 5)[0] ^ flip
        struct.pack_into("<I", corrupted, 4 * 5, word)
        with pytest.raises(AssertionError, match=name.split("_", 2)[2].split(".")[0]):
            verify_decoder_blocks_report(report, {**artifacts, name: bytes(corrupted)})
    bad = {**report, "models": [dict(m) for m in report["models"]]}
    bad["models"][0] = {**bad["models"][0], "steps": [dict(s) for s in bad["models"][0]["steps"]]}
    bad["models"][0]["steps"][0]["routes"] = [r for r in bad["models"][0]["steps"][0]["routes"]
                                              if r != "rms_norm_subgroup"]
    with pytest.raises(AssertionError, match="routes"):
        verify_decoder_blocks_report(bad, artifacts)
    wrong_argmax = {**report, "argmax": {**report["argmax"], "cases": [dict(c) for c in report["argmax"]["cases"]]}}
    tie = next(c for c in wrong_argmax["argmax"]["cases"] if c["kind"] == "ties" and c["n"] == 151936)
    tie["index"] = max(i for i, _ in tie["plants"])     # a highest-index tie-break
    with pytest.raises(AssertionError, match="argmax ties n=151936"):
        verify_decoder_blocks_report(wrong_argmax, artifacts)


def test_the_gpu_rope_table_is_within_4u_of_float64_at_every_position():
    """cos_sin_table_gpu (coarse x fine by angle addition) against numpy's float64 cos/sin, absolutely
    within 4u (rope_table.wgsl) plus the float64 angles' own disagreement, at a length that is not a
    square (a partial last block) and for every model's frequencies."""
    async def main(model, positions):
        runtime = await Runtime.create("native")
        table = await runtime.tensors.allocate("t", (positions, model.head_dim // 2, 2))
        await cos_sin_table_gpu(runtime, table, inverse_frequencies(model.head_dim, model.theta, model.scaling))
        return np.frombuffer(await runtime.device.read_buffer(table.buffer), np.float32).reshape(positions, -1, 2)

    for model in MODELS.values():
        positions = 1000
        got = asyncio.run(main(model, positions)).astype(np.float64)
        cos, sin = rope_cos_sin_reference(model.head_dim, model.theta, model.scaling is not None, np.arange(positions))
        allowed = 4.001 * 2.0 ** -24 + (np.arange(positions)[:, None] + 1) * 2.0 ** -48
        assert np.all(np.abs(got[..., 0] - cos) <= allowed) and np.all(np.abs(got[..., 1] - sin) <= allowed)


def test_host_rope_table_matches_numpy_frequencies_and_llama3_scaling():
    """The page's pure-Python table (float64, one rounding to f32) against the oracle's numpy
    frequencies, and the scaling's three regimes at Llama 3.2's settings."""
    for model in MODELS.values():
        table = np.frombuffer(cos_sin_table(inverse_frequencies(model.head_dim, model.theta, model.scaling), 64),
                              np.float32).reshape(64, model.head_dim // 2, 2)
        cos, sin = rope_cos_sin_reference(model.head_dim, model.theta, model.scaling is not None, np.arange(64))
        assert np.array_equal(table[..., 0], cos.astype(np.float32)) and np.array_equal(table[..., 1],
                                                                                        sin.astype(np.float32))
    freqs = inverse_frequencies(64, 500000.0)
    scaled = inverse_frequencies(64, 500000.0, LLAMA3_SCALING)
    wavelength = [2 * np.pi / f for f in freqs]
    assert scaled[0] == freqs[0] and wavelength[0] < 2048                        # high frequency: kept
    assert scaled[-1] == freqs[-1] / 32 and wavelength[-1] > 8192                # low frequency: / 32
    mid = next(i for i, w in enumerate(wavelength) if 2048 < w < 8192)
    assert freqs[mid] / 32 < scaled[mid] < freqs[mid]                            # blended in between


def test_argmax_page_reference_semantics():
    bits = lambda *values: [struct.unpack("<I", struct.pack("<f", v))[0] for v in values]  # noqa: E731
    assert argmax_reference(bits(1.0, 3.0, 3.0, 2.0)) == 1
    assert argmax_reference(bits(-0.0, 0.0)) == 0 and argmax_reference(bits(-1.0, 0.0, -0.0)) == 1
    assert argmax_reference(bits(float("inf"), float("nan"), float("nan"))) == 1
    assert argmax_reference(bits(float("-inf"), float("-inf"))) == 0


def test_options_and_sizes_are_validated():
    workload = get("decoder_blocks")
    with pytest.raises(ValueError, match=r"lengths = \[3\]: 3 is not allowed.*from \[1, 7, 128, 512\]"):
        workload.validate({"lengths": [3]})
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['sample'\].*valid options: \['artifacts', 'lengths'"):
        workload.validate({"sample": 3})
    with pytest.raises(ValueError, match=r"ops = \['mistral'\]: 'mistral' is not allowed"):
        workload.validate({"ops": ["mistral"]})
    values = workload.validate({"lengths": [1, 512], "ops": ["qwen3"]})
    options = DecoderBlocksOptions.with_parts(values.pop("ops"), **values)
    assert (options.models, options.argmax, options.lengths) == (("qwen3",), False, (1, 512))


@pytest.mark.full
def test_prefill_512_opt_in():
    report, artifacts = _run(DecoderBlocksOptions(lengths=(1, 7, 128, 512)))
    assert report["result"] == "passed"
    verify_decoder_blocks_report(report, artifacts)


def test_sizing_refuses_live_sizes_the_tensors_cannot_hold():
    """Resizes are checked before anything is written: positions past the RoPE table, rows past a
    tensor, an empty argmax, ids past their buffer."""
    f32 = lambda name, *shape: Tensor(name, shape, "f32", 0)  # noqa: E731
    live = {"tokens": 4, "pos": 0}
    call = rope(src=f32("q", 4, 2, 8), dst=f32("r", 4, 2, 8), table=f32("t", 16, 4, 2), heads=2, head_dim=8,
                tokens="tokens", pos="pos", layout="half").call
    spec = kernel(call.kernel)
    assert struct.unpack("<5I", call.sizing(spec, {**live, "pos": 12}).params) == (4, 2, 4, 12, 16)
    with pytest.raises(ValueError, match="outside the 16-row cos/sin table"):
        call.sizing(spec, {**live, "pos": 13})
    no_features = AdapterReport(backend="native", info={}, features=(), limits={}, device_features=())
    norm = rms_norm(x=f32("x", 4, 3, 8), weight=f32("w", 8), out=f32("y", 5, 3, 8), tokens="tokens", heads=3, eps=1e-6,
                    adapter=no_features).call
    assert norm.sizing(kernel(norm.kernel), live).workgroups == (12, 1, 1)
    assert norm.sizing(kernel(norm.kernel), {**live, "tokens": 0}).workgroups == (0, 1, 1)
    with pytest.raises(ValueError, match="15 rows, but x/out hold 12"):
        norm.sizing(kernel(norm.kernel), {**live, "tokens": 5})
    blocks_5000 = argmax_blocks_needed(5000)
    assert blocks_5000 == -(-5000 // BLOCK) > 1
    blocks, reduce = argmax(values=f32("v", 5000), block_keys=Tensor("k", (blocks_5000,), "u32", 0),
                            block_index=Tensor("i", (blocks_5000,), "u32", 0), result=Tensor("o", (1,), "u32", 0),
                            length="n").calls
    assert blocks.sizing(kernel(blocks.kernel), {"n": 5000}).workgroups == (blocks_5000, 1, 1)
    assert reduce.sizing(kernel(reduce.kernel), {"n": 5000}).workgroups == (1, 1, 1)
    with pytest.raises(ValueError, match="outside 1..5000"):
        blocks.sizing(kernel(blocks.kernel), {"n": 0})
    lookup = embedding_f32(ids=Tensor("ids", (4,), "u32", 0), table=f32("e", 10, 8), out=f32("o", 5, 8),
                           status=Tensor("s", (5,), "u32", 0), tokens="tokens").call
    with pytest.raises(ValueError, match="hold 4"):
        lookup.sizing(kernel(lookup.kernel), {**live, "tokens": 5})
