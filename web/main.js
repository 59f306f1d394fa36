// Boots Pyodide from web/vendor once, installs the py_runtime wheel with micropip, and drives the Python
// entry points of py_runtime.page with plain JSON: describe() for the controls, check() for their values,
// main() for a run and judge() for the oracle's verdict. Every wait is bounded by a timeout; any failure
// is shown on the page and rejects window.__lab.done (the first run). Progress (stage, done, total,
// detail) arrives as plain values and is shown as one <progress> per stage.
import { loadPyodide } from "./vendor/pyodide/pyodide.mjs";
import { renderReport, renderLiveTokens, renderLiveAnswer, clearResults } from "./render.js";
import { renderControls, markControls, controlPairs } from "./controls.js";

const lab = (window.__lab = { state: "running", stage: "start", result: null, error: null, progress: {}, runs: 0 });
const statusBox = document.getElementById("status");
const runButton = document.getElementById("run");
const stopButton = document.getElementById("stop");
const downloadButton = document.getElementById("download");
const STOP_WAIT_SECONDS = 30;       // a Stop ends the run at its next progress report; this bounds the wait
const BOOT_STEPS = 5;

function setStage(stage) {
  lab.stage = stage;
  statusBox.className = "status running";
  statusBox.textContent = `${stage}…`;
}

