"""The `bench model` HTML report (py_runtime/host/html_report.py), from the committed SwiftShader example's
JSON (a real Chromium run): well-formed, self-contained, hostile strings escaped, the JSON's figures shown,
every bar as wide as its share, several runs compared, and the committed HTML current."""

from __future__ import annotations

import copy
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from py_runtime.host.html_report import SHARE_CHART, model_bench_html

EXAMPLE = Path(__file__).resolve().parents[1] / "docs/bench/swiftshader-example"
VOID = {"meta", "br", "hr", "img", "input", "link", "wbr", "col", "area", "base", "source", "track", "embed"}
# SVG children written self-closing (<rect/>); html.parser reports them through handle_startendtag.
HOSTILE = '<script>alert("x")</script>&amp;\'"'


class Tree(HTMLParser):
    """Every element (tag, attrs, the open elements above it), the text under each, and nesting errors."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.elements, self.errors, self.stack, self.text, self.doctype = [], [], [], [], None
        self.feed(text)
        self.close()

    def handle_decl(self, decl):
        self.doctype = decl

    def handle_starttag(self, tag, attrs):
        self.elements.append({"tag": tag, "attrs": dict(attrs), "parents": [e["tag"] for e in self.stack],
                              "text": []})
        if tag not in VOID:
            self.stack.append(self.elements[-1])

    def handle_startendtag(self, tag, attrs):
        self.elements.append({"tag": tag, "attrs": dict(attrs), "parents": [e["tag"] for e in self.stack],
                              "text": []})

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1]["tag"] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1]['tag'] if self.stack else 'nothing'}")
            return
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)
        for element in self.stack:
            element["text"].append(data)

    def all(self, tag: str, css: str | None = None) -> list[dict]:
        return [e for e in self.elements if e["tag"] == tag
                and (css is None or css in e["attrs"].get("class", "").split())]


def _text(element) -> str:
    return "".join(element["text"])


# The report's number formats: fixed decimals, three significant digits below 1; times in us, in ms from
# 10 ms; shares to 0.1%, "<0.1%" below that.
def _figure(value: float, digits: int = 1) -> str:
    return f"{value:.3g}" if 0 < abs(value) < 1 else f"{value:,.{digits}f}"


def _time(ns: float) -> str:
    return f"{ns / 1e3:,.1f} us" if ns < 1e7 else f"{ns / 1e6:,.1f} ms"


def _share(share: float) -> str:
    return "<0.1%" if 0 < share < 0.0005 else f"{100 * share:.1f}%"


@pytest.fixture(scope="module")
def run() -> dict:
    return json.loads((EXAMPLE / "model-llama-browser.json").read_text())


def test_report_is_well_formed_and_self_contained(run):
    page = model_bench_html(run)
    assert "://" not in page
    tree = Tree(page)
    assert tree.doctype.lower() == "doctype html"
    assert not tree.errors and not tree.stack, (tree.errors, [e["tag"] for e in tree.stack])
    assert [e["tag"] for e in tree.elements[:2]] == ["html", "head"]
    assert len(tree.all("h1")) == 1 and len(tree.all("style")) == 1
    assert [e["parents"] for e in tree.all("title") if "svg" not in e["parents"]] == [["html", "head"]]
    # Nothing to fetch, nothing to run: no scripts, no linked or embedded resources, links only within the page.
    assert not [e for e in tree.elements if e["tag"] in ("script", "link", "img", "iframe", "object", "embed")]
    assert not [e for e in tree.elements if set(e["attrs"]) & {"src", "srcset", "style"}
                or any(name.startswith("on") for name in e["attrs"])]
    assert all(e["attrs"]["href"].startswith("#") for e in tree.all("a"))
    style = _text(tree.all("style")[0])
    assert "url(" not in style and "@import" not in style
    # Charts are inline SVG: one per profiled phase.
    assert [svg["attrs"]["aria-label"] for svg in tree.all("svg")] == [
        "each kernel's share of the prefill", "each kernel's share of the decode"]


def test_hostile_strings_are_escaped(run):
    hostile = copy.deepcopy(run)
    hostile["adapter"]["info"]["description"] = HOSTILE
    hostile["adapter"]["features"].append(HOSTILE)
    hostile["config"]["name"] = HOSTILE
    hostile["routes"]["decode"].append(HOSTILE)
    hostile["kernels"][0]["kernel"] = HOSTILE
    hostile["kernels"][0]["route"] = HOSTILE
    page = model_bench_html(hostile, labels=[HOSTILE])
    tree = Tree(page)
    assert "<script" not in page.lower() and not tree.all("script") and not tree.errors
    text = "".join(tree.text)
    # Each hostile string comes back verbatim as text: the title, h1, facts, feature chip, route, kernel rows.
    assert text.count(HOSTILE) >= 7, text.count(HOSTILE)
    bar = tree.all("rect", "bar")[0]
    assert bar["attrs"]["data-label"] == HOSTILE


def _table_rows(page: str) -> list[list[str]]:
    """Each table row as its cells' text."""
    class Rows(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows, self.cell = [], None

        def handle_starttag(self, tag, attrs):
            if tag == "tr":
                self.rows.append([])
            elif tag in ("td", "th"):
                self.cell = []

        def handle_endtag(self, tag):
            if tag in ("td", "th"):
                self.rows[-1].append("".join(self.cell))
                self.cell = None

        def handle_data(self, data):
            if self.cell is not None:
                self.cell.append(data)

    parser = Rows()
    parser.feed(page)
    return parser.rows


def test_report_shows_the_json_figures(run):
    page = model_bench_html(run)
    tree = Tree(page)
    cards = [_text(e) for e in tree.all("div", "card")]
    assert cards == [f"{_figure(run['prefill_tok_s'])}prefill tok/s", f"{_figure(run['decode_tok_s'])}decode tok/s",
                     f"{_figure(run['ttft_ms'])}time to first token, ms",
                     f"{_figure(run['host_ms_per_token'], 2)}host ms per decode token",
                     f"{_time(1e3 * run['decode_span_us'])}GPU time of a decode step (one pass)",
                     f"{'-' if run.get('prefill_span_us') is None else _time(1e3 * run['prefill_span_us'])}"
                     "GPU time of the prefill (one pass)"]
    facts = dict(zip((_text(e) for e in tree.all("dt")), (_text(e) for e in tree.all("dd"))))
    o = run["options"]
    assert facts["depth"] == f"{o['layers']} layers" and facts["policy"] == o["policy"]
    assert facts["lengths"].startswith(f"prompt {o['prompt']} tokens, {o['decode']} greedy decode steps ending at "
                                       f"position {o['context']} (ids read ")
    assert facts["position"] == (f"on the {'GPU' if run['position_on_gpu'] else 'host'} between decode steps "
                                 f"(asked: {o['position']})")
    assert facts["timestamps quantized"] == ("yes: per-kernel times are rounded, shares are coarse"
                                             if run["timestamps_quantized"] else "no")
    assert facts["oracle"].startswith(run["result"])
    assert run["adapter"]["backend"] in facts["adapter"]
    assert all(feature in facts["features"] for feature in run["adapter"]["features"])
    rows = _table_rows(page)
    routes = {r[0]: r[1:] for r in rows if len(r) == 3}
    for phase, column in (("prefill", 0), ("decode", 1)):
        assert {name for name, ran in routes.items() if ran[column] == "\u2713"} == set(run["routes"][phase])
    kernel_rows = [r for r in rows if len(r) == 7 and r[0] != "kernel"]
    expected = [[k["kernel"], k["route"], str(k["dispatches"]), _time(k["ns"]), _share(k["share"]),
                 _figure(k["bytes"] / k["ns"]) if k["bytes"] else "-",
                 _figure(k["flops"] / k["ns"]) if k["flops"] else "-"] for k in run["kernels"]]
    assert [r for r in kernel_rows if r[0] != "whole step"] == expected
    totals = [r for r in kernel_rows if r[0] == "whole step"]
    assert [t[3] for t in totals] == [_time(sum(k["ns"] for k in run["kernels"] if k["phase"] == p))
                                      for p in ("prefill", "decode")]


def test_every_bar_is_as_wide_as_its_share(run):
    tree = Tree(model_bench_html(run))
    for phase in ("prefill", "decode"):
        kernels = [k for k in run["kernels"] if k["phase"] == phase]
        # Each bar is drawn right after its track, at the same place.
        pairs = [(before, e) for before, e in zip(tree.elements, tree.elements[1:])
                 if e["tag"] == "rect" and phase in e["attrs"].get("class", "").split()]
        tracks, bars = [p[0] for p in pairs], [p[1] for p in pairs]
        assert all("track" in t["attrs"]["class"] for t in tracks)
        assert len(bars) == len(kernels) > 0
        for bar, track, kernel in zip(bars, tracks, kernels):
            assert (bar["attrs"]["x"], bar["attrs"]["y"]) == (track["attrs"]["x"], track["attrs"]["y"])
            width, full = float(bar["attrs"]["width"]), float(track["attrs"]["width"])
            assert abs(width / full - kernel["share"]) < 1e-5, (kernel, width, full)
            assert bar["attrs"]["data-label"].startswith(kernel["kernel"])
        assert abs(sum(float(b["attrs"]["width"]) for b in bars) / float(tracks[0]["attrs"]["width"]) - 1) < 1e-4


def test_several_runs_are_compared_side_by_side(run):
    faster = copy.deepcopy(run)
    faster["options"]["policy"] = "int8x"
    faster["decode_tok_s"] = 2 * run["decode_tok_s"]
    faster["kernels"] = [k for k in faster["kernels"] if k["phase"] == "prefill"]
    page = model_bench_html([run, faster], labels=["engine A", "engine B"])
    tree = Tree(page)
    assert not tree.errors
    assert [e["attrs"]["id"] for e in tree.all("section") if "id" in e["attrs"]] == ["run-1", "run-2"]
    rows = _table_rows(page)
    assert rows[1][:2] == ["1", "engine A"] and rows[2][:2] == ["2", "engine B"]
    assert rows[2][3] == f"{_figure(faster['decode_tok_s'])} (2.00x)"
    decode = tree.all("rect", "metric")[2:4]            # the charts: prefill, decode, TTFT, host ms
    widths = {b["attrs"]["data-label"]: float(b["attrs"]["width"]) for b in decode}
    assert widths["run 2"] == 2 * widths["run 1"]
    # A kernel only one run profiled shows '-' for the other.
    prefill = {(k["kernel"], k["route"]) for k in run["kernels"] if k["phase"] == "prefill"}
    decode_kernel = next(k for k in run["kernels"]
                         if k["phase"] == "decode" and (k["kernel"], k["route"]) not in prefill)
    row = next(r for r in rows if r[:2] == [decode_kernel["kernel"], decode_kernel["route"]] and len(r) == 4)
    assert row[3] == "-" and row[2] == f"{_time(decode_kernel['ns'])}({_share(decode_kernel['share'])})"
    with pytest.raises(ValueError, match="1 labels for 2 runs"):
        model_bench_html([run, faster], labels=["one"])


def test_unprofiled_run_says_so(run):
    bare = {**run, "kernels": [], "timestamps_quantized": None}
    page = model_bench_html(bare)
    assert "Not profiled" in page and "<svg" not in page
    assert "timestamps quantized</dt><dd>not profiled" in page


def test_oracle_verdict_is_shown_where_the_json_has_one(run):
    judged = {**run, "result": "passed", "oracle": {"result": "passed", "max_error": 1.5e-6, "near_ties": 0}}
    tree = Tree(model_bench_html(judged))
    facts = dict(zip((_text(e) for e in tree.all("dt")), (_text(e) for e in tree.all("dd"))))
    assert facts["oracle"] == "passed max error 1.5e-06, near ties 0"
    assert _text(Tree(model_bench_html(run)).all("span", "status")[0]) == "not checked"


@pytest.mark.parametrize("html_name, json_names", [
    ("model-llama-browser.html", ["model-llama-browser.json"]),
    ("model-llama-int8x-browser.html", ["model-llama-int8x-browser.json"]),
    ("compare-f32-int8x.html", ["model-llama-browser.json", "model-llama-int8x-browser.json"])])
def test_committed_example_html_is_current(html_name, json_names):
    """docs/bench/swiftshader-example/: each HTML is what this module makes of the JSON beside it."""
    runs = [json.loads((EXAMPLE / name).read_text()) for name in json_names]
    assert (EXAMPLE / html_name).read_text() == model_bench_html(runs if len(runs) > 1 else runs[0])


def test_a_long_kernel_name_keeps_both_ends_in_its_chart_label(run):
    """Names that differ only in their variant (the end) stay told apart where the label column cuts them."""
    long = copy.deepcopy(run)
    decode = [k for k in long["kernels"] if k["phase"] == "decode"][:2]
    for kernel, shape in zip(decode, ("r2u1w32", "r1u1w16k2")):
        kernel["kernel"] = f"q4gsw_gemv_i8x_qkv_rope_interleaved_norm_sr_sg_{shape}"
    tree = Tree(model_bench_html(long))
    shown = [_text(t) for t in tree.all("text") if _text(t).startswith("q4gsw_gemv_i8x_qkv")]
    assert len(shown) == 2 and all(len(s) <= SHARE_CHART.label_chars and "\u2026" in s for s in shown), shown
    assert shown[0].endswith("_r2u1w32") and shown[1].endswith("_r1u1w16k2"), shown


def test_the_tuning_table_that_picked_the_variants_is_shown_and_tells_runs_apart(run):
    own = {**copy.deepcopy(run), "tuning": "swiftshader"}
    named = copy.deepcopy(own)
    named["tuning"] = "h200"
    named["adapter"]["info"]["tuning_table"] = "h200"
    page = model_bench_html([own, named])
    assert "kernel variants from the swiftshader tuning table" in page
    assert "swiftshader tuning table (named" not in page                  # the adapter's own table
    assert "kernel variants from the h200 tuning table (named by the run)" in page
    assert ", tuning swiftshader" in page and ", tuning h200" in page
