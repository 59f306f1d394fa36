"""The page's model views (checks/generate.py) and the page entry's host-side logic (py_runtime.page): sizes
chosen from the adapter, each refused URL value named at its control, the oracle's verdict merged so a run
is "passed" only where every run was judged and passed; and both views run natively, judged by the oracle."""

from __future__ import annotations

import asyncio
import base64
import json

import numpy as np
import pytest

from py_runtime.app import run
from py_runtime.checks.generate import COMPARE_SIZES, SIZES, _setting_name, resolve_size, software_adapter
from py_runtime.page import check, merge_verdicts

SWIFTSHADER = {"vendor": "google", "architecture": "swiftshader", "description": "SwiftShader Device (Subzero)",
               "isFallbackAdapter": True}
LAVAPIPE = {"vendor": "mesa", "device": "llvmpipe (LLVM 19.1.7, 256 bits)", "adapter_type": "CPU"}
H200 = {"vendor": "nvidia", "architecture": "hopper", "description": "NVIDIA H200", "isFallbackAdapter": False}


def test_cpu_adapters_get_the_small_size_and_gpus_the_real_geometry():
    assert "fallback (CPU) adapter" in software_adapter(SWIFTSHADER)
    assert "CPU (software) adapter" in software_adapter(LAVAPIPE)
    assert software_adapter(H200) is None
    auto = {"size": "auto", "model": None, "layers": None, "prompt": None, "decode": None, "policy": None}
    small, choice = resolve_size(auto, SWIFTSHADER, SIZES)
    assert (small["model"], small["layers"], choice["size"]) == ("tiny", 2, "small")
    full, choice = resolve_size(auto, H200, SIZES)
    assert (full["model"], full["layers"], full["prompt"], choice["size"]) == ("llama", None, 128, "full")
    assert "NVIDIA H200 is a GPU" in choice["why"]
    given, choice = resolve_size({**auto, "model": "qwen3", "decode": 3}, SWIFTSHADER, SIZES)
    assert (given["model"], given["decode"], given["layers"]) == ("qwen3", 3, 2)
    assert "model" not in choice["filled"] and "decode" not in choice["filled"]
    forced, choice = resolve_size({**auto, "size": "full"}, SWIFTSHADER, COMPARE_SIZES)
    assert forced["model"] == "llama" and choice["why"] == "asked for in the options"


def test_each_refused_url_value_is_named_at_its_control():
    answer = json.loads(check(json.dumps([["layers", "0"], ["model", "gpt2"], ["decode", "x"], ["seed", "3"]])))
    assert answer["suite"] == "generate" and answer["page"] is None
    assert set(answer["errors"]) == {"layers", "model", "decode"}
    assert "layers takes an integer >= 1" in answer["errors"]["layers"]
    assert "'x' is not an integer" in answer["errors"]["decode"]
    unknown = json.loads(check(json.dumps([["suite", "compare"], ["modle", "tiny"]])))
    assert unknown["errors"] == {} and "unknown URL option modle for suite 'compare'" in unknown["page"]
    assert json.loads(check(json.dumps([["suite", "unray"]])))["page"].startswith("unknown suite 'unray'")
    assert json.loads(check(json.dumps([["seed", "1"], ["seed", "2"]])))["page"] == "URL option seed is given twice"
    assert json.loads(check(json.dumps([["suite", "unary"], ["ops", "exp"], ["upload", "x"]]))) == \
        {"suite": "unary", "errors": {}, "page": None}


def test_a_run_passes_only_where_every_run_was_judged_and_passed():
    report = {"result": "not checked", "oracle_runs": [{"label": "a"}, {"label": "b"}]}
    passed, failed = {"verdict": "passed"}, {"verdict": "failed"}
    assert merge_verdicts(report, {"runs": [passed, passed]})["result"] == "passed"
    assert merge_verdicts(report, {"runs": [passed, failed]})["result"] == "failed"
    unjudged = merge_verdicts(report, {"runs": [passed, {"verdict": "not checked", "reason": "no model"}]})
    assert unjudged["result"] == "not checked" and unjudged["oracle"]["reason"] == "no model"
    assert merge_verdicts(report, {"runs": [passed]})["result"] == "not checked"      # one of two judged
    absent = merge_verdicts(report, None, "this server has no oracle")
    assert absent["result"] == "not checked" and absent["oracle"]["reason"] == "this server has no oracle"
    no_torch = merge_verdicts(report, {"runs": [], "reason": "no transformers"})
    assert no_torch["oracle"] == {"verdict": "not checked", "reason": "no transformers", "runs": []}
    assert merge_verdicts({**report, "result": "failed"}, {"runs": [passed, passed]})["result"] == "failed"