function withTimeout(promise, seconds, what) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${seconds} s`)), seconds * 1000);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

// One <progress> per stage, updated as py_runtime reports (stage, done, total, detail JSON) as plain values.
const progressBars = new Map();
function showProgress(stage, done, total, detailJson = "") {
  const detail = detailJson ? JSON.parse(detailJson) : {};
  lab.progress[stage] = { done, total, ...(detail.text ? { text: detail.text } : {}) };
  let row = progressBars.get(stage);
  if (!row) {
    row = { text: document.createElement("span"), bar: document.createElement("progress") };
    const label = document.createElement("label");
    label.append(row.bar, " ", row.text);
    document.getElementById("progress").append(label);
    progressBars.set(stage, row);
  }
  row.bar.max = total;
  row.bar.value = done;
  row.text.textContent = `${stage}: ${done}/${total}` + (detail.text ? ` · ${detail.text}` : "");
  if (detail.tokens) renderLiveTokens(stage, detail.tokens);
  if (detail.answer !== undefined) renderLiveAnswer(detail.answer);
}

function clearProgress(keep = []) {
  for (const [stage, row] of progressBars) {
    if (keep.includes(stage)) continue;
    row.bar.parentElement.remove();
    progressBars.delete(stage);
    delete lab.progress[stage];
  }
}

// How the status box shows a report's result; a result outside this table is an error.
const RESULTS = {
  passed: { text: "PASS", cls: "pass" },
  failed: { text: "FAIL", cls: "fail" },
  "not checked": { text: "NOT CHECKED", cls: "unchecked" },
};

async function fetchJson(url) {
  const response = await fetch(url, { cache: "no-store" });
  if (!response.ok) throw new Error(`GET ${url}: HTTP ${response.status} (run scripts/setup.sh?)`);
  return response.json();
}

// Fetches an asset and checks it against the manifest's sha256, so a missing or stale file is
// named here instead of surfacing later as "File is not a zip file" from inside micropip.
async function verifyAsset(url, sha256) {
  const response = await fetch(url, { cache: "no-store" });
  if (!response.ok) throw new Error(`GET ${url}: HTTP ${response.status} (run scripts/setup.sh?)`);
  const digest = await crypto.subtle.digest("SHA-256", await response.arrayBuffer());
  const hex = Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
  if (hex !== sha256) throw new Error(`${url}: sha256 ${hex} does not match the manifest (${sha256})`);
}

async function boot() {
  showProgress("boot", 0, BOOT_STEPS);
  setStage("reading vendor/manifest.json");
  const manifest = await withTimeout(fetchJson("vendor/manifest.json"), 20, "manifest");
  const absolute = (url) => new URL(url, location.href).href;

  setStage("checking vendored wheels");
  await withTimeout(Promise.all([manifest.micropip, manifest.runtime].map((a) => verifyAsset(absolute(a.url), a.sha256))),
    30, "checking vendored wheels");
  showProgress("boot", 1, BOOT_STEPS);

  setStage(`loading Pyodide ${manifest.pyodide.version}`);
  const pyodide = await withTimeout(loadPyodide({ indexURL: absolute(manifest.pyodide.index_url) }), 90, "loadPyodide");
  // For interactive use from the console and profiling scripts; not enumerable, so window.__lab stays JSON.
  Object.defineProperty(lab, "pyodide", { value: pyodide, enumerable: false });
  showProgress("boot", 2, BOOT_STEPS);

  // loadPackage reports a failed download only through errorCallback and still resolves.
  setStage("loading micropip");
  const loadErrors = [];
  await withTimeout(pyodide.loadPackage(absolute(manifest.micropip.url), {
    messageCallback: () => {},
    errorCallback: (message) => loadErrors.push(message),
  }), 60, "loading micropip");
  if (loadErrors.length) throw new Error(`loading micropip failed: ${loadErrors.join("; ")}`);
  showProgress("boot", 3, BOOT_STEPS);

  setStage("installing py_runtime");
  const micropip = pyodide.pyimport("micropip");
  await withTimeout(micropip.install.callKwargs(absolute(manifest.runtime.url), { deps: false }), 60,
    "installing the py_runtime wheel");
  showProgress("boot", 4, BOOT_STEPS);
  const page = pyodide.pyimport("py_runtime.page");
  showProgress("boot", 5, BOOT_STEPS);
  return page;
}

// The URL's own keys (not the suite's options): kept as they are across runs.
const PAGE_KEYS = ["suite", "upload", "timeout"];
let page = null, schemas = null, suite = null, current = null, stopper = null;

function refuse(checked) {
  markControls(checked.errors);
  const messages = Object.entries(checked.errors).map(([key, message]) => `${key}: ${message}`);
  if (checked.page) messages.unshift(checked.page);
  return messages;
}

// One run of the current suite with these [key, text] pairs: the report rendered, then the oracle's verdict.
async function runOnce(pairs) {
  const query = new URLSearchParams(location.search);
  const runSeconds = Number(query.get("timeout") || 900);
  if (!(runSeconds > 0)) throw new Error(`URL option timeout must be a positive number of seconds, got ${query.get("timeout")}`);
  stopper = new AbortController();
  lab.state = "running";
  lab.runs += 1;
  lab.error = null;
  runButton.disabled = true;
  stopButton.disabled = false;
  downloadButton.disabled = true;
  clearProgress(["boot"]);
  clearResults();
  setStage(`running the ${suite} suite`);
  try {
    const running = page.main(JSON.stringify(pairs), showProgress, stopper.signal);
    const text = await withTimeout(running, runSeconds, `the ${suite} suite`).catch((error) => {
      stopper.abort();        // the runner stops at its next progress report
      throw error;
    });
    let report = JSON.parse(text);
    let summary = renderReport(report);
    if (report.oracle && report.oracle.verdict === "pending") {
      setStage("asking the host oracle");
      showProgress("oracle", 0, 1);
      report = JSON.parse(await page.judge(text, stopper.signal));
      showProgress("oracle", 1, 1, JSON.stringify({ text: report.oracle.verdict }));
      summary = renderReport(report);
    }
    const shown = RESULTS[report.result];
    if (!shown) throw new Error(`report result ${JSON.stringify(report.result)} is not one of ${Object.keys(RESULTS).join(", ")}`);
    const info = report.adapter.info;
    statusBox.className = `status done ${shown.cls}`;
    statusBox.textContent = `${shown.text}: ${summary} on ` +
      `${info.description || info.device || info.vendor || "unknown adapter"} (${info.vendor || "?"}, ${report.adapter.backend})`;
    lab.result = report;
    lab.state = "done";
    downloadButton.disabled = false;
    return report;
  } catch (error) {
    if (error && error.type === "RunStopped") {
      lab.state = "stopped";
      lab.error = null;
      statusBox.className = "status done unchecked";
      const why = String(error.message).trim().split("\n").pop().replace(/^[\w.]*RunStopped: /, "");
      statusBox.textContent = `STOPPED: ${why}; the GPU's buffers are released`;
      return null;
    }
    throw error;
  } finally {
    runButton.disabled = false;
    stopButton.disabled = true;
    stopper = null;
  }
}

