"""Readable tables for check reports (the JSON stays the record)."""

from __future__ import annotations

from ..gpu.device import NAMED_TUNING

__all__ = ["format_report", "format_model_soak", "format_host_cost", "format_kernel_bench", "format_model_bench",
           "format_peer_bench", "decode_kind"]


def _table(headers: list[str], rows: list[list]) -> str:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = lambda row: "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def decode_kind(options: dict) -> str:
    """How a model run's decode picked its tokens: "greedy", or "sampled (...)" with the sampler's settings."""
    s = options.get("sampling")
    return "greedy" if not s else (f"sampled (temperature {s['temperature']:g}, top-k {s['top_k']}, top-p "
                                   f"{s['top_p']:g}, seed {s['seed']})")


def format_report(report: dict) -> str:
    out = [_adapter_line(report), f"features: {', '.join(report['adapter']['features']) or '-'}"]
    rows = [[c["kernel"], c["length"], "x".join(map(str, c["workgroups"])), c["checked"],
             f"{c['worst_error_ratio']:.3f}", c["failure_count"], c["unwritten"],
             "yes" if c["tail_intact"] else "NO", "PASS" if c["passed"] else "FAIL"] for c in report["cases"]]
    out.append(_table(["kernel", "length", "grid", "checked", "worst err/allowed", "failures", "unwritten",
                       "tail ok", "result"], rows))
    if report["timings"]:
        stamps = report["timestamps"]
        out.append(f"\ntimestamps: quantized={stamps['quantized']} (per-dispatch passes; ns from timestamp queries)")
        rows = [[t["kernel"], t["length"], t["ns"], f"{t['gbps']:.2f}" if t["gbps"] else "-"] for t in report["timings"]]
        out.append(_table(["kernel", "length", "ns", "GB/s"], rows))
    out.append(f"\n{report['result'].upper()}: {sum(c['passed'] for c in report['cases'])}"
               f"/{len(report['cases'])} cases, {report['wall_ms']:.0f} ms")
    return "\n".join(out)


def _format_decode_step(report: dict) -> str:
    step = report["step"]
    rows = [[label, r["dispatches"], f"{r['bytes'] / 1e6:.1f}", f"{r['us']:.1f}", f"{r['gbps']:.1f}",
             f"{100 * r['ratio_same_stream']:.0f}%", f"{100 * r['ratio_big_stream']:.0f}%", f"{1e6 / r['us']:.0f}"]
            for label, r in step["routes"].items()]
    return "\n".join([
        _adapter_line(report),
        f"streaming read of {report['stream_big_bytes'] / 2 ** 30:.2f} GiB: {report['stream_big_gbps']:.1f} GB/s",
        f"one {step['geometry']} decode token's {step['linears']} linears, its swiglu and RMSNorms, back to back in "
        f"one pass, each linear on its own weight (median of {report['trials']} replays; int8x: the norms before qkv "
        f"and gate/up emit the int8 row, o and down quantize theirs, the fused QKV and the fused gate/up + SwiGLU; "
        f"unfused: RMSNorm, then quantization); the same byte counts streamed the same way: "
        f"{step['stream_us']:.1f} us = {step['stream_gbps']:.1f} GB/s",
        _table(["activations", "dispatches", "MB", "us per token", "GB/s", "vs same stream", "vs big", "tok/s bound"],
               rows),
    ])


def _adapter_line(report: dict) -> str:
    adapter = report["adapter"]
    info = adapter["info"]
    name = info.get("description") or info.get("device") or info.get("vendor") or "?"
    # the tuning table that picked the kernel variants: the one the info matches, or the one the run named
    tuning = f"; tuning {report['tuning']}{' (named)' * (NAMED_TUNING in info)}" if report.get("tuning") else ""
    return f"adapter: {name} [{adapter['backend']}; vendor {info.get('vendor', '?')}{tuning}]"


