"""The page's generation oracle (host/oracle/model.py verify_generation, behind the dev server's
/api/oracle/generation) passes the oracle's own greedy sequence and fails corrupted tokens and logits."""

from __future__ import annotations

import base64

import numpy as np
import pytest

pytest.importorskip("transformers")

from py_runtime.checks.model_run import prompt_ids                      # noqa: E402
from py_runtime.host.oracle.model import run_oracle, verify_generation  # noqa: E402
from py_runtime.host.serve import generation_oracle                     # noqa: E402
from py_runtime.models.config import model_config                       # noqa: E402


def _greedy_run(steps: int = 6) -> tuple[dict, list[np.ndarray]]:
    """The oracle's own greedy sequence for the tiny model (each token the argmax after the last)."""
    config = model_config("tiny", 2)
    prompt = prompt_ids(config.vocab, 7, 12)
    tokens: list[int] = []
    for _ in range(steps + 1):
        logits = run_oracle(config, 7, tuple(prompt), tuple(tokens))
        tokens.append(int(np.argmax(logits[len(tokens)])))
    run = {"label": "generate", "model": "tiny", "layers": 2, "seed": 7, "policy": "f32", "prompt_ids": prompt,
           "tokens": tokens}
    return run, run_oracle(config, 7, tuple(prompt), tuple(tokens[:-1]))


def test_the_oracles_own_sequence_passes_and_corruption_fails():
    run, exact = _greedy_run()
    last = len(run["tokens"]) - 1
    logits = {0: exact[0].astype(np.float32), last: exact[last].astype(np.float32)}
    judged = verify_generation(run, logits)
    assert judged["verdict"] == "passed", judged
    assert judged["tokens_checked"] == last + 1 and judged["logits_checked"] == [0, last]

    wrong_token = dict(run, tokens=run["tokens"][:3] + [int(np.argmin(exact[3]))] + run["tokens"][4:])
    judged = verify_generation(wrong_token, {})
    assert judged["verdict"] == "failed" and "step 3: the GPU chose" in judged["failures"][0], judged

    shifted = dict(logits)
    shifted[last] = shifted[last] + np.float32(0.5) * np.sqrt(np.mean(exact[last] ** 2)).astype(np.float32) * \
        np.sign(np.arange(shifted[last].size) % 2 - 0.5).astype(np.float32)
    judged = verify_generation(run, shifted)
    assert judged["verdict"] == "failed" and any("over the f32 tolerance" in f for f in judged["failures"]), judged

    other_seed = verify_generation(dict(run, seed=8), logits)
    assert other_seed["verdict"] == "failed", other_seed


def test_the_servers_answer_decodes_the_pages_base64_logits():
    run, exact = _greedy_run(steps=2)
    payload = {"runs": [dict(run, logits={"0": base64.b64encode(exact[0].astype(np.float32).tobytes()).decode()})]}
    answer = generation_oracle(payload)
    assert [r["verdict"] for r in answer["runs"]] == ["passed"], answer
    payload["runs"][0]["logits"]["0"] = base64.b64encode(np.zeros(7, np.float32).tobytes()).decode()
    assert generation_oracle(payload)["runs"][0]["verdict"] == "failed"
