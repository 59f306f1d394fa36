// The page's controls, built from the workload registry's declarations (py_runtime.page.describe): the view
// tabs, one control per option holding the URL's value, and Python's refusals shown beside each control.
import { el } from "./render.js";

const VIEWS = [
  { name: "Model", suite: "generate", href: "?" },
  { name: "Compare", suite: "compare", href: "?suite=compare" },
  { name: "Chat", suite: "chat", href: "?suite=chat" },
  { name: "Kernels", suite: null, href: "?suite=unary" },
];
let controls = [];

const textOf = (option, value) => (value === null || value === undefined ? "" :
  Array.isArray(value) ? value.join(",") : typeof value === "boolean" ? (value ? "1" : "0") : String(value));

// The view tabs, and one control per option of `suite` holding the URL's value (or the default).
export function renderControls(schemas, suite, pairs, { onChange }) {
  const workload = schemas.workloads[suite];
  const isView = workload.kind === "view";
  document.getElementById("views").replaceChildren(...VIEWS.map((v) => {
    const active = v.suite === suite || (!v.suite && !isView);
    return el("a", { href: v.href, class: active ? "active" : "" }, v.name);
  }));
  const given = new Map(pairs);
  const fields = [];
  if (!isView) {
    const pick = el("select", { name: "suite", id: "control-suite" });
    for (const [name, w] of Object.entries(schemas.workloads)) {
      if (w.kind === "view") continue;
      const choice = el("option", { value: name, title: w.title }, `${name} (${w.kind})`);
      if (name === suite) choice.selected = true;
      pick.append(choice);
    }
    pick.addEventListener("change", () => { location.search = `?suite=${pick.value}`; });
    fields.push(el("label", { class: "field", title: workload.title }, el("span", {}, "suite"), pick));
  }
  controls = [];
  for (const option of workload.options) {
    if (option.name === "artifacts") continue;
    const key = option.url;
    const fallback = textOf(option, option.default);
    const value = given.has(key) ? given.get(key) : fallback;
    let input;
    if (option.type === "bool") {
      input = el("input", { type: "checkbox", name: key });
      input.checked = ["1", "true"].includes(String(value).toLowerCase());
      if (!["1", "0", "true", "false"].includes(String(value).toLowerCase())) input.dataset.raw = value;
    } else if (option.allowed && !option.type.endsWith("list")) {
      input = el("select", { name: key });
      const values = [...(option.default === null ? [""] : []), ...option.allowed.map(String)];
      if (!values.includes(value)) values.push(value);      // a bad URL value stays visible, marked
      for (const v of values) {
        const choice = el("option", { value: v }, v === "" ? "auto" : v);
        if (v === value) choice.selected = true;
        input.append(choice);
      }
    } else {
      input = el("input", { type: "text", name: key,
        size: option.type.endsWith("list") ? 24 : Math.max(6, Math.min(40, fallback.length)),
        placeholder: option.default === null ? "auto" : fallback });
      input.value = value;
    }
    input.id = `control-${key}`;
    input.addEventListener("change", () => { delete input.dataset.raw; onChange(); });
    const error = el("span", { class: "error", id: `error-${key}` });
    const help = option.help + (option.allowed ? ` (${option.allowed.join(" | ")})` : "") +
      (option.minimum !== null ? ` (>= ${option.minimum})` : "");
    fields.push(el("label", { class: "field", title: help }, el("span", {}, key), input, error));
    controls.push({ option, key, input, fallback });
    if (key === "model_file") fields.push(filePicker(input, onChange));
  }
  document.getElementById("fields").replaceChildren(...fields);
  document.getElementById("run").disabled = false;
}

// "Load a model file": the File stays in JS (window.__lab.modelFile, read by ranges from Python), the option says
// "picked". A page reload forgets it, so the URL's model_file=picked then needs a file picked again.
function filePicker(input, onChange) {
  const picker = el("input", { type: "file", accept: ".gguf", id: "model-pick" });
  picker.addEventListener("change", () => {
    const file = picker.files && picker.files[0];
    Object.defineProperty(window.__lab, "modelFile", { value: file || null, configurable: true, enumerable: false });
    if (file) input.value = "picked";
    onChange();
  });
  return el("label", { class: "field", title: "a GGUF file from this computer, read in ranges" },
    el("span", {}, "load a model file"), picker);
}

// The controls' [key, text] pairs that differ from their defaults (what the URL mirrors).
export function controlPairs() {
  const pairs = [];
  for (const { key, input, fallback } of controls) {
    const text = input.dataset.raw !== undefined ? input.dataset.raw :
      input.type === "checkbox" ? (input.checked ? "1" : "0") : input.value.trim();
    if (text !== fallback && !(text === "" && fallback === "")) pairs.push([key, text]);
  }
  return pairs;
}

// Python's message for each refused value beside its control; the others cleared.
export function markControls(errors) {
  for (const { key, input } of controls) {
    const message = errors[key] || "";
    input.classList.toggle("invalid", Boolean(message));
    input.setAttribute("aria-invalid", message ? "true" : "false");
    document.getElementById(`error-${key}`).textContent = message ? message.replace(/^suite '[^']*': /, "") : "";
  }
  document.getElementById("run").disabled = Object.keys(errors).length > 0;
}