_HOST_WAYS = {"naive": "naive (Python encodes each dispatch)", "replay": "replay (no params change)",
              "replay_upload": "replay + params write (headline)"}


def format_host_cost(report: dict) -> str:
    ways = [name for name in _HOST_WAYS if name in report]
    rows = [[_HOST_WAYS[name], f"{r['host_us_per_dispatch']:.3f}", f"{r['host_us_per_step']:.1f}",
             f"{r['median_us_per_step']:.1f}", f"{r['p90_us_per_step']:.1f}", r["steps"]]
            for name, r in ((name, report[name]) for name in ways)]
    gpu = report["gpu_us_per_step_profiled"]
    path = report["replay_path"]
    return "\n".join([
        _adapter_line(report),
        f"host cost of one {report['dispatches']}-dispatch step (encode + submit, GPU drained between steps; "
        f"the params write uploads {report['upload_bytes_per_step']} bytes per step)",
        _table(["encoding", "host us/dispatch (mean)", "us/step mean", "median", "p90", "steps"], rows),
        f"speed-up (naive/replay): {report['speedup']:.2f}x; replay output bit-identical to naive: {report['bit_identical']}",
        f"replay path (resize, heap growth, {path['idle_dispatches']} idle dispatches) bit-identical: "
        f"{', '.join(f'{k} {v}' for k, v in path['checks'].items())}"
        + ("" if path["heap_view_renewed"] is None else f"; params view renewed after heap growth: {path['heap_view_renewed']}"),
        f"replay with GPU wait: {report['replay_waited_us_per_step']:.1f} us/step; "
        f"GPU time (timestamps, one pass per dispatch): {f'{gpu:.1f} us/step' if gpu is not None else 'n/a'}",
        *(_breakdown_line(name, report[name]["breakdown"]) for name in ways if name != "naive"),
    ])


def _breakdown_line(name: str, b: dict | None) -> str:
    if not b:
        return f"{name} breakdown: not measured on this backend"
    return (f"{name} step breakdown, us (timer step {b['timer_step_us']:.3g} us): upload {b['upload_us_per_step']:.1f}, "
            f"encode {b['encode_us_per_step']:.1f}, finish {b['finish_us_per_step']:.1f}, "
            f"queue.submit {b['submit_us_per_step']:.1f}, Python and FFI {b['rest_us_per_step']:.1f}")


def _format_attention(report: dict) -> str:
    rows = [[r["case"], r["route"], r["rows"], r["context"], "skipped: " + r["skipped"]] if "skipped" in r else
            [r["case"], r["route"], r["rows"], r["context"], r["layers"], f"{r['ns'] / 1e3:.2f}",
             f"{r['kv_bytes'] / 1e6:.2f}", f"{r['kv_gbps']:.1f}",
             "-" if r["ratio_same_bytes"] is None else f"{r['stream_gbps_same_bytes']:.1f}",
             "-" if r["ratio_same_bytes"] is None else f"{100 * r['ratio_same_bytes']:.0f}%",
             f"{r['two_pass_floor_ns'] / 1e3:.2f}" if r.get("two_pass_floor_ns") else "-", f"{r['gflops']:.1f}"]
            for r in report["rows"]]
    return "\n".join([
        _adapter_line(report),
        f"streaming read of {report['stream_big_bytes'] / 2 ** 30:.2f} GiB: {report['stream_big_gbps']:.1f} GB/s",
        "attention per layer: decode over one KV cache per layer back to back in one pass (the stream reads the "
        "same bytes the same way); prefill from position 0 (median of "
        f"{report['trials']} replays):",
        _table(["case", "route", "tokens", "context", "layers", "us", "KV MB", "KV GB/s", "stream GB/s (same bytes)",
                "vs same", "2-pass floor us", "GFLOP/s"], rows),
        "per kernel (one profiled pass per dispatch, median over the layers, us):",
        _table(["case", "kernels"], [[r["case"], ", ".join(f"{k} {ns / 1e3:.2f}" for k, ns in r["kernel_ns"].items())]
                                     for r in report["rows"] if "kernel_ns" in r])])


