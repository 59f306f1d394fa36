// Renders the JSON report that py_runtime.page.main returns. Plain DOM, no framework.

export const el = (tag, attrs = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const c of children) node.append(c instanceof Node ? c : String(c));
  return node;
};

function table(headers, rows) {
  return el("table", {},
    el("thead", {}, el("tr", {}, ...headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, ...rows.map((cells) => el("tr", {}, ...cells.map((c) =>
      c instanceof Node ? c : el("td", {}, c))))));
}

function cell(text, cls) {
  return el("td", { class: cls }, text);
}

// The ids generated so far, per side ("decode", "a decode", ...), as the page reads them back.
const liveTokens = new Map();
export function renderLiveTokens(stage, tokens) {
  liveTokens.set(stage.replace(/ ?(prefill|decode)$/, "") || "generated", tokens);
  document.getElementById("live").replaceChildren(el("h2", {}, "Tokens as they arrive"),
    ...[...liveTokens].map(([side, ids]) => el("p", { class: "tokens" },
      el("strong", {}, side === "generated" ? `${ids.length} ids: ` : `${side}: ${ids.length} ids: `), ids.join(" "))));
}

// The answer's text so far, as the page reads the ids back (the chat view).
export function renderLiveAnswer(text) {
  document.getElementById("live").replaceChildren(el("h2", {}, "Answer as it arrives"),
    el("p", { class: "answer", id: "answer" }, text));
}

export function clearResults() {
  liveTokens.clear();
  for (const id of ["choice", "live", "verdict", "summary", "chart", "cases", "timings", "adapter"]) {
    document.getElementById(id).replaceChildren();
  }
}

// The page's renderers by the name a report declares (py_runtime.workloads: Workload.renderer).
// Each fills the page's sections and returns a one-line summary for the status box.
const RENDERERS = {
  generate: (report) => renderGenerate(report),
  chat: (report) => renderChat(report),
  compare: (report) => renderCompare(report),
  unary: (report) => {
    renderCases(report);
    renderTimings(report);
    return `${report.cases.filter((c) => c.passed).length}/${report.cases.length} unary checks`;
  },
  runtime: (report) => {
    renderRuntime(report);
    return "runtime-core checks";
  },
  q4: (report) => {
    renderQ4(report);
    return `${report.cases.length} Q4 cases run (outputs judged by the host oracle)`;
  },
  attention: (report) => {
    renderAttention(report);
    const steps = report.cases.reduce((n, c) => n + c.steps.length, 0);
    return `${report.cases.length} attention cases, ${steps} steps (outputs judged by the host oracle)`;
  },
  kernel_bench: (report) => {
    renderKernelBench(report);
    return `kernel bench (${report.rows.length} rows; streaming read ${report.stream_big_gbps.toFixed(0)} GB/s)`;
  },
  host_cost: (report) => {
    renderHostCost(report);
    return `host cost ${report[report.headline].host_us_per_dispatch.toFixed(2)} µs/dispatch (replay + params write)`;
  },
  elementwise: (report) => {
    renderElementwise(report);
    return `${report.cases.filter((c) => c.passed).length}/${report.cases.length} elementwise cases`;
  },
  model: (report) => {
    renderModel(report);
    const o = report.options;
    return `${report.config.name}, ${o.layers} layers, ${o.policy}: prompt ${o.prompt}, ${o.decode} greedy steps ` +
      "(logits judged by the transformers oracle)";
  },
  model_bench: (report) => {
    renderModelBench(report);
    const decode = report.decode_tok_s === null ? "-" : report.decode_tok_s.toFixed(1);
    return `${report.config.name}, ${report.options.layers} layers, ${report.options.policy}: prefill ` +
      `${report.prefill_tok_s.toFixed(1)} tok/s, decode ${decode} tok/s, TTFT ${report.ttft_ms.toFixed(1)} ms`;
  },
  peer_bench: (report) => {
    renderPeerBench(report);
    const r = report.ratio;
    return `${report.config.name}, ${report.options.layers} layers: ours vs ${report.options.peer} ` +
      `prefill x${r.prefill.toFixed(2)}, decode x${r.decode.toFixed(2)} (logits judged by the transformers oracle)`;
  },
  model_soak: (report) => {
    renderModelSoak(report);
    const o = report.options;
    return `${report.config.name}, ${o.layers} layers, ${o.policy}: ${o.steps} greedy steps twice, ` +
      (report.problems.length ? report.problems.join("; ") : "identical tokens, flat memory, the context's end refused");
  },
  tokenizer: (report) => {
    renderTokenizer(report);
    const tokens = report.cases.reduce((n, c) => n + c.tokens, 0);
    return `tokenizer: ${report.cases.length} vocabularies, ${tokens} tokens encoded (ids judged against tokenizers ` +
      "on the host)";
  },
  decoder_blocks: (report) => {
    renderDecoderBlocks(report);
    const steps = report.models.reduce((n, m) => n + m.steps.length, 0);
    return `decoder blocks: ${steps} steps over ${report.models.length} geometries` +
      (report.argmax ? `, ${report.argmax.cases.length} argmax cases` : "") + " (values judged by the host oracle)";
  },
};

// Renders any suite's report by its declared renderer; returns the status box's summary line.
export function renderReport(report) {
  const render = Object.hasOwn(RENDERERS, report.renderer) ? RENDERERS[report.renderer] : null;
  if (!render) {
    throw new Error(`no renderer ${JSON.stringify(report.renderer)} for suite ${JSON.stringify(report.suite)}; ` +
      `renderers: ${Object.keys(RENDERERS).join(", ")}`);
  }
  renderAdapter(report);
  return render(report);
}

// One row per case: what ran on which shapes, from which generator streams, into which artifacts.
// The page checks structure only (guards, unwritten outputs); the host oracle checks the values.
function renderElementwise(report) {
  const passed = report.cases.filter((c) => c.passed).length;
  const errors = Object.values(report.errors).filter((e) => e && e.type === "ValueError").length;
  document.getElementById("summary").replaceChildren(el("p", {},
    `${passed}/${report.cases.length} cases intact (guards poisoned, every output written) in `,
    `${report.wall_ms.toFixed(0)} ms; ${report.pipelines_created} pipelines; `,
    `${errors}/${Object.keys(report.errors).length} bad calls raised ValueError. `,
    "Values are checked on the host against float64 numpy (see the uploaded artifacts)."));
  const shapes = (c) => c.tensors.map((t) => `${t.role} ${t.dtype}[${t.shape.join(",")}]`).join(" ");
  const streams = (c) => c.tensors.filter((t) => t.stream !== null).map((t) => `${t.role}:${t.stream}`).join(" ");
  const rows = report.cases.map((c) => [c.kernel, shapes(c),
    c.dim === undefined ? "" : `dim ${c.dim}${c.keepdim ? ", keepdim" : ""}`, streams(c),
    c.tensors.map((t) => t.artifact).join(" "), c.workgroups.join("×"),
    c.tensors.reduce((n, t) => n + t.unwritten, 0), c.tensors.every((t) => t.guard_intact) ? "yes" : "NO",
    cell(c.passed ? "pass" : "FAIL", c.passed ? "pass" : "fail")]);
  document.getElementById("cases").replaceChildren(el("h2", {}, "Elementwise cases"),
    table(["kernel", "tensors", "reduce", "streams", "artifacts", "grid", "unwritten", "guards intact", "result"],
      rows));
}

function renderRuntime(report) {
  const errors = Object.entries(report.errors).map(([path, e]) => [path, e ? e.type : "NOT RAISED",
    e ? e.message.split("\n")[0].slice(0, 140) : ""]);
  const loss = report.device_loss;
  document.getElementById("summary").replaceChildren(
    el("h2", {}, "Runtime core"),
    table(["check", "result"], [
      ["pipelines/bind groups after step 1, step 2, a second plan", JSON.stringify(report.caching)],
      ["routes (mask)", `${report.attestation.routes.join(", ")} (${report.attestation.mask})`],
      ["device loss", loss.error_is_device_lost ? `reported (${loss.reason}), rebuilt` : "NOT REPORTED"],
    ]),
    el("h2", {}, "Error paths"), table(["path", "raised", "message"], errors));
  const rows = report.profile.rows.map((r) => [r.label, r.route, r.workgroups.join("×"), r.bytes, r.flops, r.ns,
    r.gbps === null ? "-" : r.gbps.toFixed(2), r.gflops === null ? "-" : r.gflops.toFixed(2)]);
  document.getElementById("timings").replaceChildren(el("h2", {}, "Profile (one pass per dispatch)"),
    table(["dispatch", "route", "grid", "bytes", "FLOPs", "ns", "GB/s", "GFLOP/s"], rows));
}

function renderQ4(report) {
  const rows = report.cases.flatMap((c) => c.runs.map((r) => [c.name, c.k, c.n_kv ? `${c.n}+2×${c.n_kv}` : c.n,
    c.group_size, r.rows, r.routes.join(", ")]));
  document.getElementById("cases").replaceChildren(el("h2", {}, "Q4 linear cases (attested routes)"),
    table(["case", "K", "N", "gs", "rows", "routes"], rows));
}

// One row per step: a case's prefill, then its decode in the same plan, with the route that ran.
function renderAttention(report) {
  const rows = report.cases.flatMap((c) => c.steps.map((s) => [c.name, `${c.heads}/${c.kv_heads}`, c.head_dim,
    s.tokens, s.pos, s.routes.join(", ")]));
  document.getElementById("cases").replaceChildren(el("h2", {}, "Attention steps (attested routes)"),
    table(["case", "Hq/Hkv", "D", "tokens", "from", "routes"], rows));
}

// A whole model: its geometry, each step of the one plan (prefill, then greedy decode) with its routes
// and the token it chose, and whether the free-running pass (no readback per step) chose the same.
function renderModel(report) {
  const c = report.config;
  const same = JSON.stringify(report.free_tokens) === JSON.stringify(report.tokens);
  document.getElementById("summary").replaceChildren(
    el("p", {}, `${c.name}: D ${c.hidden}, heads ${c.heads}/${c.kv_heads}×${c.head_dim}, F ${c.intermediate}, ` +
      `vocab ${c.vocab}, ${report.options.layers} layers; ${report.dispatches.recorded} dispatches recorded; ` +
      `built in ${report.build_s} s, run in ${report.wall_s} s.`),
    el("p", {}, `free-running pass (ids read every ${report.options.batch} steps): ` +
      `${report.free_tokens.join(" ")} — ${same ? "the same tokens" : "DIFFERENT tokens"}; ` +
      `checked in the page: ${report.checked_in_page}.`));
  const rows = report.steps.map((s, i) => [i, s.tokens, s.pos, report.tokens[i], s.routes.join(", ")]);
  document.getElementById("cases").replaceChildren(el("h2", {}, "Steps (one plan, resized; attested routes)"),
    table(["step", "tokens", "from", "greedy token", "routes"], rows));
}

// A long decode twice: each run's speed, the memory before and after, what was refused at the end.
function renderModelSoak(report) {
  const m = report.memory, mib = (bytes) => bytes === null ? "-" : (bytes / 1048576).toFixed(1);
  document.getElementById("summary").replaceChildren(
    table(["run", "decode tok/s", "seconds", "distinct tokens"], report.runs.map((r, i) =>
      [i + 1, r.decode_tok_s === null ? "-" : r.decode_tok_s.toFixed(1), r.decode_s, r.distinct_tokens])),
    table(["", "GPU buffers MiB", "host heap MiB"], [["before", mib(m.before.gpu_bytes), mib(m.before.host_heap_bytes)],
      ["after", mib(m.after.gpu_bytes), mib(m.after.host_heap_bytes)]]),
    el("p", {}, `tokens identical across the runs: ${report.tokens_identical ? "yes" : "NO"}; a step past the ` +
      `cache: ${report.context_end_refused ?? "NOT refused"}`));
}

// Both engines side by side: medians of alternating rounds, the ratio, and whether their tokens agree.
function renderPeerBench(report) {
  const o = report.options, e = report.engines, b = report.peer_build;
  const fmt = (v) => (v === null ? "-" : v.toFixed(1));
  document.getElementById("summary").replaceChildren(
    el("p", {}, `${report.config.name}, ${o.layers} layers, seed ${o.seed}: prompt ${o.prompt}, ${o.decode} greedy ` +
      `steps, ${o.trials} alternating rounds (medians). Peer: ONNX Runtime Web ${report.peer_info.ortVersion || ""} ` +
      `(${o.flavour}, ${o.share_device ? "our GPUDevice" : "its own device, no subgroups"}, peer_device ` +
      `${o.peer_device}), build ${b.key} ` +
      `(int4, block ${b.block_size}, ${b.io_dtype} I/O). ${report.measured}.`),
    table(["engine", "prefill tok/s", "decode tok/s", "prefill ms", "decode ms"],
      [["ours (" + o.policy + ")", fmt(e.ours.prefill_tok_s), fmt(e.ours.decode_tok_s),
        fmt(1e3 * e.ours.prefill_s), fmt(1e3 * e.ours.decode_s)],
       [o.peer, fmt(e.peer.prefill_tok_s), fmt(e.peer.decode_tok_s), fmt(1e3 * e.peer.prefill_s),
        fmt(1e3 * e.peer.decode_s)],
       ["ours / peer", `x${report.ratio.prefill.toFixed(2)}`, `x${report.ratio.decode.toFixed(2)}`, "", ""]]),
    el("p", {}, `Tokens agree at ${report.tokens_agree.same} of ${report.tokens_agree.of} steps. ` +
      "Both engines' logits go to the host oracle (transformers); the page alone does not judge them."));
  document.getElementById("cases").replaceChildren(el("h2", {}, "Generated ids"),
    table(["engine", "ids"], [["ours", e.ours.tokens.join(" ")], [o.peer, e.peer.tokens.join(" ")]]));
}

// A whole model's speed: the headline figures, then each kernel's share of a profiled prefill and decode step.
function renderModelBench(report) {
  const o = report.options, d = report.dispatches;
  document.getElementById("summary").replaceChildren(
    el("p", {}, `${report.config.name}, ${o.layers} layers, policy ${o.policy}: prompt ${o.prompt}, ${o.decode} ` +
      `${decodeKind(o)} steps (ids read every ${o.batch}); ${d.prefill} dispatches per prefill, ${d.decode} per ` +
      "decode step."),
    table(["prefill tok/s", "TTFT ms", "decode tok/s", "host ms/token", "GPU µs per prefill", "GPU µs per decode step"],
      [[report.prefill_tok_s.toFixed(1), report.ttft_ms.toFixed(1),
        report.decode_tok_s === null ? "-" : report.decode_tok_s.toFixed(1), report.host_ms_per_token.toFixed(3),
        report.prefill_span_us ? report.prefill_span_us.toFixed(1) : "-",
        report.decode_span_us ? report.decode_span_us.toFixed(1) : "-"]]),
    ...(report.decode_floor_us && report.decode_span_us ? [el("p", {}, `The decode step's floor as ${d.decode} ` +
      `dependent dispatches, each a streaming read of its bytes: ${report.decode_floor_us.toFixed(1)} µs ` +
      `(${(1e6 / report.decode_floor_us).toFixed(0)} tok/s); the step at ` +
      `${pct(report.decode_floor_us / report.decode_span_us)} of that pace.`)] : []));
  const rows = report.kernels.map((r) => [r.phase, r.kernel, r.route, r.dispatches, (r.ns / 1e3).toFixed(1),
    `${(100 * r.share).toFixed(1)}%`]);
  document.getElementById("cases").replaceChildren(el("h2", {}, "Per kernel (one profiled prefill and decode step)"),
    rows.length ? table(["phase", "kernel", "route", "dispatches", "µs", "share"], rows) : el("p", {}, "not profiled"));
  barChart("Decode step: share of GPU time per kernel", report.kernels.filter((r) => r.phase === "decode")
    .map((r) => ({ label: r.kernel, value: r.share, text: `${(100 * r.share).toFixed(1)}%` })));
}

// Kernel bench: per-pass rows, the decode-chain rows (one pass over weight copies larger than L2,
// beside a streaming read of the same bytes) with a chart of their ratio, the prefill rows against the
// arithmetic probes, or a decode step's table.
function renderKernelBench(report) {
  if (report.step) {
    const step = report.step;
    const rows = Object.entries(step.routes).map(([name, r]) => [name, r.dispatches, r.us.toFixed(1),
      r.gbps.toFixed(1), pct(r.ratio_same_stream), pct(r.ratio_big_stream), (1e6 / r.us).toFixed(0)]);
    document.getElementById("timings").replaceChildren(
      el("h2", {}, `One ${step.geometry} decode token: ${step.linears} linears, the swiglu and the RMSNorms in one pass`),
      table(["activations", "dispatches", "µs per token", "GB/s", "vs same stream", "vs big stream", "tok/s bound"], rows),
      el("p", {}, `the same bytes streamed the same way: ${step.stream_us.toFixed(1)} µs`));
    barChart("Decode step: GB/s", Object.entries(step.routes).map(([name, r]) =>
      ({ label: name, value: r.gbps, text: `${r.gbps.toFixed(0)} GB/s` })));
    return;
  }
  // (a skipped row, e.g. a forced route the adapter cannot run, says why)
  const rows = report.rows.map((r) => (r.skipped ? [r.case, r.route, r.rows, `skipped: ${r.skipped}`, "", "", "", ""] :
    [r.case, r.route, r.rows, (r.ns / 1000).toFixed(1), r.gbps.toFixed(1), r.gflops.toFixed(1), pct(r.ratio_same_bytes),
      pct(r.ratio_big_stream)]));
  const parts = [el("h2", {}, "Kernel benchmark, one profiled pass per dispatch (timestamp queries)"),
    table(["case", "route", "M", "µs", "GB/s", "GFLOP/s", "vs stream (same bytes)", "vs stream (big)"], rows)];
  const chained = report.rows.filter((r) => r.chain_ns !== undefined);
  if (chained.length) {
    parts.push(el("h2", {}, "Decode chain: one pass, back to back over weight copies (per dispatch)"),
      table(["case", "copies", "µs", "GB/s", "stream µs", "vs same", "vs big", "stream+store µs", "vs stream+store"],
        chained.map((r) => [r.case, r.chain_copies, (r.chain_ns / 1000).toFixed(2), r.chain_gbps.toFixed(1),
          (r.chain_stream_ns / 1000).toFixed(2), pct(r.chain_ratio_same_bytes), pct(r.chain_ratio_big_stream),
          (r.chain_stream_store_ns / 1000).toFixed(2), pct(r.chain_ratio_stream_store)])));
    barChart("Decode chain: % of a streaming read of the same bytes", chained.map((r) =>
      ({ label: r.case, value: r.chain_ratio_same_bytes, text: pct(r.chain_ratio_same_bytes) })));
  }
  if (report.probes) {
    // Prefill rows as arithmetic (2 M N K ops), against the probe of their instruction from the same run.
    const probes = report.probes;
    const gemms = report.rows.filter((r) => r.probe);
    const share = (r) => r.flops / r.ns / 1e3 / probes[r.probe].tops;
    const prefill = gemms.map((r) => [r.case, r.kernel, r.rows, (r.ns / 1000).toFixed(1),
      (r.flops / r.ns / 1e3).toPrecision(3), `${pct(share(r))} of ${r.probe}`,
      r.quantize_ns === undefined ? "" : (r.quantize_ns / 1000).toFixed(1)]);
    parts.push(el("h2", {}, "Prefill arithmetic: T ops/s against the probe of the GEMM's instruction"),
      el("p", {}, Object.entries(probes).map(([kind, p]) => `${kind} probe ${p.tops.toPrecision(3)} T ops/s`).join(", ")),
      table(["case", "kernel", "M", "µs", "T ops/s", "vs probe", "quantize µs"], prefill));
    // (the page has one chart: the decode chain's where there is one)
    if (!chained.length) {
      barChart("Prefill: % of the probe of each GEMM's instruction", gemms.map((r) =>
        ({ label: r.case, value: share(r), text: `${pct(share(r))} of ${r.probe}` })));
    }
  }
  document.getElementById("timings").replaceChildren(...parts);
}

function renderHostCost(report) {
  const ways = { naive: "naive", replay: "replay", replay_upload: "replay + params write (headline)" };
  const rows = Object.entries(ways).map(([k, name]) => [name, report[k].host_us_per_dispatch.toFixed(3),
    report[k].host_us_per_step.toFixed(1), report[k].median_us_per_step.toFixed(1),
    report[k].p90_us_per_step.toFixed(1), report[k].steps]);
  const b = report.replay_upload.breakdown;
  const where = b ? `replay + params write, per step: upload ${b.upload_us_per_step.toFixed(1)} µs, encode ` +
    `${b.encode_us_per_step.toFixed(1)} µs, finish ${b.finish_us_per_step.toFixed(1)} µs, submit ` +
    `${b.submit_us_per_step.toFixed(1)} µs, Python and FFI ${b.rest_us_per_step.toFixed(1)} µs` : "";
  document.getElementById("summary").replaceChildren(el("h2", {}, `Host cost, ${report.dispatches}-dispatch plan`),
    table(["encoding", "host µs / dispatch (mean)", "µs / step mean", "median", "p90", "steps"], rows),
    el("p", {}, `replay output bit-identical to naive: ${report.bit_identical}; replay path checks passed: ` +
      `${report.replay_path.passed}; speed-up ${report.speedup.toFixed(1)}×`),
    el("p", {}, where));
}

// Per vocabulary: load and encode speed where the page runs, round trips; then every sample's ids.
function renderTokenizer(report) {
  const rows = report.cases.map((c) => [c.vocabulary, c.vocab_size, c.merges, c.load_ms.toFixed(0),
    c.tokens, c.cold_tok_s.toFixed(0), c.warm_tok_s.toFixed(0),
    `${c.round_trips.filter(Boolean).length}/${c.round_trips.length}`, c.chat.round_trip ? "yes" : "NO"]);
  document.getElementById("summary").replaceChildren(el("h2", {}, "Tokenizer (pure Python)"),
    table(["vocabulary", "ids", "merges", "load ms", "tokens", "encode tok/s (cold)", "tok/s (warm: words cached)",
      "round trips", "chat round trip"], rows),
    el("p", {}, "The ids are judged on the host against the tokenizers package on the same tokenizer.json."));
  const samples = report.cases.flatMap((c) => c.strings.map((s, i) => [c.vocabulary,
    JSON.stringify(s).slice(0, 60), c.ids[i].length, c.ids[i].slice(0, 16).join(" ")]));
  document.getElementById("cases").replaceChildren(el("h2", {}, "Samples"),
    table(["vocabulary", "text", "tokens", "first ids"], samples));
}

function renderAdapter(report) {
  const { info, features, limits, backend } = report.adapter;
  // report.tuning: the table that picked the kernel variants (info.tuning_table where the run named it)
  const rows = [["backend", backend], ...(report.tuning ? [["tuning table", report.tuning]] : []),
    ...Object.entries(info), ["features", features.join(", ")],
    ...Object.entries(limits)];
  const list = el("dl");
  for (const [k, v] of rows) list.append(el("dt", {}, k), el("dd", {}, String(v)));
  document.getElementById("adapter").replaceChildren(el("h2", {}, "Adapter"), list);
}

function renderCases(report) {
  const passed = report.cases.filter((c) => c.passed).length;
  document.getElementById("summary").replaceChildren(el("p", {},
    `${passed}/${report.cases.length} cases passed in ${report.wall_ms.toFixed(0)} ms; `,
    `timestamps ${report.timestamps.profiled ? (report.timestamps.quantized ? "QUANTIZED" : "unquantized") : "off"}; `,
    `${report.pipelines_created} pipelines created.`));
  const rows = report.cases.map((c) => [c.kernel, c.length, c.workgroups.join("×"), c.checked,
    c.worst_error_ratio.toFixed(3), c.unwritten, c.tail_intact ? "yes" : "NO",
    cell(c.passed ? "pass" : "FAIL", c.passed ? "pass" : "fail")]);
  document.getElementById("cases").replaceChildren(el("h2", {}, "Checks (error / allowed, 1.0 = at the budget)"),
    table(["kernel", "length", "grid", "checked", "worst err/allowed", "unwritten", "tail intact", "result"], rows));
}

function renderTimings(report) {
  if (!report.timings.length) return;
  const rows = report.timings.map((t) => [t.kernel, t.length, t.workgroups.join("×"), t.ns,
    t.gbps === null ? "-" : t.gbps.toFixed(2)]);
  document.getElementById("timings").replaceChildren(el("h2", {}, "Timestamp-query timings"),
    table(["kernel", "length", "grid", "ns", "GB/s"], rows));
  renderChart(report);
}

// Bar chart: GPU time per unary kernel at the largest length checked.
function renderChart(report) {
  const longest = Math.max(...report.timings.map((t) => t.length));
  const bars = report.timings.filter((t) => t.length === longest && t.kernel !== "fill_uniform")
    .map((t) => ({ label: t.kernel, value: t.ns, text: `${(t.ns / 1000).toFixed(1)} µs` }));
  if (bars.length) barChart(`GPU time per kernel at length ${longest.toLocaleString()}`, bars);
}

// How a model run's decode picked its tokens (report.py's decode_kind): greedy, or sampled with its settings.
function decodeKind(o) {
  const s = o.sampling;
  return s ? `sampled (temperature ${s.temperature}, top-k ${s.top_k}, top-p ${s.top_p}, seed ${s.seed})` : "greedy";
}

// A ratio as a percentage (a decimal below 10%: CPU adapters' ratios are small).
function pct(x) {
  return x === null || x === undefined ? "-" : `${(100 * x).toFixed(x < 0.1 ? 1 : 0)}%`;
}

// A horizontal bar chart of [{label, value, text}] into #chart. The label column is as wide as the longest
// label once drawn (kernel names run to 50 characters), each bar's full label and value its tooltip.
function barChart(title, bars) {
  const track = 460, valueRoom = 150, barH = 18, gap = 4, top = 8;
  const max = Math.max(...bars.map((b) => b.value), 1e-12);
  const svgNS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(svgNS, "svg");
  const height = top + bars.length * (barH + gap);
  svg.setAttribute("height", height);
  const labels = bars.map((b, i) => {
    const label = document.createElementNS(svgNS, "text");
    label.setAttribute("y", top + i * (barH + gap) + 13); label.textContent = b.label;
    svg.append(label);
    return label;
  });
  document.getElementById("chart").replaceChildren(el("h2", {}, title), svg);
  const left = Math.ceil(Math.max(0, ...labels.map((l) => l.getComputedTextLength()))) + 10;
  svg.setAttribute("width", left + track + valueRoom);
  svg.setAttribute("viewBox", `0 0 ${left + track + valueRoom} ${height}`);   // narrower windows scale it down
  bars.forEach((b, i) => {
    const y = top + i * (barH + gap);
    const w = Math.max(1, (track * b.value) / max);
    const tip = document.createElementNS(svgNS, "title");
    tip.textContent = `${b.label}: ${b.text}`;
    const rect = document.createElementNS(svgNS, "rect");
    rect.setAttribute("x", left); rect.setAttribute("y", y); rect.setAttribute("width", w);
    rect.setAttribute("height", barH); rect.setAttribute("fill", b.color || "#54aeff");
    rect.append(tip);
    const value = document.createElementNS(svgNS, "text");
    value.setAttribute("x", left + w + 6); value.setAttribute("y", y + 13);
    value.textContent = b.text;
    svg.append(rect, value);
  });
}

// Decoder blocks: per geometry, each step of the resized plan (S, start position) with its routes
// and the page's structural checks; argmax cases with the GPU index and the page's pure-Python one.
function renderDecoderBlocks(report) {
  const sum = (values) => values.reduce((a, b) => a + b, 0);
  const stepRows = report.models.flatMap((m) => m.steps.map((s) => {
    const intact = Object.values(s.guard_intact).every(Boolean) && s.status_guard_intact && s.res_a_spare_row_intact;
    const ok = intact && sum(Object.values(s.unwritten)) === 0 &&
      JSON.stringify(s.status) === JSON.stringify(s.expected_status);
    return [m.name, s.seq, s.pos, s.routes.join(", "), sum(Object.values(s.unwritten)), intact ? "yes" : "NO",
      `${s.status.filter((v) => v === 1).length}/${s.seq}`, cell(ok ? "pass" : "FAIL", ok ? "pass" : "fail")];
  }));
  const kernels = report.models.map((m) => [m.name, `D ${m.hidden}, heads ${m.q_heads}/${m.kv_heads}×${m.head_dim}, ` +
    `F ${m.ffn}, RoPE ${m.layout}${m.llama3_scaling ? " + llama3 scaling" : ""}, eps ${m.eps}`,
    Object.values(m.kernels).join(", ")]);
  document.getElementById("summary").replaceChildren(
    el("p", {}, `${report.wall_ms.toFixed(0)} ms; subgroup route ${report.subgroups ? "run" : "not available"}; `,
      `checked in the page: ${report.checked_in_page}.`),
    table(["geometry", "shape", "norm kernels"], kernels));
  const sections = [el("h2", {}, "Steps (one plan per geometry, resized)"),
    table(["geometry", "S", "pos", "routes", "unwritten", "guards intact", "ids out of range", "result"], stepRows)];
  if (report.argmax) {
    const rows = report.argmax.cases.map((c) => [c.kind, c.n, c.blocks, c.index, c.expected_in_page,
      cell(c.index === c.expected_in_page ? "pass" : "FAIL", c.index === c.expected_in_page ? "pass" : "fail")]);
    sections.push(el("h2", {}, "Argmax (ties to the lowest index, NaN above all)"),
      table(["case", "n", "blocks", "GPU index", "page index", "result"], rows));
  }
  document.getElementById("cases").replaceChildren(...sections);
  if (report.timings.length) {
    const rows = report.timings.map((t) => [t.model, t.seq, t.label, t.route, t.workgroups.join("×"), t.bytes, t.ns,
      t.gbps === null ? "-" : t.gbps.toFixed(2)]);
    document.getElementById("timings").replaceChildren(el("h2", {}, "Timestamp-query timings (first step)"),
      table(["geometry", "S / n", "dispatch", "route", "grid", "bytes", "ns", "GB/s"], rows));
  }
}

// ---- The model views ----

const textCell = (text) => el("td", { class: "text" }, text);
const fixed = (x, digits = 1) => (x === null || x === undefined ? "-" : x.toFixed(digits));

// What ran, and why these sizes (size=auto picks from the adapter).
function renderChoice(report) {
  const o = report.options, c = report.config;
  const software = report.choice.size === "small" && report.choice.why.includes("CPU");
  document.getElementById("choice").replaceChildren(el("p", { class: "choice" },
    el("strong", {}, `${c.name}, ${o.layers} layers`),
    ` (D ${c.hidden}, heads ${c.heads}/${c.kv_heads}×${c.head_dim}, F ${c.intermediate}, vocab ${c.vocab}), ` +
    `prompt ${o.prompt} tokens, ${o.decode} greedy steps, seed ${o.seed}, synthetic Q4 weights. ` +
    `Size ${report.choice.size}: ${report.choice.why}` +
    (report.choice.filled.length ? ` (chosen by size: ${report.choice.filled.join(", ")}).` : ".") +
    (software ? " A CPU adapter's speed is for correctness only: compare ratios from one run, not absolute figures." : "")));
}

// The oracle's verdict: PASSED only where the dev server's transformers oracle judged the logits.
function renderVerdict(report) {
  const oracle = report.oracle;
  const box = el("div", { class: `verdict ${oracle.verdict === "passed" ? "pass" : oracle.verdict === "failed" ? "fail" : "unchecked"}` });
  if (oracle.verdict === "pending") {
    box.append("Oracle (HF transformers, float64, on the dev server): checking…");
  } else if (oracle.verdict === "not checked") {
    box.append(`Oracle: NOT CHECKED: ${oracle.reason}`);
  } else {
    box.append(`Oracle (HF transformers, float64, on the dev server): ${oracle.verdict === "passed" ? "PASSED" : "FAILED"}`);
  }
  const rows = (oracle.runs || []).map((r) => [r.label, r.verdict, r.tokens_checked ?? "-",
    (r.logits_checked || []).join(", "), r.worst_sigma === undefined ? "-" : `${r.worst_sigma.toPrecision(3)} σ`,
    r.tolerance_sigma === undefined ? "-" : `${r.tolerance_sigma.toPrecision(3)} σ`,
    (r.near_ties || []).length, (r.failures || []).join("; ") || r.reason || ""]);
  const parts = [box];
  if (rows.length) {
    parts.push(table(["run", "verdict", "tokens checked", "logits at steps", "max logit error", "tolerance",
      "near ties", "failures"], rows));
  }
  document.getElementById("verdict").replaceChildren(...parts);
}

function kernelTable(kernels) {
  return table(["phase", "kernel", "route", "dispatches", "µs", "share of step"], kernels.map((r) =>
    [r.phase, r.kernel, r.route, r.dispatches, (r.ns / 1e3).toFixed(1), `${(100 * r.share).toFixed(1)}%`]));
}

function renderGenerate(report) {
  renderChoice(report);
  renderVerdict(report);
  const o = report.options;
  document.getElementById("summary").replaceChildren(el("h2", {}, "Speed"),
    table(["prefill tok/s", "time to first token", "decode tok/s", "host ms / decode step", "policy", "position"],
      [[fixed(report.prefill_tok_s), `${fixed(report.ttft_ms)} ms`, fixed(report.decode_tok_s),
        fixed(report.host_ms_per_token, 2), o.policy, report.position_on_gpu ? "on the GPU" : "on the host"]]),
    el("p", {}, `Built in ${report.build_s} s (pipelines and weights), ${report.dispatches_recorded} dispatches recorded ` +
      `in one plan; decode ids read back every ${o.batch} steps.`));
  document.getElementById("cases").replaceChildren(
    el("h2", {}, `Generated tokens (${report.tokens.length})`), el("p", { class: "tokens" }, report.tokens.join(" ")),
    el("h2", {}, "Routes that ran (attested)"),
    table(["phase", "routes"], [["prefill", textCell(report.routes.prefill.join(", "))],
      ["decode", textCell(report.routes.decode.join(", "))]]));
  const decode = report.kernels.filter((r) => r.phase === "decode");
  if (decode.length) {
    barChart("Decode step: each kernel's share of GPU time", decode.map((r) =>
      ({ label: r.kernel, value: r.share, text: `${(100 * r.share).toFixed(1)}% · ${(r.ns / 1e3).toFixed(1)} µs` })));
  }
  document.getElementById("timings").replaceChildren(el("h2", {}, "Per kernel (one profiled prefill and decode step)"),
    report.kernels.length ? kernelTable(report.kernels) : el("p", {}, `not profiled: ${report.unprofiled}`));
  return `${report.config.name}, ${o.layers} layers, ${o.policy}: decode ${fixed(report.decode_tok_s)} tok/s, ` +
    `prefill ${fixed(report.prefill_tok_s)} tok/s, TTFT ${fixed(report.ttft_ms)} ms; oracle ${report.oracle.verdict}`;
}

// "greedy", or the sampler's options (models/generation.py reports one or the other).
const sampling = (s) => (s === "greedy" || !s ? "greedy" :
  `sampled: temperature ${s.temperature}, top-k ${s.top_k}, top-p ${s.top_p}, seed ${s.seed}`);

function renderChat(report) {
  const o = report.options;
  const c = report.config;
  document.getElementById("live").replaceChildren(el("h2", {}, "Answer"),
    el("p", { class: "answer", id: "answer" }, report.text),
    el("p", {}, report.stopped ? "Ended at an end-of-turn token." : `Ended after ${o.steps} steps (no end token yet).`));
  document.getElementById("summary").replaceChildren(el("h2", {}, "Speed"),
    table(["file", "load (s)", "prefill tok/s", "time to first token", "decode tok/s", "policy", "decoding"],
      [[`${report.file.name} (${(report.file.bytes / 1e6).toFixed(1)} MB)`, fixed(report.load_s + report.open_s, 2),
        fixed(report.prefill_tok_s), `${fixed(1000 * report.prefill_s)} ms`, fixed(report.decode_tok_s, 2), o.policy,
        sampling(report.sampling)]]),
    el("p", {}, `${c.name}: ${c.layers} layers, hidden ${c.hidden}, ${c.heads} heads over ${c.kv_heads} KV heads, ` +
      `vocab ${c.vocab}; prompt ${report.prompt_ids.length} tokens${o.chat ? " (chat template)" : ""}; ids read back ` +
      `every ${o.batch} steps.`));
  document.getElementById("cases").replaceChildren(
    el("h2", {}, `Prompt ids (${report.prompt_ids.length})`), el("p", { class: "tokens" }, report.prompt_ids.join(" ")),
    el("h2", {}, `Generated ids (${report.generated_ids.length})`),
    el("p", { class: "tokens" }, report.generated_ids.join(" ")));
  return `${c.name}: decode ${fixed(report.decode_tok_s, 2)} tok/s, prefill ${fixed(report.prefill_tok_s)} tok/s; ` +
    `${report.ids.length} tokens, not checked in the page`;
}

function renderCompare(report) {
  renderChoice(report);
  renderVerdict(report);
  const a = report.sides.a, b = report.sides.b;
  const ratio = (x, y) => (x && y ? `${(y / x).toFixed(2)}×` : "-");
  const agree = report.tokens_agree;
  document.getElementById("summary").replaceChildren(el("h2", {}, `a (${a.setting}) against b (${b.setting}), ` +
    `alternating over ${report.options.rounds} rounds (medians)`),
    table(["", `a: ${a.setting}`, `b: ${b.setting}`, "b / a"], [
      ["prefill tok/s", fixed(a.prefill_tok_s), fixed(b.prefill_tok_s), ratio(a.prefill_tok_s, b.prefill_tok_s)],
      ["time to first token (ms)", fixed(a.ttft_ms), fixed(b.ttft_ms), ratio(a.ttft_ms, b.ttft_ms)],
      ["decode tok/s", fixed(a.decode_tok_s), fixed(b.decode_tok_s), ratio(a.decode_tok_s, b.decode_tok_s)],
      ["decode tok/s per round", a.rounds_decode_tok_s.map((x) => fixed(x)).join(", "),
        b.rounds_decode_tok_s.map((x) => fixed(x)).join(", "), ""],
      ["same tokens every round", a.tokens_repeat ? "yes" : "NO", b.tokens_repeat ? "yes" : "NO", ""],
      ["position between steps", a.engine ? "-" : a.position_on_gpu ? "GPU" : "host",
        b.engine ? "-" : b.position_on_gpu ? "GPU" : "host", ""],
    ]),
    el("p", { class: "tokens" }, `Tokens agree at ${agree.same} of ${agree.of} positions` +
      (agree.first_difference === null ? " (identical)." : `; first difference at step ${agree.first_difference}.`)),
    el("p", { class: "tokens" }, `a: ${a.tokens.join(" ")}`), el("p", { class: "tokens" }, `b: ${b.tokens.join(" ")}`),
    ...(b.engine ? [el("p", {}, `Side b is a peer engine: ${b.setting} on ` +
      `${b.share_device ? "our GPUDevice" : "a device of its own without subgroups"}, build ${b.peer_build.key} ` +
      `(our Q4 levels and scales, int4 block ${b.peer_build.block_size}). Its prefill is timed to its first id on ` +
      "the host (its time to first token); it has no routes or kernel timings here; the oracle judges it with " +
      "the int8x tolerance.")] : []));
  const routeRows = ["prefill", "decode"].map((phase) => [phase,
    textCell(report.routes_differ[phase].only_a.join(", ") || "-"),
    textCell(report.routes_differ[phase].only_b.join(", ") || "-")]);
  const deltas = report.kernel_deltas.map((r) => [r.phase, r.kernel, fixed(r.a_us), fixed(r.b_us),
    r.delta_us === null ? (r.a_us === null ? "only b" : "only a") : `${r.delta_us > 0 ? "+" : ""}${r.delta_us.toFixed(1)}`,
    r.a_route || r.b_route]);
  document.getElementById("cases").replaceChildren(el("h2", {}, "Routes that differ"),
    table(["phase", `only in a (${a.setting})`, `only in b (${b.setting})`], routeRows),
    el("h2", {}, "Per kernel: GPU µs of one profiled step, b − a"),
    deltas.length ? table(["phase", "kernel", "a µs", "b µs", "b − a µs", "route"], deltas) :
      el("p", {}, `not profiled: ${report.unprofiled}`));
  const decode = report.kernel_deltas.filter((r) => r.phase === "decode");
  if (decode.length) {
    barChart("Decode step: GPU µs per kernel, a then b", decode.flatMap((r) => [
      ...(r.a_us === null ? [] : [{ label: `${r.kernel} · a`, value: r.a_us, text: `${r.a_us.toFixed(1)} µs`, color: "#54aeff" }]),
      ...(r.b_us === null ? [] : [{ label: `${r.kernel} · b`, value: r.b_us, text: `${r.b_us.toFixed(1)} µs`, color: "#d4a72c" }]),
    ]));
  }
  return `${report.config.name}, ${report.options.layers} layers: decode ${fixed(a.decode_tok_s)} (${a.setting}) vs ` +
    `${fixed(b.decode_tok_s)} (${b.setting}) tok/s, tokens agree ${agree.same}/${agree.of}; oracle ${report.oracle.verdict}`;
}
