"""The peer engine's model (host/peer.py): our synthetic model converted by the onnxruntime-genai builder, with
our exact Q4 levels and scales, matches the transformers oracle on onnxruntime's CPU provider; the data file
rebuilds bit for bit from the recipe (the GPU host's path); a rebuild of the same inputs is a cache hit.

Qwen3 is not run here: its build fuses the q/k norm into GroupQueryAttention, which onnxruntime's CPU provider
refuses ("implemented only on the CUDA and WebGPU EPs"); the browser runs check it (e2e/test_peer_browser.py)."""

from __future__ import annotations

import shutil
import time

import numpy as np
import pytest

pytest.importorskip("onnxruntime_genai", reason="the peer extra (scripts/setup.sh installs it)")

from py_runtime.checks.model_run import prompt_ids  # noqa: E402
from py_runtime.host.codegen import repo_root  # noqa: E402
from py_runtime.host.oracle.model import (PEER_POLICY, judge_logits, q4_dequantized_np, q4_matrix_np,  # noqa: E402
                                          tolerance_sigmas)
from py_runtime.host.peer import build_peer, materialize, run_ort_cpu  # noqa: E402
from py_runtime.models.config import model_config  # noqa: E402
from py_runtime.models.weights import GROUP_SIZE, weight_specs  # noqa: E402

SEED = 7


@pytest.fixture(scope="module")
def tiny_peer():
    return build_peer(repo_root(), "tiny", 2, SEED, log=lambda line: None)


def test_levels_twin_is_the_dequantized_twin():
    spec = next(s for s in weight_specs(model_config("tiny", 1)) if s.name == "layers.0.gate_up")
    levels, scales = q4_matrix_np(spec, SEED)
    values = (levels.astype(np.float64) - 8).reshape(spec.rows, -1, GROUP_SIZE) * scales.astype(np.float64)[:, :, None]
    assert np.array_equal(values.reshape(spec.rows, spec.cols), q4_dequantized_np(spec, SEED))
    assert levels.max() <= 15


def test_tiny_peer_matches_transformers_on_onnxruntime_cpu(tiny_peer):
    config = model_config("tiny", 2)
    prompt = prompt_ids(config.vocab, SEED, 24)
    tokens, logits = run_ort_cpu(tiny_peer, prompt, 4)
    tolerance = tolerance_sigmas(config, PEER_POLICY)
    judged = judge_logits(config, SEED, prompt, tokens, [row.astype(np.float64) for row in logits], tolerance, "peer")
    assert judged["worst_of_tolerance"] <= 1, judged
    # The judge catches a logit moved by one sigma at one place (the verifier can fail).
    broken = [row.astype(np.float64) for row in logits]
    broken[2][int(np.argmin(broken[2]))] += judged["steps"][2]["sigma"]
    with pytest.raises(AssertionError, match="step 2: logits off"):
        judge_logits(config, SEED, prompt, tokens, broken, tolerance, "peer")


def test_data_file_rebuilds_from_the_recipe_bit_for_bit(tiny_peer, tmp_path):
    copy = tmp_path / tiny_peer.name
    copy.mkdir()
    for name in ("peer.json", "recipe.json", "literal.bin", "model.onnx"):
        shutil.copy(tiny_peer / name, copy / name)
    rebuilt = materialize(copy)
    assert rebuilt.read_bytes() == (tiny_peer / "model.onnx.data").read_bytes()


def test_a_rebuild_of_the_same_inputs_is_a_cache_hit(tiny_peer):
    started = time.perf_counter()
    assert build_peer(repo_root(), "tiny", 2, SEED, log=lambda line: None) == tiny_peer
    assert time.perf_counter() - started < 1.0


@pytest.mark.full
def test_llama_two_layers_peer_matches_transformers_on_onnxruntime_cpu():
    """Llama-3.2-1B's width (llama3 RoPE scaling, GQA 32/8, a 128K vocabulary) at 2 layers: about a minute to
    build on 2 cores, then the same judgement as the tiny model's."""
    config = model_config("llama", 2)
    folder = build_peer(repo_root(), "llama", 2, SEED, log=lambda line: None)
    prompt = prompt_ids(config.vocab, SEED, 32)
    tokens, logits = run_ort_cpu(folder, prompt, 4)
    judged = judge_logits(config, SEED, prompt, tokens, [row.astype(np.float64) for row in logits],
                          tolerance_sigmas(config, PEER_POLICY), "peer")
    assert judged["worst_of_tolerance"] <= 1, judged
