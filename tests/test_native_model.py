"""Whole models through the native backend against HF transformers (float64): Llama-3.2-1B and Qwen3-0.6B
at full width and 2 layers on the f32 policy, Llama's int8x policy, the made-up awkward geometry (Meta's
interleaved RoPE, so the oracle's per-head q/k permutation is exercised, and an untied head); a verifier
proven to fail; bad input refused before anything is dispatched. Full depth is opt-in (-m full)."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import replace

import numpy as np
import pytest

from py_runtime.app import run
from py_runtime.host.oracle.model import model_weights_np, q4_dequantized_np, run_oracle, verify_model_report
from py_runtime.host.oracle.q4 import q4_levels_np
from py_runtime.host.oracle.synth import synth_rows_np, synth_values_np
from py_runtime.models.config import TINY, model_config
from py_runtime.models.decoder import ContextFull, Decoder
from py_runtime.models.weights import GROUP_SIZE, MatrixSpec, weight_specs
from py_runtime.runtime import Runtime

# Short runs that fit CI on a CPU adapter: a 16-token prompt (the prefill GEMMs, one-pass attention and
# the fused QKV prefill) and 4 greedy steps (the decode GEMVs and FlashDecoding), each run twice.
CI = {"layers": 2, "prompt": 16, "decode": 4}


def _run(options):
    artifacts = {}

    async def sink(name, data):
        artifacts[name] = bytes(data)

    return asyncio.run(run("native", {"suite": "model", **options}, sink)), artifacts


@pytest.fixture(scope="module")
def llama():
    return _run({"model": "llama", **CI})


def _routes(report, step):
    return set(report["steps"][step]["routes"])


def _int8x_decode_step(layers: int, fuse_norm: bool = True, one_pass: bool = True) -> int:
    """Dispatches in an int8x decode step: per layer the norm (quantizing; with fuse_norm inside the QKV
    GEMV), the fused QKV (Qwen3's q/k norm, RoPE and the cache write in its epilogue), the attention
    (quantizing: the one pass at these short contexts, else FlashDecoding's split and reduce), o, the
    norm (with fuse_norm inside the next GEMV), the fused gate/up + SwiGLU (quantizing) and down; then the
    final norm (reading the one row in place), lm_head and argmax's two passes (the second storing the
    token in the history and writing its embedding row, the next step's input: under greedy decoding no
    token_history dispatch and no embedding dispatch)."""
    per_layer = 8 - 2 * fuse_norm - one_pass
    return per_layer * layers + 4


def test_llama_matches_transformers_on_the_f32_policy(llama):
    report, artifacts = llama
    assert report["result"] == "not checked"            # the free pass agreed; the oracle judges the rest
    judged = verify_model_report(report, artifacts.__getitem__)
    assert judged["worst_of_tolerance"] <= 1, judged
    prefill_attention = "sdpa_prefill_subgroup" if "subgroups" in report["adapter"]["device_features"] else "sdpa_k16"
    assert {"q4_qkv_fused_bk64", "q4_gemm_bk64", prefill_attention, "rope_kv_cache_write"} <= _routes(report, 0)
    assert _routes(report, 1) & {"sdpa_flash_decode", "sdpa_flash_subgroup", "sdpa_decode_subgroup"} and "q4_gemm_bk64" not in _routes(report, 1)
    assert len(set(report["tokens"])) > 1, "greedy decoding repeated one token: the synthetic model is degenerate"


def test_qwen3_matches_transformers_on_the_f32_policy():
    report, artifacts = _run({"model": "qwen3", **CI})
    judged = verify_model_report(report, artifacts.__getitem__)
    assert judged["worst_of_tolerance"] <= 1, judged
    subgroups = "subgroups" in report["adapter"]["device_features"]
    assert {"sdpa_prefill_subgroup" if subgroups else "sdpa_q16", "rms_norm_subgroup" if subgroups else "rms_norm"} \
        <= _routes(report, 0)


def test_llama_int8x_policy_is_within_its_own_bound():
    report, artifacts = _run({"model": "llama", "policy": "int8x", **CI})
    judged = verify_model_report(report, artifacts.__getitem__)
    assert judged["worst_of_tolerance"] <= 1, judged
    decode = _routes(report, 1)
    assert {"rms_norm_int8x", "q4_gemv_int8x_qkv_rope_norm", "q4_gemv_int8x_glu_q8_norm", "q4_gemv_int8x"} <= decode
    # every linear's input quantized by its producer: no quantize_activations dispatch in a decode step;
    # RoPE and the cache write in the QKV GEMV (the prefill's rope_kv_cache_write idles); the layers'
    # norms inside the GEMVs after them (rms_norm_int8x is the head's)
    assert not decode & {"int8_activations", "rope_kv_cache_write", "q4_gemv_int8x_qkv_rope", "q4_gemv_int8x_glu_q8"}
    assert {"int8_activations", "rope_kv_cache_write"} <= _routes(report, 0)
    assert report["dispatches"]["decode_step"] == _int8x_decode_step(CI["layers"])
    assert "q4_gemv_int8x" in _routes(report, 0)        # the head runs one row, quantized, at a prefill too
    prefill = _routes(report, 0)                        # the prefill's linears on the DP4A GEMM, none in f32
    assert "q4_gemm_dp4a" in prefill and not prefill & {"q4_gemm_bk64", "q4_gemm_tiled", "q4_qkv_fused_bk64"}
    assert "q4_gemm_dp4a" not in decode


def test_a_long_int8x_prefill_fuses_the_qkv_and_the_glu_and_still_matches():
    """At 330 prompt rows the stacked QKV's DP4A grid (48 x 6 tiles) and the gate's (128 x 6) pass 256 tiles:
    each layer's Q/K/V is one DP4A GEMM and gate/up + SwiGLU another, against transformers as every policy."""
    report, artifacts = _run({"model": "llama", "policy": "int8x", "layers": 2, "prompt": 330, "decode": 2})
    judged = verify_model_report(report, artifacts.__getitem__)
    assert judged["worst_of_tolerance"] <= 1, judged
    prefill = _routes(report, 0)
    assert {"q4_qkv_fused_dp4a", "q4_glu_dp4a", "q4_gemm_dp4a"} <= prefill and "swiglu_fused" not in prefill


def test_qwen3_int8x_policy_is_within_its_own_bound():
    """Qwen3's geometry takes the same fused routes as Llama's (its gate/up's K is one warp's 32 chunks),
    its QKV GEMV normalizing each q and k head before RoPE in 128-row workgroups (whole heads of 128): six
    dispatches per layer, as Llama's."""
    report, artifacts = _run({"model": "qwen3", "policy": "int8x", **CI})
    judged = verify_model_report(report, artifacts.__getitem__)
    assert judged["worst_of_tolerance"] <= 1, judged
    decode = _routes(report, 1)
    assert {"rms_norm_int8x", "q4_gemv_int8x_qkv_rope_qknorm_norm", "q4_gemv_int8x_glu_q8_norm"} <= decode
    assert not decode & {"int8_activations", "q4_gemv_int8x_qkv", "rope_kv_cache_write_norm",
                         "q4_gemv_int8x_qkv_rope_norm", "q4_gemv_int8x_qkv_rope_qknorm"}
    assert "rope_kv_cache_write_norm" in _routes(report, 0)     # the prefill's
    assert report["dispatches"]["decode_step"] == _int8x_decode_step(CI["layers"])
    rope = [d for d in report["decisions"] if d["op"] == "q4_linear_qkv" and d["slot"] == "decode"]
    assert all(d["chosen"] == "q4_gemv_int8x_qkv_rope_qknorm_norm" for d in rope) and len(rope) == CI["layers"]


def test_qwen3_int8x_without_the_norm_prologue_and_unfused_are_as_close():
    """fuse_norm=False: the attention norm is its own rms_norm_int8x dispatch before the q/k-normalizing
    RoPE GEMV (q4_gemv_int8x_qkv_rope_qknorm); fused=False: today's chain before either, q, k, v as three
    linears and rope_kv_cache_write_norm. Both judged by the same oracle and bound."""
    report, artifacts = _run({"model": "qwen3", "policy": "int8x", "fuse_norm": False, **CI})
    judged = verify_model_report(report, artifacts.__getitem__)
    assert judged["worst_of_tolerance"] <= 1, judged
    decode = _routes(report, 1)
    assert {"rms_norm_int8x", "q4_gemv_int8x_qkv_rope_qknorm", "q4_gemv_int8x_glu_q8"} <= decode
    assert not decode & {"q4_gemv_int8x_qkv_rope_qknorm_norm", "rope_kv_cache_write_norm"}
    assert report["dispatches"]["decode_step"] == _int8x_decode_step(CI["layers"], fuse_norm=False)
    report, artifacts = _run({"model": "qwen3", "policy": "int8x", "fused": False, **CI})
    judged = verify_model_report(report, artifacts.__getitem__)
    assert judged["worst_of_tolerance"] <= 1, judged
    decode = _routes(report, 1)
    assert {"rms_norm_int8x", "q4_gemv_int8x", "rope_kv_cache_write_norm"} <= decode
    assert not decode & {"q4_gemv_int8x_qkv", "q4_gemv_int8x_qkv_rope_qknorm", "q4_gemv_int8x_qkv_rope_qknorm_norm"}


def test_llama_int8x_without_the_norm_prologue_is_todays_chain_and_as_close():
    """fuse_norm=False: every layer's norm is its own rms_norm_int8x dispatch before the plain epilogue
    GEMVs (two more dispatches per layer), judged by the same oracle and bound."""
    report, artifacts = _run({"model": "llama", "policy": "int8x", "fuse_norm": False, **CI})
    judged = verify_model_report(report, artifacts.__getitem__)
    assert judged["worst_of_tolerance"] <= 1, judged
    decode = _routes(report, 1)
    assert {"rms_norm_int8x", "q4_gemv_int8x_qkv_rope", "q4_gemv_int8x_glu_q8"} <= decode
    assert not decode & {"q4_gemv_int8x_qkv_rope_norm", "q4_gemv_int8x_glu_q8_norm"}
    assert report["options"]["fuse_norm"] is False
    assert report["dispatches"]["decode_step"] == _int8x_decode_step(CI["layers"], fuse_norm=False)


def test_the_unfused_and_materialized_routes_match_transformers_too():
    """The route choices beside the policy (Decoder attention= and fused=): int8x with q, k, v as three
    linears, gate/up/swiglu apart at every step and the materialized attention, which keeps the position
    on the host, judged by the same oracle and bound."""
    report, artifacts = _run({"model": "llama", "policy": "int8x", "attention": "materialized", "fused": False, **CI})
    judged = verify_model_report(report, artifacts.__getitem__)
    assert judged["worst_of_tolerance"] <= 1, judged
    decode = _routes(report, 1)
    assert "sdpa_materialized" in decode and not decode & {"sdpa_flash_subgroup", "sdpa_flash_decode", "sdpa_decode_subgroup"}
    assert "swiglu_fused" in decode and not decode & {"q4_gemv_int8x_qkv", "q4_gemv_int8x_glu"}
    assert "sdpa_materialized" in _routes(report, 0) and not _routes(report, 0) & {"sdpa_k16", "sdpa_prefill_subgroup"}


def test_the_kv_cache_in_shader_f16_types_matches_transformers_too(llama):
    """kv="f16" (lavapipe has shader-f16): every layer's cache written by the RoPE writer's kvf16_ spelling at
    the prefill and at each decode step, read by the subgroup prefill and decode passes' (attested kv_f16
    at every step), judged by the same oracle and bound; the same bytes, so the same greedy tokens as packed."""
    report, artifacts = _run({"model": "llama", "kv": "f16", **CI})
    judged = verify_model_report(report, artifacts.__getitem__)
    assert judged["worst_of_tolerance"] <= 1, judged
    assert report["kv_f16_refused"] is None and report["options"]["kv"] == "f16"
    assert all({"kv_f16", "rope_kv_cache_write"} <= set(step["routes"]) for step in report["steps"])
    packed, _ = llama
    assert report["tokens"] == packed["tokens"] and report["free_tokens"] == packed["free_tokens"]


def test_interleaved_rope_and_an_untied_head_match_through_the_per_head_permutation():
    report, artifacts = _run({"model": "awkward", "layers": 2, "prompt": 9, "decode": 3})
    assert report["config"]["rope_layout"] == "interleaved" and not report["config"]["tied_embeddings"]
    judged = verify_model_report(report, artifacts.__getitem__)
    assert judged["worst_of_tolerance"] <= 1, judged
    # The permutation is what makes them match: an oracle given the weights unpermuted (as if the kernel
    # rotated HF's pairs) is far off.
    unpermuted = replace(model_config("awkward", 2), rope_layout="half")
    wrong = run_oracle(unpermuted, report["options"]["seed"], tuple(report["prompt_ids"]), tuple(report["tokens"][:-1]))
    with pytest.raises(AssertionError, match="logits off by"):
        verify_model_report(report, artifacts.__getitem__, wrong)


def test_the_verifier_catches_wrong_logits_tokens_and_oracles(llama):
    report, artifacts = llama
    config = model_config("llama", CI["layers"])
    exact = run_oracle(config, report["options"]["seed"], tuple(report["prompt_ids"]), tuple(report["tokens"][:-1]))
    judged = verify_model_report(report, artifacts.__getitem__, exact)
    broken = dict(artifacts)                            # one logit just over the tolerance
    logits = np.frombuffer(broken["logits_2.f32"], np.float32).copy()
    logits[1000] += 1.5 * judged["tolerance_sigma"] * judged["steps"][2]["sigma"]
    broken["logits_2.f32"] = logits.tobytes()
    with pytest.raises(AssertionError, match="step 2: logits off by"):
        verify_model_report(report, broken.__getitem__, exact)
    other = copy.deepcopy(report)                       # a token the GPU's logits do not pick
    other["tokens"][1] = other["free_tokens"][1] = (report["tokens"][1] + 1) % config.vocab
    with pytest.raises(AssertionError, match="step 1: token"):
        verify_model_report(other, artifacts.__getitem__, exact)
    with pytest.raises(AssertionError, match="logits off by"):   # the oracle one position late
        verify_model_report(report, artifacts.__getitem__, exact[1:] + exact[:1])
    diverged = copy.deepcopy(report)                    # the free-running pass disagreeing
    diverged["free_tokens"][-1] += 1
    with pytest.raises(AssertionError, match="free-running pass"):
        verify_model_report(diverged, artifacts.__getitem__, exact)


def test_the_fast_q4_twin_is_the_reference_twin_bit_for_bit():
    config = model_config("qwen3", 1)
    for spec in weight_specs(config):
        if not isinstance(spec, MatrixSpec):
            continue
        rows = 80
        levels, scale = q4_levels_np(synth_rows_np(spec.value_range, 3, spec.stream, spec.cols, 0, rows), GROUP_SIZE)
        reference = (levels.astype(np.float64) - 8) * np.repeat(scale.astype(np.float64), GROUP_SIZE, axis=1)
        fast = q4_dequantized_np(MatrixSpec(spec.name, rows, spec.cols, spec.value_range, spec.stream), 3)
        assert np.array_equal(fast, reference), spec.name
    norms = model_weights_np(TINY, 3)
    spec = next(s for s in weight_specs(TINY) if s.name == "final_norm")
    assert np.array_equal(norms["final_norm"], synth_values_np(spec.value_range, 3, spec.stream, spec.length))


@pytest.mark.parametrize("model, policy", [("tiny", "f32"), ("awkward", "f32"), ("tiny", "int8x")])
def test_the_position_on_the_gpu_decodes_as_the_host_sized_steps_bit_for_bit(model, policy):
    """The GPU-side position (argmax's token-history store advancing the caches' offset; RoPE, the cache write and
    the decode attention adding it: here the one pass, FlashDecoding past its reach in the crossing test
    below) against the host re-sizing every step: identical tokens and logits, and nothing re-sized per step but
    the one entering a new context band (int8x: the QKV GEMV applying RoPE and writing the cache at a
    decode step)."""
    config = model_config(model, 1)

    async def decode(runtime, gpu_position):
        decoder = await Decoder.create(runtime, config, seed=5, max_prompt=8, capacity=80, gpu_position=gpu_position,
                                       policy=policy)
        assert decoder.position_on_gpu is gpu_position
        await decoder.prefill([3, 1, 4, 1, 5, 9, 2])
        await decoder.step()
        arena, writes = runtime.params, []
        write = arena.write
        arena.write = lambda *args: writes.append(args[0]) or write(*args)     # params packed per step
        quiet = 0                   # steps that packed nothing
        try:
            for _ in range(60):
                before = len(writes)
                await decoder.step()
                quiet += len(writes) == before
        finally:
            del arena.write
        tokens, logits = await decoder.tokens(), await decoder.read_logits()
        routes = decoder.plan.routes
        decoder.release()
        return tokens, logits, len(writes), routes, quiet

    async def main():
        runtime = await Runtime.create("native")
        on_gpu = await decode(runtime, True)
        on_host = await decode(runtime, False)
        assert on_gpu[0] == on_host[0] and len(on_gpu[0]) == 7 + 62
        assert on_gpu[1] == on_host[1]
        # one step re-sizes: the one at 65 keys, out of context_band's 64 into the cache's 80
        assert on_gpu[4] == 59, "a decode step with the position on the GPU re-packed params"
        assert on_host[2] >= 60 * 2             # RoPE + cache write and the attention, per step
        if policy == "int8x":
            assert "q4_gemv_int8x_qkv_rope_norm" in on_gpu[3] and "q4_gemv_int8x_qkv_rope_norm" in on_host[3]

    asyncio.run(main())


def test_a_plan_that_cannot_keep_the_position_on_the_gpu_says_why():
    async def main():
        runtime = await Runtime.create("native")
        with pytest.raises(ValueError, match="head_dim 18 is not a multiple of 4"):
            await Decoder.create(runtime, replace(TINY, head_dim=18, heads=32, kv_heads=8), seed=1, max_prompt=4,
                                 capacity=8, gpu_position=True)

    asyncio.run(main())


def test_bad_input_and_a_full_context_are_refused_before_dispatch():
    async def main():
        runtime = await Runtime.create("native")
        with pytest.raises(ValueError, match="unknown activation policy 'int4'"):
            await Decoder.create(runtime, TINY, seed=1, max_prompt=4, capacity=8, policy="int4")
        with pytest.raises(ValueError, match="max_prompt 9 must be 1..capacity"):
            await Decoder.create(runtime, TINY, seed=1, max_prompt=9, capacity=8)
        with pytest.raises(ValueError, match=r"K a multiple of the group size 64: embed \(K 96\)"):
            await Decoder.create(runtime, replace(TINY, hidden=96), seed=1, max_prompt=4, capacity=8)
        assert "tiny.w.embed.packed" not in runtime.tensors, "a refused model allocated its weights"
        decoder = await Decoder.create(runtime, TINY, seed=1, max_prompt=4, capacity=6)
        with pytest.raises(ValueError, match="no sequence; prefill a prompt first"):
            await decoder.step()
        with pytest.raises(ValueError, match="a prompt of 5 tokens; this plan takes 1..4"):
            await decoder.prefill([1, 2, 3, 4, 5])
        with pytest.raises(ValueError, match=r"prompt ids \[512\] are outside the vocabulary of 512"):
            await decoder.prefill([1, 512])
        with pytest.raises(ContextFull, match="need 9 positions; the KV cache holds 6"):
            await decoder.generate([1, 2, 3], 6)
        await decoder.prefill([1, 2, 3, 4])
        await decoder.step()
        await decoder.step()
        with pytest.raises(ContextFull, match="at position 6 do not fit the 6-position KV cache"):
            await decoder.step()
        generated = await decoder.tokens()
        assert len(generated) == 7 and generated[:4] == [1, 2, 3, 4]
        decoder.release()

    asyncio.run(main())


@pytest.mark.full
@pytest.mark.parametrize("model", ["llama", "qwen3"])
def test_full_depth_with_a_long_prompt(model):
    report, artifacts = _run({"model": model, "layers": model_config(model).layers, "prompt": 128, "decode": 16})
    judged = verify_model_report(report, artifacts.__getitem__)
    assert judged["worst_of_tolerance"] <= 1, judged


def test_a_decode_crossing_the_one_pass_reach_switches_to_flash_decoding_and_matches_transformers():
    """With the position on the GPU, the plan re-sizes only where a step's context crosses a band
    (ops.attention.context_band): the one-pass decode serves contexts up to its reach, FlashDecoding the
    steps past it, in one sequence, each step attested with the route that ran; the whole run is judged
    by the transformers oracle (int8x: the one pass and the reduce both quantize the o-proj's input)."""
    from py_runtime.ops.attention import one_pass_decode

    async def reach():
        runtime = await Runtime.create("native")
        return one_pass_decode(TINY.head_dim, runtime.device.adapter.info)[1]

    edge = asyncio.run(reach())
    prompt, decode = edge - 6, 12                  # the step at position edge crosses it
    report, artifacts = _run({"model": "tiny", "policy": "int8x", "prompt": prompt, "decode": decode})
    judged = verify_model_report(report, artifacts.__getitem__)
    assert judged["worst_of_tolerance"] <= 1, judged
    assert report["position_on_gpu"] is True
    attention = [sorted(set(step["routes"]) & {"sdpa_decode_subgroup", "sdpa_flash_subgroup"})
                 for step in report["steps"][1:]]
    # step i (from 1) runs at position prompt + i - 1 and attends prompt + i keys
    expected = [["sdpa_decode_subgroup"] if prompt + i <= edge else ["sdpa_flash_subgroup"]
                for i in range(1, len(attention) + 1)]
    assert attention == expected and ["sdpa_flash_subgroup"] in attention and ["sdpa_decode_subgroup"] in attention
    assert all(step["attention_conflicts"] == 0 for step in report["steps"])


def test_decode_reads_each_batch_once_the_next_is_submitted_and_hears_every_id_in_order():
    """Decoder.decode awaits a batch's read only after submitting the next batch: on_batch hears each batch
    (the steps done at its end, every id so far) one batch late but in order, the last at the end, and the
    ids are the history the GPU kept (read again at the end), whatever the batch."""
    async def main():
        runtime = await Runtime.create("native")
        decoder = await Decoder.create(runtime, TINY, seed=3, max_prompt=4, capacity=40, policy="int8x")
        runs = {}
        for batch in (1, 3, 32):
            heard = []
            submitted = []                      # steps submitted when each batch was heard
            step = decoder.step

            async def counting_step(**options):
                submitted.extend([None] * options.get("count", 1))
                return await step(**options)
            decoder.step = counting_step
            await decoder.prefill([5, 9, 2])
            run = await decoder.decode(10, batch=batch, on_batch=lambda done, ids: heard.append(
                (done, list(ids), len(submitted))))
            del decoder.step
            runs[batch] = (run.ids, heard, await decoder.tokens(4, 14))
        decoder.release()
        return runs

    runs = asyncio.run(main())
    assert runs[1][0] == runs[3][0] == runs[32][0]
    for batch, (ids, heard, history) in runs.items():
        assert ids == history and len(ids) == 10
        ends = [min(10, end) for end in range(batch, 10 + batch, batch)]
        assert [done for done, _, _ in heard] == ends
        assert all(seen == ids[:done] for done, seen, _ in heard)
        # each batch but the last was heard after the next batch's steps were submitted
        assert all(steps == min(10, done + batch) for done, _, steps in heard[:-1]) and heard[-1][2] == 10


def test_decode_submits_several_steps_at_once_within_a_context_band_and_keeps_the_same_tokens():
    """decode(per_submit=N) repeats the recorded step N times in one submit where the steps share a context
    band, fewer where a batch or a band ends (64 -> 128 here): the tokens are those of one step a submit,
    and each submit's steps are what submit_steps allowed."""
    async def main():
        runtime = await Runtime.create("native")
        decoder = await Decoder.create(runtime, TINY, seed=3, max_prompt=60, capacity=100, policy="int8x")
        assert decoder.position_on_gpu
        prompt = [5, 9, 2] + [(7 * i) % TINY.vocab for i in range(55)]     # 58 tokens: steps cross 64
        runs = {}
        for per_submit in (1, 4, 7):
            counts = []
            step = decoder.step

            async def counting_step(**options):
                counts.append((decoder.position, options.get("count", 1)))
                return await step(**options)
            decoder.step = counting_step
            await decoder.prefill(prompt)
            run = await decoder.decode(12, batch=5, per_submit=per_submit)
            del decoder.step
            runs[per_submit] = (run.ids, counts)
        with pytest.raises(ValueError, match="cannot go in one submit"):
            await decoder.step(count=60)
        decoder.release()
        return runs

    runs = asyncio.run(main())
    assert runs[1][0] == runs[4][0] == runs[7][0] and len(runs[1][0]) == 12
    assert [count for _, count in runs[1][1]] == [1] * 12
    # positions 58..69: batches end after 5 and 10 steps, the band 64 ends at position 64 (ctx 64)
    assert runs[4][1] == [(58, 4), (62, 1), (63, 1), (64, 4), (68, 2)]
    assert runs[7][1] == [(58, 5), (63, 1), (64, 4), (68, 2)]
