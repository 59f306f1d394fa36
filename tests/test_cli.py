"""The CLI end to end on the native backend: exit codes, tables and JSON files."""

from __future__ import annotations

import json

from py_runtime.host.cli import main


def test_check_runtime_suite_passes_against_the_oracle(capsys):
    assert main(["check", "--suite", "runtime"]) == 0
    out = capsys.readouterr().out
    assert "result in the runtime: passed" in out and "PASSED against the float64 host oracle" in out


def test_bench_host_prints_a_table_and_writes_json(tmp_path, capsys):
    target = tmp_path / "host.json"
    assert main(["bench", "host", "--backend", "native", "--dispatches", "9", "--steps", "2",
                 "--json", str(target)]) == 0
    out = capsys.readouterr().out
    assert "host us/dispatch" in out and "bit-identical to naive: True" in out
    assert "result: passed" in out      # host_cost checks replay against naive encoding, bit for bit
    assert json.loads(target.read_text())["dispatches"] == 9


def test_bench_kernels_tiny_preset_reports_ratios(tmp_path, capsys):
    target = tmp_path / "kernels.json"
    assert main(["bench", "kernels", "--backend", "native", "--preset", "tiny", "--repeats", "2", "--trials", "1",
                 "--chain-mb", "0.5", "--json", str(target)]) == 0
    report = json.loads(target.read_text())
    assert [r["case"] for r in report["rows"]] == ["tiny.gemv", "tiny.gemv.int8", "tiny.gemv.int8x", "tiny.gemm",
                                                   "tiny.gemm.dp4a"]
    assert all(r["ns"] > 0 and r["ratio_same_bytes"] > 0 for r in report["rows"])
    assert [r["route"] for r in report["rows"]] == ["q4_gemv_workgroup", "q4_gemv_int8", "q4_gemv_int8x",
                                                    "q4_gemm_tiled", "q4_gemm_dp4a"]
    # The prefill rows come with the arithmetic probes of the same run, the DP4A one with its quantization.
    assert report["rows"][-1]["quantize_ns"] > 0 and "quantize_ns" not in report["rows"][-2]
    assert all(report["probes"][kind]["tops"] > 0 and report["probes"][kind]["ops"] > 0 for kind in ("dp4a", "fma"))
    # lavapipe has no subgroup matrices: their probes are left out, not run
    assert set(report["probes"]) == {"dp4a", "fma"}
    assert [r.get("probe") for r in report["rows"]][-2:] == ["fma", "dp4a"]
    decode = [r for r in report["rows"] if r["rows"] == 1]
    # The decode chain: enough copies for half a MiB, timed in one pass, next to the same-bytes stream.
    assert all(r["chain_copies"] > 1 and r["chain_ns"] > 0 and r["chain_stream_ns"] > 0 for r in decode)
    assert all(r["chain_stream_store_ns"] > 0 for r in decode)
    captured = capsys.readouterr()
    assert "decode chain" in captured.out and "prefill arithmetic" in captured.out and "% of dp4a" in captured.out
    # A benchmark checks nothing: it says so, and exits 0. Progress goes to stderr, a line per stage's ends.
    assert report["result"] == "not checked" and "result: not checked" in captured.out
    assert captured.err.splitlines() == ["kernel bench cases: 0/5", "kernel bench cases: 5/5"], captured.err


def test_bench_model_writes_json_and_html_beside_it(tmp_path, capsys):
    target = tmp_path / "model.json"
    assert main(["bench", "model", "--backend", "native", "--model", "tiny", "--prompt", "8", "--decode", "3",
                 "--json", str(target)]) == 0
    report = json.loads(target.read_text())
    page = target.with_suffix(".html")
    out = capsys.readouterr().out
    assert f"report: {target}" in out and f"html: {page}" in out and "result: not checked" in out
    assert report["result"] == "not checked" and report["options"]["decode"] == 3
    # Profiled on lavapipe: each kernel's bytes and flops, so the report can show GB/s and GFLOP/s.
    assert report["kernels"] and all(k["ns"] > 0 and k["bytes"] >= 0 and k["flops"] >= 0 for k in report["kernels"])
    assert all(k["bytes"] > 0 and k["flops"] > 0 for k in report["kernels"] if k["kernel"].startswith("q4gsw_gemm"))
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and f"{report['prefill_tok_s']:,.1f}" in text
    # the decode step's floor: its dispatches as streaming reads of their bytes, measured in the same run
    assert report["decode_floor_us"] > 0 and "decode step's floor as" in out and "decode floor" in text


