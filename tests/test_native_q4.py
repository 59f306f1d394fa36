"""Q4 quantizer and linear routes through the native backend, every output against float64 numpy."""

from __future__ import annotations

import asyncio

import pytest

from py_runtime.app import run
from py_runtime.host.oracle import verify_q4_report


def _run(options, progress=None):
    artifacts = {}

    async def sink(name, data):
        artifacts[name] = data

    report = asyncio.run(run("native", {"suite": "q4", **options}, sink, *([progress] if progress else [])))
    return report, artifacts


def test_every_route_at_real_and_awkward_shapes_matches_the_oracle():
    updates = []
    report, artifacts = _run({}, lambda *update: updates.append(update))
    # Nothing is judged in the runtime: the report says so; the oracle below judges every output.
    assert report["result"] == "not checked"
    total = len(report["cases"]) + len(report["embeddings"])
    assert updates == [("q4 cases", done, total) for done in range(total + 1)]
    worst = verify_q4_report(report, artifacts.__getitem__)
    routes = {r for case in report["cases"] for run_ in case["runs"] for r in run_["routes"]}
    # lavapipe reports subgroups up to 128 wide, so the workgroup-reduction GEMV is the decode route here.
    assert routes == {"q4_gemv_workgroup", "q4_gemm_tiled", "q4_gemm_bk64", "q4_qkv_fused_bk64", "q4_linear_generic",
                      "q4_gemv_int8", "int8_activations", "q4_gemv_int8x", "q4_gemv_int8x_qkv", "q4_gemv_int8x_glu",
                      "q4_gemv_int8x_glu_q8", "rms_norm_int8x", "q4_gemm_dp4a", "q4_gemv_int8x_qkv_rope",
                      "rope_kv_cache_write", "q4_gemv_int8x_glu_q8_norm", "q4_gemv_int8x_qkv_rope_norm",
                      "rope_kv_cache_write_norm", "q4_gemv_int8x_qkv_rope_qknorm", "q4_gemv_int8x_qkv_rope_qknorm_norm",
                      "q4_gemm_split_k", "q4_qkv_fused_dp4a", "q4_glu_dp4a"}
    assert all(ratio <= 1 for ratio in worst.values())
    assert any(case["weight_artifacts"] for case in report["cases"])       # the twin was compared


def test_the_rope_qkv_in_parts_of_a_head_matches_the_plain_qkv_and_rope_kv_cache_write_bit_for_bit():
    """The RoPE QKV's sweep variants holding part of a head (32, 16 or 8 of its 64 rows: rotate-half pairs
    from both halves, interleaved ones consecutive), in both layouts, with and without the scale copy and
    the norm prologue: the q they rotate and the cache rows they write equal the plain QKV's through
    rope_kv_cache_write, word for word (the verifier's comparison), on the fused route."""
    from py_runtime.checks.q4_linear import PRESETS

    parts = {"r1u1w32", "r1u1w16", "r1u1w16k2", "r1u1w8k2"}
    names = [case.name for case in PRESETS["int8x"] if case.rope and case.gemv_shape in parts]
    assert len(names) == 4 * (8 + 4)        # per shape: 2 layouts x 2 scale layouts x (2 K + the prologue's 1)
    report, artifacts = _run({"preset": "int8x", "only": names})
    verify_q4_report(report, artifacts.__getitem__)
    assert all(case["runs"][0]["routes"][-1].startswith("q4_gemv_int8x_qkv_rope") for case in report["cases"])


@pytest.mark.full
def test_full_matrix_of_rows_1_7_128_512():
    report, artifacts = _run({"preset": "full"})
    verify_q4_report(report, artifacts.__getitem__)


def test_unknown_case_and_preset_are_named():
    with pytest.raises(ValueError, match=r"suite 'q4': option only = \['llama.nope'\]: 'llama.nope' is not allowed"):
        _run({"only": ["llama.nope"]})
    with pytest.raises(ValueError, match=r"option preset = 'huge': not allowed; preset takes a string from \['ci'"):
        _run({"preset": "huge"})