def _prefill_arithmetic(report: dict) -> str:
    """The prefill rows as arithmetic: T ops per s (TOPS for the DP4A GEMM, TFLOP/s for the f32 ones, 2 M N K
    either way) beside the probe ceiling of their instruction, and the DP4A GEMM with its quantization."""
    probes = report["probes"]
    rows = []
    for r in report["rows"]:
        if "probe" not in r:            # (the bench gives every measured prefill row its probe)
            continue
        kind = r["probe"]
        tops = r["flops"] / r["ns"] / 1e3
        quantize = r.get("quantize_ns")
        rows.append([r["case"], r["kernel"], r["rows"], f"{r['ns'] / 1e3:.1f}", f"{tops:.3g}",
                     f"{100 * tops / probes[kind]['tops']:.0f}% of {kind}",
                     f"{quantize / 1e3:.1f}" if quantize is not None else "",
                     f"{r['flops'] / (r['ns'] + quantize) / 1e3:.3g}" if quantize is not None else ""])
    return "\n".join([
        "\nprefill arithmetic (2 M N K ops per GEMM; probes: chains of one instruction, no memory traffic, "
        "measured in this run): " + ", ".join(f"{kind} {p['tops']:.3g} T ops/s" for kind, p in probes.items()),
        _table(["case", "kernel", "M", "us", "T ops/s", "vs probe", "quantize us", "T ops/s with quantize"], rows)])


def format_kernel_bench(report: dict) -> str:
    if report.get("step"):
        return _format_decode_step(report)
    if report["rows"] and "context" in report["rows"][0]:
        return _format_attention(report)
    measured = [r for r in report["rows"] if "skipped" not in r]
    rows = [[r["case"], r["route"], r["rows"], f"{r['bytes'] / 1e6:.2f}", f"{r['ns'] / 1e3:.1f}", f"{r['gbps']:.1f}",
             f"{r['gflops']:.1f}", f"{r['stream_gbps_same_bytes']:.1f}", f"{100 * r['ratio_same_bytes']:.0f}%",
             f"{100 * r['ratio_big_stream']:.0f}%"] for r in measured]
    out = [
        _adapter_line(report),
        f"streaming read of {report['stream_big_bytes'] / 2 ** 30:.2f} GiB: {report['stream_big_gbps']:.1f} GB/s "
        f"(median of {report['trials']} replays x {report['repeats']} dispatches)",
        "per profiled pass (one pass per dispatch, the same weight each time):",
        _table(["case", "route", "M", "MB moved", "us", "GB/s", "GFLOP/s", "stream GB/s (same bytes)",
                "vs same", "vs big"], rows),
    ]
    skipped = [r for r in report["rows"] if "skipped" in r]
    if skipped:
        out.append("skipped (a forced route this adapter cannot run):\n" + "\n".join(
            f"  {r['case']}: {r['skipped']}" for r in skipped))
    if report.get("probes"):
        out.append(_prefill_arithmetic(report))
    chained = [r for r in report["rows"] if "chain_ns" in r]
    if chained:
        out.append(f"\ndecode chain (one pass, back to back over {report['chain_bytes'] / 2 ** 20:.0f} MiB of weight "
                   f"copies, per dispatch; the stream reads the same bytes the same way; 'stream+store': the "
                   f"same read where every workgroup also writes back, as a GEMV does):")
        out.append(_table(
            ["case", "copies", "us", "GB/s", "stream us", "stream GB/s", "vs same", "vs big", "stream+store us",
             "vs stream+store"],
            [[r["case"], r["chain_copies"], f"{r['chain_ns'] / 1e3:.2f}", f"{r['chain_gbps']:.1f}",
              f"{r['chain_stream_ns'] / 1e3:.2f}", f"{r['chain_stream_gbps']:.1f}",
              f"{100 * r['chain_ratio_same_bytes']:.0f}%", f"{100 * r['chain_ratio_big_stream']:.0f}%",
              f"{r['chain_stream_store_ns'] / 1e3:.2f}", f"{100 * r['chain_ratio_stream_store']:.0f}%"]
             for r in chained]))
    return "\n".join(out)