def test_bench_kernels_decode_step_runs_every_route(tmp_path, capsys):
    target = tmp_path / "step.json"
    assert main(["bench", "kernels", "--backend", "native", "--preset", "tiny_step", "--trials", "1",
                 "--json", str(target)]) == 0
    step = json.loads(target.read_text())["step"]
    routes = step["routes"]
    f32, int8, int8x, unfused = routes["f32"], routes["int8"], routes["int8x"], routes["int8x+rows unfused"]
    # The tiny model's 2 layers x (norm, q, k, v, o, norm, gate, up, swiglu, down) + norm, lm_head, one
    # dispatch each (the int8 GEMV quantizes its own input); pre-quantized: per layer the norm emitting the
    # int8 row, the fused QKV, a quantize and o, the norm again, the fused gate/up + SwiGLU emitting down's
    # int8 row, and down; then lm_head's norm and GEMV. Unfused: each of the 5 norms followed by a quantize,
    # and a quantize before each down.
    assert (step["linears"], f32["dispatches"], int8["dispatches"], int8x["dispatches"]) == (15, 22, 22, 16)
    assert unfused["dispatches"] == 23 and routes["int8x+rows"]["dispatches"] == 16
    assert int8["routes"][1:] == ["q4_gemv_int8", "swiglu_fused"]
    assert sorted(int8x["routes"]) == ["int8_activations", "q4_gemv_int8x", "q4_gemv_int8x_glu_q8",
                                       "q4_gemv_int8x_qkv", "rms_norm_int8x"]
    assert "rms_norm_int8x" not in unfused["routes"] and "int8_activations" in unfused["routes"]
    assert "q4_gemv_int8x_glu" in unfused["routes"] and "q4_gemv_int8x_glu_q8" not in unfused["routes"]
    assert "q4_gemv_int8" not in f32["routes"]
    assert all(r["us"] > 0 and r["ratio_same_stream"] > 0 for r in routes.values()) and step["stream_us"] > 0
    assert "tok/s bound" in capsys.readouterr().out


def test_bench_kernels_times_the_attention_routes(tmp_path):
    target = tmp_path / "attention.json"
    assert main(["bench", "kernels", "--backend", "native", "--preset", "attention_tiny", "--trials", "1",
                 "--json", str(target)]) == 0
    rows = json.loads(target.read_text())["rows"]
    assert [r["route"] for r in rows] == ["sdpa_decode_subgroup", "sdpa_flash_subgroup", "sdpa_flash_subgroup",
                                          "sdpa_flash_decode", "sdpa_materialized", "sdpa_materialized", "sdpa_k16",
                                          "sdpa_prefill_subgroup"]
    # the split pass again with the cache in shader-f16 types (lavapipe has the feature): its kvf16_ spelling
    assert rows[2]["case"].endswith(".kvf16") and sorted(rows[2]["kernel_ns"]) == [
        "kvf16_sdpa_flash_split_sg_g4w2u2h1", "sdpa_flash_reduce"]
    decode = rows[:5]
    # one layer's K and V over 64 positions, f16: 2 x 64 x 8 heads x 64 dims x 2 bytes
    assert all(r["kv_bytes"] == 2 * 64 * 8 * 64 * 2 and r["layers"] > 1 and r["ns"] > 0 for r in decode)
    assert all(0 < r["ratio_same_bytes"] for r in decode) and all(r["flops"] > 0 for r in rows[5:])
    # the two-pass floor: two near-empty dispatches per layer, cheaper than a route reading the whole cache
    assert all(0 < r["two_pass_floor_ns"] < r["ns"] for r in decode[:2])


def test_generate_in_the_browser_refuses_a_model_the_page_cannot_read(tmp_path, capsys):
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    assert main(["generate", "--backend", "browser", "--model", str(model), "--prompt", "hi"]) == 2
    assert "a .gguf file under" in capsys.readouterr().err