def _native(options: dict):
    artifacts = {}

    async def sink(name, data):
        artifacts[name] = bytes(data)

    return asyncio.run(run("native", options, sink)), artifacts


def _judge(report: dict, artifacts: dict) -> dict:
    pytest.importorskip("transformers")
    from py_runtime.host.serve import generation_oracle

    payload = {"runs": [{**r, "logits": {step: base64.b64encode(artifacts[name]).decode()
                                         for step, name in r["logits"].items()}} for r in report["oracle_runs"]]}
    return merge_verdicts(report, generation_oracle(json.loads(json.dumps(payload))))


def test_generate_runs_natively_and_the_oracle_passes_it_and_fails_a_corrupted_copy():
    report, artifacts = _native({"suite": "generate", "size": "small", "prompt": 8, "decode": 5, "batch": 2})
    assert report["result"] == "not checked" and report["oracle"]["verdict"] == "pending"
    assert report["options"]["model"] == "tiny" and len(report["tokens"]) == 6 and report["position_on_gpu"]
    assert report["decode_tok_s"] > 0 and report["prefill_tok_s"] > 0 and report["ttft_ms"] > 0
    # the GLU writing down's int8 input: its _norm route where the prologue fits (lavapipe), the plain one elsewhere
    assert {"q4_gemv_int8x_glu_q8", "q4_gemv_int8x_glu_q8_norm"} & set(report["routes"]["decode"])
    assert "q4_gemm_dp4a" in report["routes"]["prefill"]
    assert sorted(report["oracle_runs"][0]["logits"]) == ["0", "5"]
    judged = _judge(report, artifacts)
    assert judged["result"] == "passed", judged["oracle"]
    assert judged["oracle"]["runs"][0]["logits_checked"] == [0, 5]
    corrupted = dict(artifacts)
    name = report["oracle_runs"][0]["logits"]["5"]
    logits = np.frombuffer(corrupted[name], np.float32).copy()
    logits[::3] += 1.0
    corrupted[name] = logits.tobytes()
    assert _judge(report, corrupted)["result"] == "failed"


def test_compare_alternates_two_policies_natively_and_both_are_judged():
    report, artifacts = _native({"suite": "compare", "size": "small", "prompt": 8, "decode": 3, "rounds": 2,
                                 "profile": True})
    a, b = report["sides"]["a"], report["sides"]["b"]
    assert (a["policy"], b["policy"]) == ("f32", "int8x")
    assert len(a["rounds_decode_tok_s"]) == len(b["rounds_decode_tok_s"]) == 2
    assert a["tokens_repeat"] and b["tokens_repeat"]
    assert "q4_gemv_int8x" in report["routes_differ"]["decode"]["only_b"]
    assert report["tokens_agree"]["of"] == 4
    assert any(row["delta_us"] is not None for row in report["kernel_deltas"])
    judged = _judge(report, artifacts)
    assert [r["label"] for r in judged["oracle"]["runs"]] == ["a", "b"]
    assert judged["result"] == "passed", judged["oracle"]


def test_compare_the_position_on_the_gpu_against_the_host_gives_the_same_tokens():
    report, _ = _native({"suite": "compare", "size": "small", "prompt": 8, "decode": 4, "rounds": 1, "a": "int8x",
                         "a_position": "gpu", "b": "int8x", "b_position": "host", "profile": False, "oracle": False})
    a, b = report["sides"]["a"], report["sides"]["b"]
    assert (a["position_on_gpu"], b["position_on_gpu"]) == (True, False)
    assert (a["setting"], b["setting"]) == ("int8x, position on the gpu", "int8x, position on the host")
    assert a["tokens"] == b["tokens"] and report["tokens_agree"]["first_difference"] is None
    assert report["oracle"]["verdict"] == "not checked" and report["oracle_runs"] == []


def test_a_sides_name_says_how_its_kv_cache_ran():
    """The compare view names a side by what differs from the defaults; kv="f16" by what ran: its shader-f16
    kernels, or the packed ones where the decoder's cache refused f16 (SwiftShader has no shader-f16)."""
    side = {"policy": "int8x", "position": "auto", "attention": "auto", "fused": True, "kv": "packed"}
    assert _setting_name(side, None) == "int8x"
    assert _setting_name({**side, "kv": "f16"}, None) == "int8x, KV in shader-f16 types"
    refused = "the device has no 'shader-f16' (the cache's kernels read and write packed u32 pairs)"
    assert _setting_name({**side, "kv": "f16", "fused": False}, refused) == "int8x, nothing fused, KV packed (no shader-f16)"