def _figure(value: float) -> str:
    """One decimal; three significant digits below 1 (a CPU adapter's fraction of a token per second)."""
    return f"{value:.3g}" if 0 < abs(value) < 1 else f"{value:.1f}"


def format_model_bench(report: dict) -> str:
    o, c, d = report["options"], report["config"], report["dispatches"]
    rows = [[r["phase"], r["kernel"], r["route"], r["dispatches"], f"{r['ns'] / 1e3:.1f}", f"{100 * r['share']:.1f}%"]
            for r in report["kernels"]]
    decode = report["decode_tok_s"]
    reads = "after every step" if o["batch"] == 1 else f"every {o['batch']}"
    lines = [
        _adapter_line(report),
        f"{c['name']}, {o['layers']} layers, policy {o['policy']}: prompt {o['prompt']}, {o['decode']} "
        f"{decode_kind(o)} decode steps ending at position {o['context']} (ids read {reads}); position on the "
        f"{'GPU' if report['position_on_gpu'] else 'host'}; {d['recorded']} dispatches recorded, {d['prefill']} run "
        f"per prefill, {d['decode']} per decode step" + _kv_spelling(report),
        _table(["prefill tok/s", "TTFT ms", "prefill GPU us (one pass)", "decode tok/s", "host ms/token",
                "GPU us/step (one pass)"],
               [[_figure(report["prefill_tok_s"]), _figure(report["ttft_ms"]),
                 f"{report['prefill_span_us']:.1f}" if report.get("prefill_span_us") else "-",
                 _figure(decode) if decode else "-", f"{report['host_ms_per_token']:.3f}",
                 f"{report['decode_span_us']:.1f}" if report.get("decode_span_us") else "-"]]),
        f"routes: prefill {', '.join(report['routes']['prefill'])}; decode {', '.join(report['routes']['decode'])}",
    ]
    if report.get("decode_floor_us") and report.get("decode_span_us"):
        floor, span = report["decode_floor_us"], report["decode_span_us"]
        lines.insert(-1, f"decode step's floor as {d['decode']} dependent dispatches (each a streaming read of its "
                         f"bytes, back to back): {floor:.1f} us, {1e6 / floor:.0f} tok/s; the step at "
                         f"{100 * floor / span:.{1 if floor < 0.1 * span else 0}f}% of its pace")
    if report.get("prefill_host_ms"):
        host = report["prefill_host_ms"]
        resize = (f"{host['resize']:.2f} re-sizing the plan ({host['resize_new_length']:.2f} to a new length), "
                  if "resize_new_length" in host else "")
        lines.insert(-1, f"prefill host ms (GPU not waited on): {host['call']:.2f} in all; {resize}"
                         f"{host['submit']:.2f} encoding and submitting")
    if rows:
        lines += ["per kernel (one profiled prefill and one profiled decode step, one pass per dispatch"
                  + ("; timestamps look quantized" if report["timestamps_quantized"] else "") + "):",
                  _table(["phase", "kernel", "route", "dispatches", "us", "share"], rows)]
    else:
        lines.append("per kernel: not profiled (no timestamp-query on this adapter, or --no-profile)")
    return "\n".join(lines)


def _kv_spelling(report: dict) -> str:
    """The KV cache's kernels where shader-f16 types were asked for (the default, packed u32, says nothing)."""
    if report["options"].get("kv") != "f16":
        return ""
    refused = report.get("kv_f16_refused")
    return f"; KV cache kernels packed u32 ({refused})" if refused else "; KV cache kernels in shader-f16 types"


