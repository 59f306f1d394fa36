// Boots Pyodide from web/vendor, installs the py_runtime wheel with micropip, and calls one Python
// entry point (py_runtime.page.main) with the URL's query as plain JSON. Every stage is bounded
// by a timeout, and any failure is shown on the page and rejects window.__lab.done. Progress
// (stage, done, total) arrives as plain values and is shown as one <progress> per stage.
import { loadPyodide } from "./vendor/pyodide/pyodide.mjs";
import { renderReport } from "./render.js";

const lab = (window.__lab = { state: "running", stage: "start", result: null, error: null, progress: {} });
const statusBox = document.getElementById("status");

function setStage(stage) {
  lab.stage = stage;
  statusBox.textContent = `${stage}…`;
}

function withTimeout(promise, seconds, what) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${seconds} s`)), seconds * 1000);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

// One <progress> per stage, updated as py_runtime reports (stage, done, total) as plain values.
const progressBars = new Map();
function showProgress(stage, done, total) {
  lab.progress[stage] = { done, total };
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
  row.text.textContent = `${stage}: ${done}/${total}`;
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

async function main() {
  const query = new URLSearchParams(location.search);
  const runSeconds = Number(query.get("timeout") || 900);
  if (!(runSeconds > 0)) throw new Error(`URL option timeout must be a positive number of seconds, got ${query.get("timeout")}`);

  setStage("reading vendor/manifest.json");
  const manifest = await withTimeout(fetchJson("vendor/manifest.json"), 20, "manifest");
  const absolute = (url) => new URL(url, location.href).href;

  setStage("checking vendored wheels");
  await withTimeout(Promise.all([manifest.micropip, manifest.runtime].map((a) => verifyAsset(absolute(a.url), a.sha256))),
    30, "checking vendored wheels");

  setStage(`loading Pyodide ${manifest.pyodide.version}`);
  const pyodide = await withTimeout(loadPyodide({ indexURL: absolute(manifest.pyodide.index_url) }), 90, "loadPyodide");
  // For interactive use from the console and profiling scripts; not enumerable, so window.__lab stays JSON.
  Object.defineProperty(lab, "pyodide", { value: pyodide, enumerable: false });

  // loadPackage reports a failed download only through errorCallback and still resolves.
  setStage("loading micropip");
  const loadErrors = [];
  await withTimeout(pyodide.loadPackage(absolute(manifest.micropip.url), {
    messageCallback: () => {},
    errorCallback: (message) => loadErrors.push(message),
  }), 60, "loading micropip");
  if (loadErrors.length) throw new Error(`loading micropip failed: ${loadErrors.join("; ")}`);

  setStage("installing py_runtime");
  const micropip = pyodide.pyimport("micropip");
  await withTimeout(micropip.install.callKwargs(absolute(manifest.runtime.url), { deps: false }), 60,
    "installing the py_runtime wheel");

  // The URL's pairs go to Python as they are: the suite's declared options convert (and reject) them.
  const suite = query.get("suite") || "default";
  setStage(`running the ${suite} suite`);
  const page = pyodide.pyimport("py_runtime.page");
  const text = await withTimeout(page.main(JSON.stringify([...query]), showProgress), runSeconds, `the ${suite} suite`);
  page.destroy();
  const report = JSON.parse(text);

  const summary = renderReport(report);
  const shown = RESULTS[report.result];
  if (!shown) throw new Error(`report result ${JSON.stringify(report.result)} is not one of ${Object.keys(RESULTS).join(", ")}`);
  const info = report.adapter.info;
  statusBox.className = `status done ${shown.cls}`;
  statusBox.textContent = `${shown.text}: ${summary} on ` +
    `${info.description || info.device || info.vendor || "unknown adapter"} (${info.vendor || "?"}, ${report.adapter.backend})`;
  lab.result = report;
  lab.state = "done";
  return report;
}

lab.done = main().catch(async (error) => {
  const message = error && error.message ? error.message : String(error);
  lab.error = message;
  lab.state = "error";
  statusBox.className = "status error";
  statusBox.textContent = `ERROR during ${lab.stage}: ${message}`;
  // Headless runs without a driver (the GPU host) learn of the failure from this upload.
  const upload = new URLSearchParams(location.search).get("upload");
  if (upload) {
    await fetch(`/api/results/${encodeURIComponent(upload)}/error.txt`,
      { method: "POST", body: `ERROR during ${lab.stage}: ${message}` }).catch(() => {});
  }
  throw error;
});
