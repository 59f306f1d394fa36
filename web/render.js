// Renders the JSON report that py_runtime.page.main returns. Plain DOM, no framework.

const el = (tag, attrs = {}, ...children) => {
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

// Renders any suite's report; returns a one-line summary for the status box.
export function renderReport(report) {
  renderAdapter(report);
  if (report.suite === "unary") {
    renderCases(report);
    renderTimings(report);
    return `${report.cases.filter((c) => c.passed).length}/${report.cases.length} unary checks`;
  }
  if (report.suite === "runtime") {
    renderRuntime(report);
    return "runtime-core checks";
  }
  if (report.suite === "host_cost") {
    renderHostCost(report);
    return `host cost ${report.replay.host_us_per_dispatch.toFixed(2)} µs/dispatch (replay)`;
  }
  throw new Error(`no renderer for suite ${report.suite}`);
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

function renderHostCost(report) {
  const rows = ["naive", "replay"].map((k) => [k, report[k].host_us_per_dispatch.toFixed(3),
    report[k].host_us_per_step.toFixed(1), report[k].steps]);
  document.getElementById("summary").replaceChildren(el("h2", {}, `Host cost, ${report.dispatches}-dispatch plan`),
    table(["encoding", "host µs / dispatch", "host µs / step", "steps"], rows),
    el("p", {}, `replay output bit-identical to naive: ${report.bit_identical}; speed-up ${report.speedup.toFixed(1)}×`));
}

function renderAdapter(report) {
  const { info, features, limits, backend } = report.adapter;
  const rows = [["backend", backend], ...Object.entries(info), ["features", features.join(", ")],
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
  const bars = report.timings.filter((t) => t.length === longest && t.kernel !== "fill_uniform");
  if (!bars.length) return;
  const width = 640, barH = 18, gap = 4, left = 130, top = 8;
  const max = Math.max(...bars.map((b) => b.ns), 1);
  const svgNS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(svgNS, "svg");
  svg.setAttribute("width", width);
  svg.setAttribute("height", top + bars.length * (barH + gap));
  bars.forEach((b, i) => {
    const y = top + i * (barH + gap);
    const w = Math.max(1, ((width - left - 90) * b.ns) / max);
    const label = document.createElementNS(svgNS, "text");
    label.setAttribute("x", 0); label.setAttribute("y", y + 13); label.textContent = b.kernel;
    const rect = document.createElementNS(svgNS, "rect");
    rect.setAttribute("x", left); rect.setAttribute("y", y); rect.setAttribute("width", w);
    rect.setAttribute("height", barH); rect.setAttribute("fill", "#54aeff");
    const value = document.createElementNS(svgNS, "text");
    value.setAttribute("x", left + w + 6); value.setAttribute("y", y + 13);
    value.textContent = `${(b.ns / 1000).toFixed(1)} µs`;
    svg.append(label, rect, value);
  });
  document.getElementById("chart").replaceChildren(
    el("h2", {}, `GPU time per kernel at length ${longest.toLocaleString()}`), svg);
}
