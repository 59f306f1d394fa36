"""The workload registry: every suite named once, options validated against one schema, the page's
URL text converted by it, results tri-state, and the CLI's and the page's choices derived from it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from py_runtime.checks.outcome import FAILED, NOT_CHECKED, PASSED, RESULTS, verdict
from py_runtime.host import cli
from py_runtime.page import PAGE_KEYS, options_from_query
from py_runtime.workloads import DEFAULT_SUITE, KINDS, PAGE_SUITE, WORKLOADS, by_kind, get, schemas
from py_runtime.workloads.progress import throttled
from py_runtime.workloads.schema import Option, from_text, to_text

REPO = Path(__file__).resolve().parents[1]
SUITES = ["generate", "compare", "chat", "unary", "runtime", "q4", "elementwise", "decoder_blocks", "attention", "model",
          "model_soak", "tokenizer", "model_bench", "peer_bench", "kernel_bench", "host_cost"]


def test_every_suite_is_registered_once_with_a_kind_and_a_page_renderer():
    assert list(WORKLOADS) == SUITES and DEFAULT_SUITE == "unary" and PAGE_SUITE == "generate"
    assert all(w.kind in KINDS for w in WORKLOADS.values())
    renderers = set(re.findall(r"^  (\w+): \(report\) =>", (REPO / "web/render.js").read_text(), re.M))
    assert {w.renderer for w in WORKLOADS.values()} == renderers


def test_unknown_suite_lists_every_suite():
    with pytest.raises(ValueError) as error:
        get("unray")
    assert str(error.value) == f"unknown suite 'unray'; suites: {SUITES}"


@pytest.mark.parametrize("suite", SUITES)
def test_unknown_option_lists_the_suites_valid_options(suite):
    workload = get(suite)
    with pytest.raises(ValueError) as error:
        workload.validate({"lenghts": [4]})
    assert f"unknown option(s) ['lenghts'] for suite {suite!r}" in str(error.value)
    assert f"valid options: {sorted(o.name for o in workload.options)}" in str(error.value)


@pytest.mark.parametrize("suite,given,fragment", [
    ("unary", {"seed": "1"}, "option seed = '1': not allowed; seed takes an integer"),
    ("unary", {"seed": True}, "seed takes an integer"),
    ("unary", {"lengths": []}, "lengths takes a non-empty list of integers >= 1"),
    ("unary", {"lengths": [63, 0]}, "lengths = [63, 0]: 0 is not allowed"),
    ("unary", {"ops": ["exp", "cube"]}, "'cube' is not allowed; ops takes a non-empty list of strings from ['abs'"),
    ("unary", {"profile": 1}, "profile takes a boolean"),
    ("q4", {"preset": "huge"}, "preset takes a string from ['ci', 'browser', 'full', 'int8x', 'dp4a', 'sgmat', 'sgmat_f16']"),
    ("kernel_bench", {"chain_bytes": -1}, "chain_bytes takes an integer >= 0"),
    ("decoder_blocks", {"lengths": [3]}, "3 is not allowed; lengths takes a non-empty list of integers from [1, 7"),
])
def test_bad_values_name_the_option_the_value_and_what_is_allowed(suite, given, fragment):
    with pytest.raises(ValueError) as error:
        get(suite).validate(given)
    assert f"suite {suite!r}" in str(error.value) and fragment in str(error.value)


def test_defaults_fill_every_option_and_lists_become_tuples():
    values = get("unary").validate({"ops": ["exp"], "max_workgroups_per_dim": None})
    assert values["ops"] == ("exp",) and values["max_workgroups_per_dim"] is None
    assert set(values) == {o.name for o in get("unary").options}
    assert get("kernel_bench").validate({})["preset"] == "decode"


def test_an_option_type_outside_the_schema_is_refused():
    with pytest.raises(ValueError, match="type 'complex' is not one of"):
        Option(name="x", type="complex", default=0.0)


def test_float_options_take_finite_numbers_from_python_and_urls():
    chat = get("chat")
    assert chat.validate({"temperature": 0.8, "top_p": 1})["temperature"] == 0.8
    for bad, fragment in ((-0.5, "temperature takes a finite number >= 0"), (True, "not allowed"),
                          (float("inf"), "not allowed"), ("0.8", "not allowed")):
        with pytest.raises(ValueError, match=fragment):
            chat.validate({"temperature": bad})
    assert from_text("chat", chat.options, [("temperature", "0.75"), ("top_p", "1")]) == {"temperature": 0.75,
                                                                                          "top_p": 1.0}
    with pytest.raises(ValueError, match="'warm' is not a number; temperature takes a finite number >= 0"):
        from_text("chat", chat.options, [("temperature", "warm")])
    with pytest.raises(ValueError, match="temperature = nan: not allowed"):
        from_text("chat", chat.options, [("temperature", "nan")])


# Every URL the README lists, as the page's [key, text] pairs -> app.run's options.
@pytest.mark.parametrize("query,expected", [
    ("", {"suite": "generate"}),
    ("model=qwen3&layers=4&policy=f32", {"suite": "generate", "model": "qwen3", "layers": 4, "policy": "f32"}),
    ("size=full&decode=16&profile=0&oracle=0", {"suite": "generate", "size": "full", "decode": 16, "profile": False,
                                                "oracle": False}),
    ("suite=compare&a=f32&b=int8x&rounds=3", {"suite": "compare", "a": "f32", "b": "int8x", "rounds": 3}),
    ("suite=unary&ops=exp,silu&lengths=63,4097&seed=1&profile=1&max_wg=5&sample=4096&upload=RUN",
     {"suite": "unary", "ops": ("exp", "silu"), "lengths": (63, 4097), "seed": 1, "profile": True,
      "max_workgroups_per_dim": 5, "sample": 4096, "artifacts": True}),
    ("suite=runtime", {"suite": "runtime"}),
    ("suite=q4&upload=X", {"suite": "q4", "artifacts": True}),
    ("suite=elementwise&seed=3&timeout=300", {"suite": "elementwise", "seed": 3}),
    ("suite=decoder_blocks&ops=qwen3,argmax&lengths=1,7", {"suite": "decoder_blocks", "ops": ("qwen3", "argmax"),
                                                          "lengths": (1, 7)}),
    ("suite=kernel_bench&preset=decode&chain_bytes=1048576&upload=X",
     {"suite": "kernel_bench", "preset": "decode", "chain_bytes": 1 << 20}),
    ("suite=kernel_bench&preset=llama_step", {"suite": "kernel_bench", "preset": "llama_step"}),
    ("suite=host_cost&dispatches=23&steps=2", {"suite": "host_cost", "dispatches": 23, "steps": 2}),
    ("suite=chat&temperature=0.8&top_p=0.95&seed=7", {"suite": "chat", "temperature": 0.8, "top_p": 0.95, "seed": 7}),
    ("suite=unary&profile=0&lengths=65,", {"suite": "unary", "profile": False, "lengths": (65,)}),
])
def test_the_readme_urls_still_convert(query, expected):
    pairs = [tuple(p.split("=", 1)) for p in query.split("&") if p]
    options, _ = options_from_query(pairs)
    assert options == expected
    get(options["suite"]).validate({k: v for k, v in options.items() if k != "suite"})


@pytest.mark.parametrize("pairs,fragment", [
    ([("suite", "unary"), ("lenghts", "4")], "unknown URL option lenghts for suite 'unary'; valid: ['ops', 'lengths', 'seed', 'profile', "
                         "'max_wg', 'sample', 'artifacts', 'suite', 'upload', 'timeout']"),
    ([("suite", "q4"), ("ops", "exp")], "unknown URL option ops for suite 'q4'"),
    ([("suite", "bogus")], "unknown suite 'bogus'; suites: ['generate', 'compare', 'chat', 'unary'"),
    ([("seed", "1,2")], "'1,2' is not an integer; seed takes an integer"),
    ([("suite", "unary"), ("lengths", "63,x")], "'x' is not an integer"),
    ([("layers", "0")], "option layers = 0: not allowed; layers takes an integer >= 1"),
    ([("model", "gpt2")], "option model = 'gpt2': not allowed; model takes a string from ['llama', 'qwen3'"),
    ([("profile", "yes")], "profile='yes' is not one of ['1', 'true', '0', 'false']"),
    ([("seed", "1"), ("seed", "2")], "URL option seed is given twice"),
])
def test_bad_urls_are_errors_that_name_the_valid_keys_or_values(pairs, fragment):
    with pytest.raises(ValueError) as error:
        options_from_query(pairs)
    assert fragment in str(error.value)


@pytest.mark.parametrize("suite", SUITES)
def test_url_text_round_trips_through_the_schema(suite):
    workload = get(suite)
    defaults = workload.validate({})
    text = to_text(workload.options, defaults)
    assert from_text(suite, workload.options, list(text.items())) == {k: v for k, v in defaults.items()
                                                                       if v is not None}


def test_the_page_keys_are_no_suites_option():
    assert not {o.url_key for w in WORKLOADS.values() for o in w.options} & set(PAGE_KEYS)


def test_schemas_are_plain_json():
    import json

    data = json.loads(json.dumps(schemas()))
    assert list(data["workloads"]) == SUITES
    unary = {o["name"]: o for o in data["workloads"]["unary"]["options"]}
    assert unary["max_workgroups_per_dim"]["url"] == "max_wg" and unary["lengths"]["type"] == "int list"


def test_results_are_tri_state():
    assert RESULTS == ("passed", "failed", "not checked")
    assert (verdict(True), verdict(False)) == (PASSED, FAILED)
    assert NOT_CHECKED not in (verdict(True), verdict(False))
    assert [cli._exit_code(r) for r in RESULTS] == [0, 1, 0]


def test_progress_is_throttled_per_stage_but_shows_first_and_last():
    now = [0.0]
    shown = []
    progress = throttled(lambda *update: shown.append(update), 1.0, clock=lambda: now[0])
    for done in range(5):
        progress("cases", done, 4)
        now[0] += 0.3
    progress("other", 0, 2)
    assert shown == [("cases", 0, 4), ("cases", 4, 4), ("other", 0, 2)]


def test_the_cli_derives_its_choices_from_the_registry(capsys):
    with pytest.raises(SystemExit):
        cli.main(["check", "--suite", "kernel_bench"])
    message = capsys.readouterr().err
    assert "choose from " + ", ".join(repr(w.name) for w in by_kind("check")) in message
    with pytest.raises(SystemExit):
        cli.main(["bench", "kernels", "--preset", "nope"])
    presets = get("kernel_bench").option("preset").allowed
    assert "choose from " + ", ".join(map(repr, presets)) in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["bench", "nope"])
    assert "'kernels', 'kernel_bench', 'host', 'host_cost'" in capsys.readouterr().err


def test_the_cli_refuses_options_the_suite_does_not_take(capsys):
    assert cli.main(["check", "--suite", "runtime", "--ops", "exp"]) == 2
    assert "unknown option(s) ['ops'] for suite 'runtime'; valid options: ['artifacts', 'seed']" in capsys.readouterr().err
    assert cli.main(["bench", "host", "--backend", "native", "--preset", "tiny"]) == 2
    assert "host_cost takes no preset" in capsys.readouterr().err
    assert cli.main(["bench", "kernels", "--backend", "native", "--repeats", "0"]) == 2
    assert "option repeats = 0: not allowed; repeats takes an integer >= 1" in capsys.readouterr().err


def test_the_clis_host_oracles_are_registered_check_suites():
    assert set(cli.HOST_ORACLES) <= {w.name for w in by_kind("check")}
    assert set(cli.BENCH_OUTPUT) == {w.name for w in by_kind("bench")}
