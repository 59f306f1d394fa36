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

export function renderAdapter(report) {
  const { info, features, limits, backend } = report.adapter;
  const rows = [["backend", backend], ...Object.entries(info), ["features", features.join(", ")],
    ...Object.entries(limits)];
  const list = el("dl");
  for (const [k, v] of rows) list.append(el("dt", {}, k), el("dd", {}, String(v)));
  document.getElementById("adapter").replaceChildren(el("h2", {}, "Adapter"), list);
}

export function renderCases(report) {
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

export function renderTimings(report) {
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
