"""Browser entry: web/main.js calls these with plain JSON and renders the plain JSON they return.

  describe()                       every suite's options (types, defaults, allowed values): the controls
  check(query_json)                each URL value's error, by URL key (the controls show them)
  main(query_json, on_progress, stop_signal)   run the suite; the report as JSON
  judge(report_json, stop_signal)  the dev server's oracle verdict on the last run's logits, merged in

`query_json` is the page URL's query as a JSON list of [key, text] pairs; the suite's declared
options (py_runtime.workloads) convert the text, so the page keeps no list of keys. With an `upload`
run id, inputs, outputs and the report are also POSTed to the dev server (/api/results/<run>/...),
which is how headless runs hand bulk data to the host oracle. `on_progress(stage, done, total,
detail_json)` (a JS function) is called with plain strings and numbers only. `stop_signal` is the
page's AbortSignal: once aborted, the runner's next progress report raises RunStopped (its finally
blocks release the GPU's buffers) and a pending oracle request is abandoned.
"""

from __future__ import annotations

import base64
import json
import re

from .app import run
from .checks.outcome import FAILED, NOT_CHECKED, PASSED, no_progress
from .workloads import PAGE_SUITE, get, schemas
from .workloads.progress import throttled
from .workloads.schema import from_text

__all__ = ["PAGE_KEYS", "ORACLE_URL", "RunStopped", "describe", "check", "main", "judge", "options_from_query",
           "merge_verdicts"]

# The URL keys that are the page's, not the suite's: which suite, the upload run id, and main.js's
# limit in seconds for the whole run.
PAGE_KEYS = ("suite", "upload", "timeout")
PROGRESS_INTERVAL_S = 0.1
ORACLE_URL = "/api/oracle/generation"
ORACLE_TIMEOUT_S = 900.0
_last_artifacts: dict[str, bytes] = {}      # the last run's logits, for judge()


class RunStopped(Exception):
    """The page's Stop: raised from the runner's next progress report."""


def _uploader(run_id: str):
    """A sink that POSTs each artifact to the dev server under results/<run_id>/."""
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", str(run_id)):
        raise ValueError(f"upload run id must be 1-64 of [A-Za-z0-9_-], got {run_id!r}")
    from .gpu.browser import post_bytes     # the browser backend: imported only where it runs

    async def sink(name: str, data: bytes) -> None:
        await post_bytes(f"/api/results/{run_id}/{name}", data)

    return sink


def options_from_query(pairs) -> tuple[dict, str | None]:
    """(app.run's options, the upload run id) from the URL's [key, text] pairs."""
    page = dict(pairs)
    workload = get(page.get("suite", PAGE_SUITE))
    options = {"suite": workload.name, **from_text(workload.name, workload.options, pairs, reserved=PAGE_KEYS)}
    run_id = page.get("upload")
    if run_id is not None and workload.option("artifacts") is not None:
        options.setdefault("artifacts", True)
    return options, run_id


def describe() -> str:
    """The registry's declarations as JSON: the page builds its controls from them."""
    return json.dumps(schemas())


def check(query_json: str) -> str:
    """{"suite", "errors": {url key: message}, "page": message or null} for the URL's pairs: every bad value
    is named at its own control; an unknown suite or key goes to `page`."""
    pairs = [tuple(pair) for pair in json.loads(query_json or "[]")]
    try:
        workload = get(dict(pairs).get("suite", PAGE_SUITE))
    except ValueError as error:
        return json.dumps({"suite": None, "errors": {}, "page": str(error)})
    known = {o.url_key for o in workload.options}
    errors, page = {}, None
    for key, text in pairs:
        if key in PAGE_KEYS:
            continue
        try:
            from_text(workload.name, workload.options, [(key, text)], reserved=PAGE_KEYS)
        except ValueError as error:
            if key in known:
                errors[key] = str(error)
            else:
                page = page or str(error)
    keys = [key for key, _ in pairs]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated and page is None:
        page = f"URL option {repeated[0]} is given twice"
    return json.dumps({"suite": workload.name, "errors": errors, "page": page})