def test_the_dp4a_verifier_fails_on_a_wrong_output_route_or_activation_and_tells_int8_from_f32():
    """The DP4A prefill checks are not vacuous: one output moved past its bound, a wrong attestation, an
    int8 activation off by one, and the float x @ W (what the f32 GEMMs approximate) each fail."""
    import copy

    import numpy as np

    from py_runtime.checks.q4_linear import ACT_RANGE, BIAS_RANGE, WEIGHT_RANGE
    from py_runtime.host.oracle.q4 import q4_linear_reference
    from py_runtime.host.oracle.synth import synth_values_np

    report, artifacts = _run({"only": ["dp4a.k160_bias"]})
    assert max(verify_q4_report(report, artifacts.__getitem__).values()) <= 1
    case = report["cases"][0]
    run_ = next(r for r in case["runs"] if r["rows"] == 67)
    out_name, words_name, _ = run_["artifacts"]
    out = np.frombuffer(artifacts[out_name], np.float32).reshape(67, case["n"])

    def fails(changed: dict, reported=report, match="") -> None:
        with pytest.raises(AssertionError, match=match):
            verify_q4_report(reported, {**artifacts, **changed}.__getitem__)

    moved = out.copy()
    moved[30, 40] += np.float32(1e-3) * max(1.0, abs(float(moved[30, 40])))
    fails({out_name: moved.tobytes()}, match="1 outside the DP4A bound")
    words = bytearray(artifacts[words_name])
    words[5 * case["k"] + 17] = (words[5 * case["k"] + 17] + 2) % 256      # row 5, one int8 value
    fails({words_name: bytes(words)}, match="int8 values differ from the twin")
    rerouted = copy.deepcopy(report)
    next(r for r in rerouted["cases"][0]["runs"] if r["rows"] == 67)["routes"] = ["q4_gemm_tiled"]
    fails({}, rerouted, match=r"expected the int8 producer and \['q4_gemm_dp4a'\]")
    k, n, seed, stream = case["k"], case["n"], report["seed"], case["stream"]
    x = synth_values_np(ACT_RANGE, seed, stream + 1000, 67 * k).reshape(67, k)
    exact, _ = q4_linear_reference(x, k=k, n_total=n, group_size=case["group_size"], seed=seed, stream=stream,
                                   value_range=WEIGHT_RANGE)
    unquantized = exact + synth_values_np(BIAS_RANGE, seed, stream + 2000, n).astype(np.float64)
    fails({out_name: unquantized.astype(np.float32).tobytes()}, match="outside the DP4A bound")


def test_the_glu_q8_verifier_fails_on_a_wrong_word_stat_or_route():
    """The q4 check's fused-GLU quantization is not judged vacuously: one int8 word or chunk stat of the
    GLU's own quantization changed, or the plain GLU attested, each fail."""
    import copy

    report, artifacts = _run({"only": ["int8x.glu_q8_gs32"]})
    verify_q4_report(report, artifacts.__getitem__)
    run_ = report["cases"][0]["runs"][0]
    fused_words, fused_stats = run_["artifacts"][-4:-2]
    for name, message in ((fused_words, "int8 words differ"), (fused_stats, "chunk stats differ")):
        broken = dict(artifacts)
        data = bytearray(broken[name])
        data[5] ^= 1
        broken[name] = bytes(data)
        with pytest.raises(AssertionError, match=message):
            verify_q4_report(report, broken.__getitem__)
    plain = copy.deepcopy(report)
    plain["cases"][0]["runs"][0]["routes"][-1] = "q4_gemv_int8x_glu"
    with pytest.raises(AssertionError, match="attested"):
        verify_q4_report(plain, artifacts.__getitem__)