def format_model_soak(report: dict) -> str:
    o, m = report["options"], report["memory"]
    mib = lambda value: "-" if value is None else f"{value / 1048576:.1f}"    # noqa: E731
    runs = [[i + 1, f"{r['decode_tok_s']:.1f}" if r["decode_tok_s"] else "-", r["decode_s"], r["distinct_tokens"]]
            for i, r in enumerate(report["runs"])]
    return "\n".join([
        _adapter_line(report),
        f"{report['config']['name']}, {o['layers']} layers, policy {o['policy']}: prompt {o['prompt']}, {o['steps']} "
        f"greedy steps per run (ids read every {o['batch']}); position on the "
        f"{'GPU' if report['position_on_gpu'] else 'host'}",
        _table(["run", "decode tok/s", "seconds", "distinct tokens"], runs),
        _table(["", "GPU buffers MiB", "host heap MiB"],
               [["before", mib(m["before"]["gpu_bytes"]), mib(m["before"]["host_heap_bytes"])],
                ["after", mib(m["after"]["gpu_bytes"]), mib(m["after"]["host_heap_bytes"])]]),
        f"tokens identical across the runs: {'yes' if report['tokens_identical'] else 'NO'}; a step past the cache: "
        f"{report['context_end_refused'] or 'NOT refused'}",
        *(f"problem: {p}" for p in report["problems"]),
    ])


def format_peer_bench(report: dict) -> str:
    """Both engines side by side, the ratio, and (when judged) each engine's oracle verdict."""
    o, e = report["options"], report["engines"]
    fmt = lambda v: "-" if v is None else f"{v:,.1f}"       # noqa: E731
    verdicts = report.get("oracle", {})

    def verdict(engine: str) -> str:
        v = verdicts.get(engine)
        if v is None:
            return "not checked"
        if not v["passed"]:
            return "FAIL"
        return f"pass ({v['worst_sigma']:.3g} of {v['tolerance_sigma']:.3g} sigma, {v['policy']})"

    build = report["peer_build"]
    out = [_adapter_line(report),
           f"{report['config']['name']}, {o['layers']} layers, seed {o['seed']}: prompt {o['prompt']}, {o['decode']} "
           f"greedy steps, {o['trials']} alternating rounds (medians); {report['measured']}",
           f"peer: {o['peer']} {report['peer_info'].get('ortVersion') or ''} ({o['flavour']}, "
           f"{'our GPUDevice' if o['share_device'] else 'its own device without subgroups'}, peer_device "
           f"{o['peer_device']}), build {build['key']} "
           f"(int4 block {build['block_size']}, {build['io_dtype']} I/O, our exact levels and scales)",
           _table(["engine", "prefill tok/s", "decode tok/s", "prefill ms", "decode ms", "oracle"],
                  [[f"ours ({o['policy']})", fmt(e["ours"]["prefill_tok_s"]), fmt(e["ours"]["decode_tok_s"]),
                    fmt(1e3 * e["ours"]["prefill_s"]), fmt(1e3 * e["ours"]["decode_s"]), verdict("ours")],
                   [o["peer"], fmt(e["peer"]["prefill_tok_s"]), fmt(e["peer"]["decode_tok_s"]),
                    fmt(1e3 * e["peer"]["prefill_s"]), fmt(1e3 * e["peer"]["decode_s"]), verdict("peer")],
                   ["ours / peer", f"x{report['ratio']['prefill']:.2f}",
                    f"x{report['ratio']['decode']:.2f}" if report["ratio"]["decode"] else "-", "", "", ""]]),
           f"tokens agree at {report['tokens_agree']['same']} of {report['tokens_agree']['of']} steps"]
    for engine, v in verdicts.items():
        if not v["passed"]:
            out.append(f"{engine}: {v['error']}")
    return "\n".join(out)
