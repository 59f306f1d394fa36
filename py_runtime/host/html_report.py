"""Self-contained HTML reports of `bench model` runs: one file with inline CSS and inline SVG charts, no
scripts and no external assets, so it opens anywhere and can be committed beside its JSON.

  model_bench_html(runs, labels=None, title=None)   one run, or several compared side by side (policies,
                                                    backends, or two engines for a `bench compare`)
  write_model_bench_html(runs, path, ...)           the same, written to a file; returns its path

Every string taken from a report passes through html.escape (adapter names, kernel names and routes come
from drivers and registries this module does not control); numbers are formatted here. In the share
charts a kernel's bar over its track (the whole profiled step) is its share of that step's GPU time.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

from ..gpu.device import NAMED_TUNING
from .report import decode_kind

__all__ = ["model_bench_html", "write_model_bench_html", "peer_bench_html", "write_peer_bench_html"]

PHASES = ("prefill", "decode")
ROW_HEIGHT, AXIS_HEIGHT = 20, 20


@dataclass(frozen=True, kw_only=True)
class ChartGeometry:
    """A bar chart's layout in SVG user units: labels right-aligned before the track, the value after it."""
    width: int
    label_width: int
    track_width: int
    label_chars: int
    axis: bool               # percent ticks over the track (a share of a step), or none (relative bars)


SHARE_CHART = ChartGeometry(width=960, label_width=260, track_width=580, label_chars=36, axis=True)
METRIC_CHART = ChartGeometry(width=480, label_width=60, track_width=320, label_chars=8, axis=False)
# (JSON key, card label, table header, which way is better, format)
HEADLINES = (("prefill_tok_s", "prefill tok/s", "prefill tok/s", "higher is better", lambda v: _num(v, 1)),
             ("decode_tok_s", "decode tok/s", "decode tok/s", "higher is better", lambda v: _num(v, 1)),
             ("ttft_ms", "time to first token, ms", "TTFT ms", "lower is better", lambda v: _num(v, 1)),
             ("host_ms_per_token", "host ms per decode token", "host ms/token", "lower is better",
              lambda v: _num(v, 2)),
             ("decode_span_us", "GPU time of a decode step (one pass)", "GPU per step", "lower is better",
              lambda v: "-" if v is None else _time(1e3 * v)),
             ("prefill_span_us", "GPU time of the prefill (one pass)", "GPU per prefill", "lower is better",
              lambda v: "-" if v is None else _time(1e3 * v)))

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d2430; margin: 0;
       background: #f4f6f9; }