def _page_progress(on_progress, stop_signal):
    if on_progress is None:
        show = no_progress
    else:
        def relay(stage, done, total, detail=None):
            on_progress(stage, done, total, json.dumps(detail) if detail is not None else "")
        show = throttled(relay, PROGRESS_INTERVAL_S)

    def progress(stage: str, done: int, total: int, detail: dict | None = None) -> None:
        if stop_signal is not None and stop_signal.aborted:
            raise RunStopped(f"stopped during {stage} ({done}/{total})")
        show(stage, done, total, detail)

    return progress


async def main(query_json: str, on_progress=None, stop_signal=None) -> str:
    options, run_id = options_from_query([tuple(pair) for pair in json.loads(query_json or "[]")])
    upload = _uploader(run_id) if run_id is not None else None
    _last_artifacts.clear()

    async def keep(name: str, data: bytes) -> None:
        _last_artifacts[name] = bytes(data)
        if upload:
            await upload(name, data)

    # The model views keep their logits for judge(); other suites hand artifacts only to an upload.
    sink = keep if get(options["suite"]).kind == "view" else upload
    report = await run("browser", options, sink, _page_progress(on_progress, stop_signal))
    text = json.dumps(report)
    if upload:
        await upload("report.json", text.encode())
    return text


def merge_verdicts(report: dict, answer: dict | None, reason: str | None = None) -> dict:
    """The report with the oracle's answer ({"runs": [{label, verdict, ...}]}) merged: its result is
    failed if any run failed, passed only if every run passed, else not checked (with the reason)."""
    runs = (answer or {}).get("runs") or []
    verdicts = [r.get("verdict") for r in runs]
    if not runs or len(runs) != len(report.get("oracle_runs", [])):
        verdict = NOT_CHECKED
        reason = reason or (answer or {}).get("reason") or "the oracle judged nothing"
    elif FAILED in verdicts:
        verdict = FAILED
    elif all(v == PASSED for v in verdicts):
        verdict = PASSED
    else:
        verdict = NOT_CHECKED
        reason = reason or next((r.get("reason") for r in runs if r.get("verdict") != PASSED), None)
    report = dict(report)
    report["oracle"] = {"verdict": verdict, "reason": reason if verdict == NOT_CHECKED else None, "runs": runs}
    report["result"] = FAILED if report.get("result") == FAILED else verdict
    return report


async def judge(report_json: str, stop_signal=None, timeout_s: float = ORACLE_TIMEOUT_S) -> str:
    """Ask the dev server's oracle about the last run's logits; the report with its verdict. A server
    without the oracle (404), a timeout or a stop leave the run "not checked", with the reason."""
    from .gpu.browser import post_json

    report = json.loads(report_json)
    runs = report.get("oracle_runs") or []
    if not runs:
        return json.dumps(merge_verdicts(report, None, (report.get("oracle") or {}).get("reason")))
    missing = [name for r in runs for name in r["logits"].values() if name not in _last_artifacts]
    if missing:
        return json.dumps(merge_verdicts(report, None, f"the page no longer holds the logits {missing}"))
    payload = {"runs": [{**r, "logits": {step: base64.b64encode(_last_artifacts[name]).decode("ascii")
                                         for step, name in r["logits"].items()}} for r in runs]}
    try:
        status, text = await post_json(ORACLE_URL, payload, timeout_s=timeout_s, signal=stop_signal)
    except Exception as error:      # a JS abort or timeout arrives as a JsException
        stopped = stop_signal is not None and stop_signal.aborted
        reason = "stopped before the oracle answered" if stopped else f"the oracle did not answer: {error}"
        return json.dumps(merge_verdicts(report, None, reason))
    if status == 404:
        return json.dumps(merge_verdicts(report, None, "this server has no oracle (serve the page with "
                                                        "`webgpu-llm-lab serve` to have logits checked)"))
    if status != 200:
        return json.dumps(merge_verdicts(report, None, f"the oracle answered HTTP {status}: {text[:300]}"))
    return json.dumps(merge_verdicts(report, json.loads(text)))