function showError(error) {
  const message = error && error.message ? error.message : String(error);
  lab.error = message;
  lab.state = "error";
  statusBox.className = "status error";
  statusBox.textContent = `ERROR during ${lab.stage}: ${message}`;
  return message;
}

// The Run button: the controls' values, checked by Python; refused at the controls, or mirrored in the URL and run.
async function onRun() {
  const pairs = [["suite", suite], ...controlPairs()];
  const checked = JSON.parse(page.check(JSON.stringify(pairs)));
  const refused = refuse(checked);
  if (refused.length) {
    statusBox.className = "status error";
    statusBox.textContent = `REFUSED: ${refused.join("; ")}`;
    return;
  }
  const url = new URLSearchParams(location.search);
  const next = new URLSearchParams(PAGE_KEYS.filter((k) => url.has(k) && k !== "suite").map((k) => [k, url.get(k)]));
  if (suite !== schemas.page_suite) next.set("suite", suite);
  for (const [key, value] of controlPairs()) next.set(key, value);
  history.replaceState(null, "", `${location.pathname}${next.size ? "?" + next : ""}`);
  current = runOnce([...next]).catch(showError);
  await current;
}

// The Stop button: abort, then wait (bounded) for the run to reach its next progress report.
async function onStop() {
  if (!stopper) return;
  stopper.abort();
  stopButton.disabled = true;
  statusBox.textContent = "stopping…";
  const ended = await Promise.race([current.then(() => true, () => true),
    new Promise((resolve) => setTimeout(() => resolve(false), STOP_WAIT_SECONDS * 1000))]);
  if (!ended) showError(new Error(`the run did not stop within ${STOP_WAIT_SECONDS} s (a GPU wait is in flight); reload the page`));
}

function onControlChange() {
  const checked = JSON.parse(page.check(JSON.stringify([["suite", suite], ...controlPairs()])));
  refuse(checked);
}

async function main() {
  const query = new URLSearchParams(location.search);
  page = await boot();
  schemas = JSON.parse(page.describe());
  suite = query.get("suite") || schemas.page_suite;
  const pairs = [...query];
  const checked = JSON.parse(page.check(JSON.stringify(pairs)));
  if (checked.suite) {
    suite = checked.suite;
    renderControls(schemas, suite, pairs, { onChange: onControlChange });
  }
  runButton.addEventListener("click", onRun);
  stopButton.addEventListener("click", onStop);
  downloadButton.addEventListener("click", () => {
    const blob = new Blob([JSON.stringify(lab.result, null, 1)], { type: "application/json" });
    const link = Object.assign(document.createElement("a"), {
      href: URL.createObjectURL(blob), download: `webgpu-llm-lab-${lab.result.suite}-${Date.now()}.json` });
    link.click();
    URL.revokeObjectURL(link.href);
  });
  const refused = refuse(checked);
  if (refused.length) {
    lab.stage = "checking the URL's options";
    throw new Error(`refused: ${refused.join("; ")}`);
  }
  current = runOnce(pairs);
  return current;
}

lab.done = main().catch(async (error) => {
  const message = showError(error);
  runButton.disabled = !page || !schemas;
  // Headless runs without a driver (the GPU host) learn of the failure from this upload.
  const upload = new URLSearchParams(location.search).get("upload");
  if (upload) {
    await fetch(`/api/results/${encodeURIComponent(upload)}/error.txt`,
      { method: "POST", body: `ERROR during ${lab.stage}: ${message}` }).catch(() => {});
  }
  throw error;
});