def test_generate_refuses_bad_sampling_options_before_loading_anything(tmp_path, capsys):
    missing = str(tmp_path / "absent.gguf")        # never opened: the options are refused first
    assert main(["generate", "--model", missing, "--prompt", "hi", "--temperature", "0.8", "--top-p", "0"]) == 2
    assert "generate: sampling: top_p 0.0 must be a number in (0, 1]" in capsys.readouterr().err
    assert main(["generate", "--model", missing, "--prompt", "hi", "--temperature", "-1", "--top-k", "65"]) == 2
    err = capsys.readouterr().err
    assert "temperature -1.0 must be 0 (greedy)" in err and "top_k 65 must be an integer 1..64" in err


def test_generate_in_the_browser_passes_the_sampling_options_to_the_chat_view(monkeypatch, capsys):
    from py_runtime.host import cli
    from py_runtime.workloads import get

    seen = {}

    def fake_run_suite(backend, options, *args):
        seen.update(options)
        return None, None

    monkeypatch.setattr(cli, "_run_suite", fake_run_suite)
    assert main(["generate", "--backend", "browser", "--model", "smollm2", "--prompt", "hi", "--temperature", "0.7",
                 "--top-k", "40", "--top-p", "0.9", "--seed", "3"]) == 1
    assert (seen["temperature"], seen["top_k"], seen["top_p"], seen["seed"]) == (0.7, 40, 0.9, 3)
    get("chat").validate({k: v for k, v in seen.items() if k != "suite"})


def test_a_model_check_without_the_oracle_keeps_its_run_for_judge(tmp_path, capsys, monkeypatch):
    # A GPU host has no pinned torch/transformers: the run is kept beside its JSON and judged elsewhere.
    from py_runtime.host import cli

    target = tmp_path / "model.json"
    run = ["check", "--suite", "model", "--model", "awkward", "--layers", "2", "--prompt", "9", "--decode", "2",
           "--json", str(target)]
    monkeypatch.setattr(cli, "_unpinned_oracle", lambda: "no torch here")
    assert main(run) == 0
    out = capsys.readouterr().out
    assert "NOT JUDGED (no torch here)" in out and "PASSED" not in out
    kept = tmp_path / "model.artifacts"
    logits = sorted(kept.iterdir())
    assert len(logits) == 3             # the prompt's last position and two decode steps
    monkeypatch.undo()
    assert main(["check", "--judge", str(target)]) == 0
    assert "PASSED against the float64 host oracle" in capsys.readouterr().out
    first = logits[0].read_bytes()      # a corrupted logit row must fail the judge
    logits[0].write_bytes(first[4:] + first[:4])
    assert main(["check", "--judge", str(target)]) == 1
    assert "FAILED against the host oracle" in capsys.readouterr().err


def test_the_attention_bench_gives_every_route_of_a_geometry_and_length_the_same_data(monkeypatch):
    """The online softmax's rescales depend on the scores: variants compared on different draws are not
    compared fairly, so a case's q, K and V follow its model, length and context, not its place in the list."""
    import asyncio

    from py_runtime.checks import attention_bench
    from py_runtime.checks.attention_bench import ATTENTION_PRESETS

    draws = {}

    async def fake_row(runtime, case, index, data, *rest):
        draws[case.name] = ((case.config.key, case.tokens, case.context), data)
        return {}

    monkeypatch.setattr(attention_bench, "_case_row", fake_row)
    cases = ATTENTION_PRESETS["attention_prefill_sgmat_sweep"] + ATTENTION_PRESETS["attention_prefill"]
    asyncio.run(attention_bench.run_attention_bench(None, cases, trials=1, seed=0, sink_tensor=None, pool=None,
                                                    stream_big=1.0, progress=lambda *a: None))
    by_data = {}
    for key, draw in draws.values():
        by_data.setdefault(key, set()).add(draw)
    assert len(by_data) == 6 and all(len(d) == 1 for d in by_data.values())       # 2 models x 3 lengths
    assert len({next(iter(d)) for d in by_data.values()}) == 6