def test_the_qkv_rope_verifier_fails_on_a_wrong_cache_word_q_or_row():
    """The q4 check's fused QKV RoPE is not judged vacuously: a word of the fused K or V cache or of its
    rotated q changed, or both caches written at another row, each fail."""
    report, artifacts = _run({"only": ["gemv.qkv_rope_interleaved.r8u1w8"]})
    verify_q4_report(report, artifacts.__getitem__)
    rope = report["cases"][0]["rope"]
    fused_q, _, fused_k, plain_k, fused_v, plain_v = report["cases"][0]["runs"][0]["artifacts"][-6:]
    row_bytes = len(artifacts[fused_k]) // rope["capacity"]
    for name, message in ((fused_q, "rotated q differs"), (fused_k, "K cache differs"), (fused_v, "V cache differs")):
        broken = dict(artifacts)
        data = bytearray(broken[name])
        data[(row_bytes * rope["row"] if name != fused_q else 0) + 1] ^= 1
        broken[name] = bytes(data)
        with pytest.raises(AssertionError, match=message):
            verify_q4_report(report, broken.__getitem__)
    moved = dict(artifacts)
    for name in (fused_k, plain_k, fused_v, plain_v):       # the same row written one row later in both
        data = moved[name]
        moved[name] = data[-row_bytes:] + data[:-row_bytes]
    with pytest.raises(AssertionError, match="is written at rows"):
        verify_q4_report(report, moved.__getitem__)