main { max-width: 1080px; margin: 0 auto; padding: 24px 28px 48px; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 32px 0 8px; padding-top: 12px; border-top: 2px solid #dde3ea; }
h3 { font-size: 15px; margin: 20px 0 6px; }
p.sub { margin: 0 0 16px; color: #5b6575; }
code, .mono { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 12.5px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 3px 16px; margin: 8px 0; }
dl.facts dt { color: #5b6575; }
dl.facts dd { margin: 0; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(180px, 1fr)); gap: 12px; margin: 12px 0; }
.card { border: 1px solid #dde3ea; border-radius: 6px; padding: 10px 14px; }
.card .value { font-size: 24px; font-weight: 600; white-space: nowrap; }
.card .label { color: #5b6575; }
table { border-collapse: collapse; margin: 8px 0; width: 100%; }
th, td { padding: 3px 8px; border-bottom: 1px solid #e6eaf0; text-align: right; white-space: nowrap; }
th { background: #eef2f6; font-weight: 600; }
th:first-child, td:first-child, td.text, th.text { text-align: left; }
td.text { white-space: normal; }
tr.total td { font-weight: 600; border-top: 2px solid #c9d1db; }
.chips { display: flex; flex-wrap: wrap; gap: 4px; }
.chip { border: 1px solid #d4dae2; border-radius: 10px; padding: 0 7px; font-size: 12px; background: #f7f9fb; }
.chip.on { background: #e3efff; border-color: #8db4ea; }
.status { display: inline-block; padding: 0 8px; border-radius: 4px; font-weight: 600; }
.status.passed { background: #dff3e4; color: #17602d; }
.status.failed { background: #fbe0e0; color: #8a1c1c; }
.status.not-checked { background: #eceff3; color: #3d4654; }
.charts { display: grid; grid-template-columns: 1fr 1fr; gap: 8px 24px; }
svg { max-width: 100%; height: auto; }
svg text { font: 12px ui-monospace, Menlo, Consolas, monospace; fill: #1d2430; }
svg .axis { fill: #5b6575; }
svg .grid { stroke: #d4dae2; stroke-width: 1; }
svg .track { fill: #f0f3f7; }
svg .bar.prefill { fill: #3d7bd9; }
svg .bar.decode { fill: #e08a2c; }
svg .bar.metric { fill: #4f9a6a; }
.routes table { width: auto; min-width: 50%; }
.routes td:not(:first-child), .routes th:not(:first-child) { text-align: center; min-width: 6em; }
.scroll { overflow-x: auto; }
details { margin: 8px 0; }
summary { cursor: pointer; color: #3d4654; }
.note { color: #5b6575; font-size: 13px; }
"""


class _Html(str):
    """Markup built here, inserted as is (everything else is escaped)."""


def _e(value) -> str:
    return value if isinstance(value, _Html) else html.escape(str(value), quote=True)


def _num(value, digits: int = 1) -> str:
    """`digits` decimals with thousands separators; three significant digits below 1 (CPU adapters run at
    fractions of a token per second, and 0.0 would hide them)."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if 0 < abs(value) < 1:
        return f"{value:.3g}"
    return f"{value:,.{digits}f}"


def _share(share: float) -> str:
    return "<0.1%" if 0 < share < 0.0005 else f"{100 * share:.1f}%"


def _time(ns: float) -> str:
    """GPU time in us, or in ms from 10 ms (CPU adapters)."""
    return f"{ns / 1e3:,.1f} us" if ns < 1e7 else f"{ns / 1e6:,.1f} ms"


TEXT = ' class="text"'


def _table(headers: list[str], rows: list[list], *, total: list | None = None, text_columns: int = 1) -> _Html:
    def row(cells, tag, css=""):
        return (f"<tr{css}>" + "".join(f"<{tag}{TEXT if i < text_columns else ''}>{_e(c)}</{tag}>"
                                       for i, c in enumerate(cells)) + "</tr>")
    body = [row(headers, "th")] + [row(r, "td") for r in rows] + ([row(total, "td", ' class="total"')] if total else [])
    return _Html("<table>" + "".join(body) + "</table>")


def _adapter_name(adapter: dict) -> str:
    info = adapter.get("info") or {}
    return info.get("description") or info.get("device") or info.get("vendor") or "unknown adapter"


def _run_label(run: dict) -> str:
    o = run["options"]
    long_context = o.get("context", 0) > o["prompt"] + o["decode"]
    return (f"{run['config']['name']}, {o['layers']} layers, {o['policy']}, prompt {o['prompt']}"
            + (f", context {o['context']}" if long_context else "")
            + f", {run['adapter']['backend']} on {_adapter_name(run['adapter'])}"
            + (f", tuning {run['tuning']}" if run.get("tuning") else ""))


def _status(result: str) -> _Html:
    return _Html(f'<span class="status {_e(result.replace(" ", "-"))}">{_e(result)}</span>')


def _oracle(run: dict) -> _Html:
    """The oracle's verdict where the JSON carries one; a benchmark alone checks nothing and says so."""
    oracle = run.get("oracle")
    if isinstance(oracle, dict):
        details = ", ".join(f"{_e(k.replace('_', ' '))} {_e(f'{v:.4g}' if isinstance(v, float) else v)}"
                            for k, v in oracle.items() if k != "result")
        return _Html(f"{_status(oracle.get('result', run['result']))} {details}")
    if run["result"] == "not checked":
        return _Html(f"{_status('not checked')} <span class=\"note\">a benchmark judges nothing; "
                     "<code>check --suite model</code> runs the same plan against the oracle</span>")
    return _status(run["result"])


def _quantized(flag) -> str:
    if flag is None:
        return "not profiled"
    return "yes: per-kernel times are rounded, shares are coarse" if flag else "no"


def _header(run: dict) -> _Html:
    o, c, d, adapter = run["options"], run["config"], run.get("dispatches", {}), run["adapter"]
    geometry = (f"vocab {c['vocab']:,}, hidden {c['hidden']}, intermediate {c['intermediate']}, heads "
                f"{c['heads']}/{c['kv_heads']} x {c['head_dim']}, RoPE {c['rope_layout']} theta {c['rope_theta']:g}"
                + (", q/k norm" if c.get("qk_norm") else "") + (", tied lm_head" if c.get("tied_embeddings") else ""))
    model = c["name"] if c["name"] == c["key"] else f"{c['name']} (--model {c['key']})"
    facts = [("model", model), ("geometry", geometry), ("depth", f"{o['layers']} layers"),
             ("lengths", f"prompt {o['prompt']} tokens, {o['decode']} {decode_kind(o)} decode steps"
                         + (f" ending at position {o['context']}" if o.get("context") else "") + " (ids read "
                         + ("after every step" if o["batch"] == 1 else f"every {o['batch']} steps")
                         + f"), seed {o['seed']}"),
             ("policy", o["policy"])]
    if run.get("position_on_gpu") is not None:
        facts.append(("position", f"on the {'GPU' if run['position_on_gpu'] else 'host'} between decode steps"
                                  + (f" (asked: {o['position']})" if o.get("position") else "")))
    if o.get("kv") == "f16":
        refused = run.get("kv_f16_refused")
        facts.append(("KV cache", f"asked for in shader-f16 types, run packed: {refused}" if refused
                                  else "its kernels in shader-f16 types (the same bytes as the packed u32 pairs)"))
    facts += [("oracle", _oracle(run)), ("timestamps quantized", _quantized(run.get("timestamps_quantized")))]
    if d:
        facts.append(("dispatches", f"{d.get('recorded')} recorded; {d.get('prefill')} run per prefill, "
                                    f"{d.get('decode')} per decode step"))
    if run.get("decode_floor_us") and run.get("decode_span_us"):
        floor = run["decode_floor_us"]
        facts.append(("decode floor", f"{_time(1e3 * floor)} a step as {d.get('decode')} dependent dispatches, each a "
                                      f"streaming read of its bytes ({1e6 / floor:,.0f} tok/s); the step's GPU time "
                                      f"at {_share(floor / run['decode_span_us'])} of that pace"))
    if run.get("build_s") is not None:
        facts.append(("build", f"{run['build_s']:.2f} s (weights generated and quantized on the GPU, plan recorded)"))
    info = adapter.get("info") or {}
    pairs = " &middot; ".join(f"{_e(key)} <b>{_e(value)}</b>" for key, value in info.items() if value not in ("", None))
    device = set(adapter.get("device_features", ()))
    chips = "".join(f'<span class="chip{" on" if f in device else ""}">{_e(f)}</span>'
                    for f in adapter.get("features", ()))
    cpu = info.get("isFallbackAdapter") is True or str(info.get("adapter_type", "")).upper() == "CPU"
    facts += [("adapter", f"{_adapter_name(adapter)} ({adapter['backend']} backend)"
                          + ("; a CPU adapter: compare ratios within the run, not speeds" if cpu else "")
                          + (f"; kernel variants from the {run['tuning']} tuning table"
                             + (" (named by the run)" if NAMED_TUNING in info else "") if run.get("tuning") else "")),
              ("adapter info", _Html(f'<span class="note">{pairs}</span>')),
              ("features", _Html(f'<div class="chips">{chips}</div><span class="note">highlighted: enabled on the '
                                 "device</span>"))]
    rows = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts)
    limits = adapter.get("limits") or {}
    extra = ""
    if limits:
        extra += ("<details><summary>adapter limits</summary>"
                  + _table(["limit", "value"], [[k, v] for k, v in limits.items()]) + "</details>")
    if run.get("generated"):
        extra += (f"<details><summary>generated token ids ({len(run['generated'])})</summary><p class=\"mono\">"
                  f"{_e(' '.join(map(str, run['generated'])))}</p></details>")
    return _Html(f'<dl class="facts">{rows}</dl>{extra}')


def _headline(run: dict) -> _Html:
    cards = "".join(f'<div class="card"><div class="value">{_e(shown(run.get(key)))}</div>'
                    f'<div class="label">{_e(label)}</div></div>' for key, label, _, _, shown in HEADLINES)
    return _Html(f'<div class="cards">{cards}</div>')


def _routes(run: dict) -> _Html:
    ran = {phase: list(run.get("routes", {}).get(phase, ())) for phase in PHASES}
    names = list(dict.fromkeys(ran["prefill"] + ran["decode"]))
    rows = [[_Html(f"<code>{_e(name)}</code>"), *("\u2713" if name in ran[p] else "" for p in PHASES)]
            for name in names]
    return _Html(f'<div class="routes">{_table(["route (attested)", *PHASES], rows)}</div>')


def _rate(amount, ns) -> float | None:
    return amount / ns if amount and ns else None


def _phase_rows(run: dict, phase: str) -> list[dict]:
    return [row for row in run.get("kernels", ()) if row["phase"] == phase]


def _chart_labels(rows: list[dict]) -> list[str]:
    """Kernel names, with the route where one kernel serves two routes in the step."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["kernel"]] = counts.get(row["kernel"], 0) + 1
    return [row["kernel"] if counts[row["kernel"]] == 1 else f"{row['kernel']} ({row['route']})" for row in rows]


def _kernel_table(rows: list[dict]) -> _Html:
    body = [[_Html(f"<code>{_e(r['kernel'])}</code>"), _Html(f"<code>{_e(r['route'])}</code>"), r["dispatches"],
             _time(r["ns"]), _share(r["share"]), _num(_rate(r.get("bytes"), r["ns"]), 1),
             _num(_rate(r.get("flops"), r["ns"]), 1)] for r in rows]
    ns, moved = sum(r["ns"] for r in rows), sum(r.get("bytes", 0) for r in rows)
    flops = sum(r.get("flops", 0) for r in rows) if all("flops" in r for r in rows) else None
    total = ["whole step", "", sum(r["dispatches"] for r in rows), _time(ns), "100.0%",
             _num(_rate(moved, ns), 1), _num(_rate(flops, ns), 1)]
    return _table(["kernel", "route", "dispatches", "GPU time", "share of step", "GB/s", "GFLOP/s"], body, total=total,
                  text_columns=2)


def _shorten(name: str, chars: int) -> str:
    """At most `chars` characters, cut in the middle: a kernel's family leads its name and its variant
    (the tile or workgroup shape that tells two rows apart) ends it, so both ends stay."""
    if len(name) <= chars:
        return name
    tail = (chars - 1) * 2 // 5
    return name[:chars - 1 - tail] + "\u2026" + name[len(name) - tail:]


def _bars(items: list[tuple[str, float, str, str]], css: str, label: str, geometry: ChartGeometry) -> _Html:
    """A horizontal bar chart: (label, fraction of the track, value text, tooltip) per row, fractions in 0..1."""
    g = geometry
    top = AXIS_HEIGHT if g.axis else 2
    height = top + ROW_HEIGHT * len(items) + 4
    x0 = g.label_width + 10
    parts = [f'<svg viewBox="0 0 {g.width} {height}" width="{g.width}" '
             f'height="{height}" role="img" aria-label="{_e(label)}">']
    for tick in range(5 if g.axis else 0):
        x = x0 + g.track_width * tick / 4
        parts.append(f'<line class="grid" x1="{x:g}" y1="{top - 4}" x2="{x:g}" y2="{height}"/>'
                     f'<text class="axis" x="{x:g}" y="{top - 7}" text-anchor="middle">{25 * tick}%</text>')
    for i, (name, fraction, value, tip) in enumerate(items):
        y = top + ROW_HEIGHT * i
        shown = _shorten(name, g.label_chars)
        parts.append(f'<g><title>{_e(tip)}</title>'
                     f'<text x="{g.label_width}" y="{y + 14}" text-anchor="end">{_e(shown)}</text>'
                     f'<rect class="track" x="{x0}" y="{y + 3}" width="{g.track_width}" height="14"/>'
                     f'<rect class="bar {css}" data-label="{_e(name)}" x="{x0}" y="{y + 3}" '
                     f'width="{fraction * g.track_width:.3f}" height="14"/>'
                     f'<text x="{x0 + g.track_width + 8}" y="{y + 14}">{_e(value)}</text></g>')
    parts.append("</svg>")
    return _Html("".join(parts))


def _share_chart(rows: list[dict], phase: str) -> _Html:
    items = [(label, r["share"], _share(r["share"]),
              f"{r['kernel']} ({r['route']}): {_time(r['ns'])}, {_share(r['share'])} of the {phase}")
             for label, r in zip(_chart_labels(rows), rows)]
    return _bars(items, phase, f"each kernel's share of the {phase}", SHARE_CHART)


def _kernels(run: dict) -> _Html:
    if not run.get("kernels"):
        return _Html('<p class="note">Not profiled (no timestamp-query on this adapter, or --no-profile).</p>')
    what = {"prefill": f"the prefill of {run['options']['prompt']} tokens", "decode": "one decode step"}
    out = ['<p class="note">One profiled prefill and one profiled decode step, one pass per dispatch (the '
           'unprofiled figures above are the speed); a kernel\'s share is of its step\'s summed GPU time. '
           "GB/s and GFLOP/s: the bytes and flops the op's sizing counts, over the GPU time ('-' where it "
           "counts none).</p>"]
    for phase in PHASES:
        rows = _phase_rows(run, phase)
        if rows:
            out += [f"<h3>{_e(what[phase])}</h3>", _share_chart(rows, phase), _kernel_table(rows)]
    return _Html("".join(out))


def _run_section(run: dict, index: int | None, label: str) -> _Html:
    heading = f"<h2>{_e(f'Run {index}: {label}')}</h2>" if index is not None else ""
    anchor = f' id="run-{index}"' if index is not None else ""
    return _Html(f"<section{anchor}>{heading}{_headline(run)}"
                 f'<p class="note">Prefill tok/s: the prompt over the prefill\'s wall time; time to first token adds '
                 "the first id's readback; decode tok/s: the steps, submitted back to back, over their wall time (ids "
                 "read as the lengths below say); host ms per token: the host's share of a step (GPU not waited on); "
                 "all four unprofiled. GPU time of a decode step: one step's single pass between two timestamps "
                 "(median of up to 5; '-' without timestamp queries), its GPU work without the submits; of the "
                 "prefill: the same (median of 3), the prefill's wall time less this is the host's share.</p>"
                 f"{_header(run)}<h3>Routes that ran</h3>{_routes(run)}<h3>Per kernel</h3>{_kernels(run)}</section>")


def _time_and_share(row: dict) -> _Html:
    return _Html(f'{_e(_time(row["ns"]))}<br><span class="note">({_e(_share(row["share"]))})</span>')


def _versus(value, first) -> str:
    return f" ({value / first:.2f}x)" if value and first else ""


def _comparison(runs: list[dict], labels: list[str]) -> _Html:
    """Headline figures side by side (later runs also as a ratio to run 1), a chart per figure, and each
    kernel's time in every run."""
    rows = [[_Html(f'<a href="#run-{i}">{i}</a>'), label,
             *(shown(run.get(key)) + (_versus(run.get(key), runs[0].get(key)) if i > 1 else "")
               for key, _, _, _, shown in HEADLINES)]
            for i, (run, label) in enumerate(zip(runs, labels), 1)]
    table = _table(["run", "what ran", *(header for _, _, header, _, _ in HEADLINES)], rows, text_columns=2)
    out = [_Html(f'<div class="scroll">{table}</div>')]
    charts = []
    for key, name, _, better, shown in HEADLINES:
        values = [run.get(key) for run in runs]
        top = max((v for v in values if v), default=0)
        if not top:
            continue
        items = [(f"run {i}", (v or 0) / top, shown(v), f"{label}: {shown(v)} {name}")
                 for i, (v, label) in enumerate(zip(values, labels), 1)]
        charts.append(f"<div><h3>{_e(name)} <span class=\"note\">({_e(better)})</span></h3>"
                      f"{_bars(items, 'metric', name, METRIC_CHART)}</div>")
    out.append(f'<div class="charts">{"".join(charts)}</div><p class="note">Bars relative to the largest '
               "value of each figure.</p>")
    for phase in PHASES:
        per_run = [{(r["kernel"], r["route"]): r for r in _phase_rows(run, phase)} for run in runs]
        keys = sorted({k for table in per_run for k in table},
                      key=lambda k: -max(table[k]["share"] if k in table else 0 for table in per_run))
        if not keys:
            continue
        body = [[_Html(f"<code>{_e(kernel)}</code>"), _Html(f"<code>{_e(route)}</code>"),
                 *(_time_and_share(table[(kernel, route)]) if (kernel, route) in table else "-"
                   for table in per_run)] for kernel, route in keys]
        total = ["whole step", "", *(_time(sum(r["ns"] for r in table.values())) if table else "-"
                                     for table in per_run)]
        kernels = _table(["kernel", "route", *(f"run {i}" for i in range(1, len(runs) + 1))], body, total=total,
                         text_columns=2)
        out += [f"<h3>Per kernel, {_e(phase)}: GPU time (share of the step)</h3>",
                _Html(f'<div class="scroll">{kernels}</div>')]
    return _Html("".join(out))


def model_bench_html(runs: dict | list[dict], labels: list[str] | None = None, title: str | None = None) -> str:
    """One `bench model` report (the JSON `bench model` writes) as an HTML page, or several compared: a table
    and charts of their headline figures and per-kernel times, then each run in full. `labels` name the runs
    (default: model, depth, policy, prompt, backend and adapter)."""
    runs = [runs] if isinstance(runs, dict) else list(runs)
    if not runs:
        raise ValueError("model_bench_html needs at least one run")
    labels = list(labels) if labels is not None else [_run_label(run) for run in runs]
    if len(labels) != len(runs):
        raise ValueError(f"{len(labels)} labels for {len(runs)} runs")
    if len(runs) == 1:
        title = title or f"bench model: {labels[0]}"
        body = _run_section(runs[0], None, labels[0])
    else:
        title = title or f"bench model: {len(runs)} runs compared"
        body = (f"<section><h2>Comparison</h2>{_comparison(runs, labels)}</section>"
                + "".join(_run_section(run, i, label) for i, (run, label) in enumerate(zip(runs, labels), 1)))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body><main>"
            f"<h1>{_e(title)}</h1><p class=\"sub\">webgpu-llm-lab <code>bench model</code>: synthetic Q4 weights, "
            "prefill then greedy decode in one plan</p>"
            f"{body}</main></body></html>\n")


def write_model_bench_html(runs: dict | list[dict], path: str | Path, labels: list[str] | None = None,
                           title: str | None = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(model_bench_html(runs, labels, title), encoding="utf-8")
    return path


def peer_bench_html(report: dict) -> str:
    """A `bench compare --peer` report (checks/peer_bench.py) as two runs side by side: ours and the peer's,
    each with its medians, generated ids and the oracle's verdict on its logits."""
    o, runs, labels = report["options"], [], []
    verdicts = report.get("oracle") or {}
    for engine in ("ours", "peer"):
        side = report["engines"][engine]
        verdict = verdicts.get(engine)
        policy = o["policy"] if engine == "ours" else (f"{o['peer']} {o['flavour']} (int4 block "
                                                       f"{report['peer_build']['block_size']}, our weights)")
        oracle = None
        if verdict is not None:
            oracle = {"result": "passed" if verdict["passed"] else "failed", "tolerance": verdict["policy"]}
            oracle.update({k: verdict[k] for k in ("worst_sigma", "tolerance_sigma", "error") if k in verdict})
        runs.append({"options": {**o, "policy": policy, "batch": o["batch"] if engine == "ours" else 1},
                     "config": report["config"], "adapter": report["adapter"],
                     "result": oracle["result"] if oracle else "not checked", "oracle": oracle,
                     "prefill_tok_s": side["prefill_tok_s"], "decode_tok_s": side["decode_tok_s"],
                     "ttft_ms": 1e3 * side["prefill_s"], "generated": side["tokens"], "kernels": [], "routes": {}})
        labels.append("ours" if engine == "ours" else o["peer"])
    return model_bench_html(runs, labels, title=f"bench compare: {report['config']['name']}, {o['layers']} layers, "
                                                 f"ours vs {o['peer']}")


def write_peer_bench_html(report: dict, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(peer_bench_html(report), encoding="utf-8")
    return path