@pytest.mark.parametrize("n, out_group_size", [(320, 64), (96, 32)])
def test_the_fused_glu_quantizes_its_output_as_quantize_activations_bit_for_bit(n, out_group_size):
    """q4_linear_glu(int8_out=...): the fused gate/up + SwiGLU GEMV also writes its output as int8 for the
    down projection; the words and stats must be quantize_activations' of the plain fused GEMV's f32
    output, bit for bit, and its f32 output the plain GEMV's, for every variant of the kind (shipped and
    sweep, whose workgroups hold whole groups), with and without subgroups and the row-major scale copy:
    five groups of 64 in 64-row workgroups, and three groups of 32 (the last 64-row workgroup half past
    N), each with a group of zeros (scale 0). A 32-row variant asked for groups of 64 does not quantize."""
    from dataclasses import replace

    import numpy as np

    from py_runtime.checks.q4_linear import ACT_RANGE, WEIGHT_RANGE
    from py_runtime.oneshot import run_op, tensor
    from py_runtime.ops.int8_activations import Int8Activations, quantize_activations
    from py_runtime.ops.q4 import Q4Weight, q4_quantize, q4_scales_rows
    from py_runtime.kernels import kernel as kernel_of
    from py_runtime.ops.q4_linear import gemv_shapes, q4_linear_glu
    from py_runtime.ops.synth import fill_uniform
    from py_runtime.routing import RouteUnavailable
    from py_runtime.runtime import Runtime
    from py_runtime.tensors import Tensor

    k, gs = 2048, 64

    def rows_of(shape: str) -> int:
        values = kernel_of(f"q4gsw_gemv_i8x_glu_q8_sg_{shape}").template_values
        return values["R"] * values["RG"]
    shapes = [shape for shape in gemv_shapes("int8x_glu_q8") if rows_of(shape) % out_group_size == 0]
    refused = [shape for shape in gemv_shapes("int8x_glu_q8") if shape not in shapes]

    async def main():
        runtime = await Runtime.create("native")
        adapter = runtime.device.adapter
        assert "subgroups" in adapter.device_features
        without = replace(adapter, device_features=tuple(f for f in adapter.device_features if f != "subgroups"))
        packed = await tensor(runtime, "w.packed", (2 * n * k // 8,), dtype="u32")
        scales = await tensor(runtime, "w.scales", (k // gs * 2 * n,))
        rows = await tensor(runtime, "w.rows", (k // gs * 2 * n,))
        x = await tensor(runtime, "x", (1, k))
        act = await Int8Activations.allocate(runtime, x, gs)
        weight = Q4Weight(packed, scales, k, 2 * n, gs, scales_rows=rows)
        await run_op(runtime, q4_quantize(weight=weight, synth=(WEIGHT_RANGE, 3, 40)), q4_scales_rows(weight),
                     fill_uniform(target=x, value_range=ACT_RANGE, seed=3, stream=41), quantize_activations(act),
                     tokens=1)
        # The up rows of the second output group at level 0: that group's outputs are 0, its scale 0.
        zero_rows = range(n + out_group_size, n + 2 * out_group_size)
        runtime.device.write_buffer(packed.buffer, b"\x88" * (len(zero_rows) * k // 2), zero_rows.start * k // 2)
        results = {}
        for rows_copy in (False, True):
            w = weight if rows_copy else Q4Weight(packed, scales, k, 2 * n, gs)
            for name, device in (("sg", adapter), ("wg", without)):
                for shape in refused:
                    out = await tensor(runtime, "fused", (1, n))
                    q8 = await Int8Activations.allocate(runtime, out, out_group_size)
                    # (refused: no route, or the plain GLU where the pin is one of its shapes too)
                    why = f"workgroups hold {rows_of(shape)} rows, not whole groups of 64"
                    try:
                        op = q4_linear_glu(act=act, weight=w, out=out, adapter=device, gemv_shape=shape, int8_out=q8)
                        assert op.calls[0].route == "q4_gemv_int8x_glu" and why in op.explain(), op.explain()
                    except RouteUnavailable as error:
                        assert why in str(error), error
                    for t in (out, *q8.tensors):
                        runtime.tensors.release(t.name)
                for shape in shapes:
                    fused_out, plain_out = await tensor(runtime, "fused", (1, n)), await tensor(runtime, "plain", (1, n))
                    fused = await Int8Activations.allocate(runtime, fused_out, out_group_size)
                    plain = await Int8Activations.allocate(runtime, plain_out, out_group_size)
                    op = q4_linear_glu(act=act, weight=w, out=fused_out, adapter=device, gemv_shape=shape,
                                       int8_out=fused)
                    kernel = op.calls[0].kernel
                    assert kernel == f"q4gsw_gemv_i8x_glu_q8{'_sr' if rows_copy else ''}_{name}_{shape}", kernel
                    got = await run_op(runtime, op, q4_linear_glu(act=act, weight=w, out=plain_out, adapter=device,
                                                                  gemv_shape="r2u2w1"),
                                       quantize_activations(plain), tokens=1,
                                       read=[fused_out, plain_out, fused.words, fused.stats, plain.words, plain.stats])
                    results[kernel] = [got[t.name] for t in (fused_out, plain_out, fused.words, plain.words,
                                                             fused.stats, plain.stats)]
                    for t in (fused_out, plain_out, *fused.tensors, *plain.tensors):
                        runtime.tensors.release(t.name)
        return results

    results = asyncio.run(main())
    assert len(results) == 2 * 2 * len(shapes) and (shapes and refused if out_group_size == 64 else not refused)
    for kernel, (fused_out, plain_out, fused_words, plain_words, fused_stats, plain_stats) in results.items():
        assert fused_out == plain_out, f"{kernel}: the f32 output differs from the plain GLU's"
        assert fused_words == plain_words, f"{kernel}: int8 words differ from quantize_activations'"
        assert fused_stats == plain_stats, f"{kernel}: stats differ from quantize_activations'"
        stats = np.frombuffer(fused_stats, np.float32).reshape(-1, 2)
        per_group = out_group_size // 32
        assert stats.shape[0] == n // 32 and (stats[per_group:2 * per_group, 0] == 0).all()
        assert (np.delete(stats[:, 0], range(per_group, 2 * per_group)) > 0).all(), kernel


@pytest.mark.parametrize("has_bias, accumulate", [(False, False), (True, True)])
def test_the_split_k_reduce_adds_the_splits_in_order_then_the_bias_and_the_residual(has_bias, accumulate):
    """q4gsw_gemm_split_reduce (the subgroup-matrix GEMM's K splits, route q4_gemm_split_k), bit for bit
    f32 arithmetic in the unsplit store's order: ((p0 + p1) + p2) + bias (+ out), over M x N not a
    multiple of its workgroup."""
    import numpy as np

    from py_runtime.dispatch import OpCall, Sizing, linear_grid, single
    from py_runtime.oneshot import run_op, tensor
    from py_runtime.runtime import Runtime

    splits, m, n = 3, 5, 37
    rng = np.random.default_rng(5)
    parts = rng.uniform(-4, 4, (splits, m, n)).astype(np.float32)
    bias = rng.uniform(-1, 1, n).astype(np.float32)
    residual = rng.uniform(-2, 2, (m, n)).astype(np.float32)

    async def main():
        runtime = await Runtime.create("native")
        partials = await tensor(runtime, "partials", (splits * m * n + 11,), data=parts.tobytes() + bytes(44))
        b = await tensor(runtime, "bias", (n,), data=bias.tobytes())
        out = await tensor(runtime, "out", (m, n), data=residual.tobytes())
        call = OpCall(label="reduce", kernel="q4gsw_gemm_split_reduce", route="q4_gemm_split_k",
                      tensors={"partials": partials, "bias": b, "out": out},
                      sizing=lambda spec, live: Sizing(workgroups=linear_grid(m * n, spec.invocations, 65535),
                                                       params=spec.pack_params(m=m, n=n, splits=splits,
                                                                               has_bias=has_bias, accumulate=accumulate)))
        return np.frombuffer((await run_op(runtime, single(call), read=[out]))["out"], np.float32).reshape(m, n)

    got = asyncio.run(main())
    expected = (parts[0] + parts[1]) + parts[2]
    if has_bias:
        expected = expected + bias
    if accumulate:
        expected = expected + residual
    assert np.array_equal(got, expected)


def test_each_heads_next_input_is_the_lookups_row_and_the_verifier_catches_a_wrong_one(native_runtime):
    """argmax(embed=) and sample(embed=) write the chosen token's embedding row as q4_embedding would (every
    convention); the oracle fails a run whose row, chosen id, route or row params are off, and a report
    missing a head."""
    from py_runtime.checks.q4_linear import EMBEDDING_CASES, _run_embedding_case

    artifacts = {}

    async def sink(name, data):
        artifacts[name] = data

    async def main():
        return [await _run_embedding_case(native_runtime, case, 5, sink) for case in EMBEDDING_CASES[1:]]

    embeddings = asyncio.run(main())
    report = {"seed": 5, "cases": [], "embeddings": embeddings}
    verify_q4_report(report, artifacts.__getitem__)
    runs = [run for case in embeddings for run in case["next_inputs"]]
    assert {(run["head"], run["planted"]) for run in runs} >= {(head, at) for head in ("argmax", "sample")
                                                               for at in (0, 999, 776)}

    case = embeddings[0]
    for i, head in ((1, "argmax"), (4, "sample")):
        run_ = case["next_inputs"][i]
        assert (run_["head"], run_["planted"]) == (head, 500)
        where = f"{head} head's next input of a maximum at 500"
        row = bytearray(artifacts[run_["artifact"]])
        row[4 * 17 + 3] ^= 0x01                     # an exponent bit of value 17: no longer the twin's
        mutated = {**artifacts, run_["artifact"]: bytes(row)}
        with pytest.raises(AssertionError, match=f"{where}: row differs at \\[17\\]"):
            verify_q4_report(report, mutated.__getitem__)
        for wrong in ({"index": run_["planted"] + 1}, {"routes": [head, "q4_embedding"]},
                      {"params": run_["params"][:-4] + [1, 0, 0, 0]}):
            runs_ = [*case["next_inputs"][:i], {**run_, **wrong}, *case["next_inputs"][i + 1:]]
            bad = {**report, "embeddings": [{**case, "next_inputs": runs_}, *embeddings[1:]]}
            with pytest.raises(AssertionError, match=where):
                verify_q4_report(bad, artifacts.__getitem__)
    one_head = [run for run in case["next_inputs"] if run["head"] == "argmax"]
    bad = {**report, "embeddings": [{**case, "next_inputs": one_head}, *embeddings[1:]]}
    with pytest.raises(AssertionError, match="next inputs of the heads \\['argmax'\\]"):
        verify_q4_report(bad, artifacts.__getitem__)
