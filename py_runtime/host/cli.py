"""webgpu-llm-lab: serve | gen | check | bench | generate."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

__all__ = ["main"]


def _serve(args) -> int:
    from .codegen import repo_root
    from .serve import LabServer

    root = repo_root()
    if not (root / "web/vendor/manifest.json").exists():
        print("web/vendor/ is not set up: run scripts/setup.sh first (scripts/demo.sh does both)", file=sys.stderr)
        return 2
    import importlib.util

    from .serve import generation_oracle

    server = LabServer(web_root=root / "web", results_root=root / args.results, port=args.port, verbose=args.verbose,
                       oracle=None if args.no_oracle else generation_oracle)
    installed = all(importlib.util.find_spec(name) for name in ("torch", "transformers"))
    oracle = ("off (--no-oracle)" if args.no_oracle else "HF transformers on CPU torch" if installed else
              "not installed (the page will say NOT CHECKED; scripts/setup.sh installs the oracle extra)")
    print(f"webgpu-llm-lab: serving {root / 'web'} at {server.url}  (Ctrl-C to stop)", flush=True)
    print(f"open {server.url} in Chromium with --enable-unsafe-webgpu; it runs a model by default "
          f"(?suite=compare for the compare view, ?suite=unary for the kernels); oracle: {oracle}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _gen(args) -> int:
    from .codegen import CodegenError, check, generate, publish, repo_root

    root = repo_root()
    try:
        generated = generate(root)
        if args.check:
            problems = check(root, generated)
            for problem in problems:
                print(problem, file=sys.stderr)
            print(f"gen --check: {len(generated.kernels)} kernels, "
                  f"{'up to date' if not problems else f'{len(problems)} problem(s)'}")
            return 1 if problems else 0
        written = publish(root, generated, update_lock=args.update_lock)
    except CodegenError as error:
        for problem in error.problems:
            print(f"gen: {problem}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as interrupt:
        # The publisher has already undone its work; its notes say what, if anything, it could not restore.
        for note in getattr(interrupt, "__notes__", []):
            print(f"gen: {note}", file=sys.stderr)
        print("gen: interrupted", file=sys.stderr)
        return 130
    print(f"gen: {len(generated.kernels)} kernels, {len(written)} file(s) written")
    for path in written:
        print(f"  wrote {path.as_posix()}")
    return 0


def _stderr_progress(stream=None):
    """Progress lines on stderr: a redrawn bar on a terminal, else a few plain lines (CI logs stay small)."""
    from ..workloads.progress import throttled

    stream = stream or sys.stderr
    tty = stream.isatty()

    def show(stage: str, done: int, total: int, detail: dict | None = None) -> None:
        if tty:
            filled = 30 * done // max(total, 1)
            stream.write(f"\r{stage} [{'#' * filled}{'.' * (30 - filled)}] {done}/{total}"
                         + ("\n" if done >= total else ""))
        else:
            stream.write(f"{stage}: {done}/{total}\n")
        stream.flush()

    return throttled(show, 0.1 if tty else 10.0)


def _run_suite(backend: str, options: dict, timeout: float, driver: str = "playwright",
               browser_flags: list[str] | None = None):
    """Run one suite natively, or in headless Chromium through the dev server. Returns (report,
    artifacts): {name: bytes} of what the suite handed to its sink; (None, None) on failure.
    driver "plain" needs no Playwright: the page uploads its report (the GPU host has no Playwright)."""
    from ..workloads import get
    from ..workloads.schema import to_text

    workload = get(options["suite"])
    values = {k: v for k, v in options.items() if k != "suite"}
    workload.validate(values)
    if backend == "native":
        from ..app import run

        artifacts = {}

        async def sink(name, data):
            artifacts[name] = bytes(data)

        wanted = {"artifacts": True} if workload.option("artifacts") else {}
        return asyncio.run(run("native", {**options, **wanted}, sink, _stderr_progress())), artifacts
    from .codegen import repo_root
    from .vendor import ensure_current

    root = repo_root()
    ensure_current(root)
    results = root / "results"
    run_id = time.strftime("cli-%Y%m%d-%H%M%S")
    # the page bounds the whole run too (main.js: 900 s unless told): give it the host's limit
    query = {"suite": workload.name, **to_text(workload.options, values), "timeout": str(int(timeout))}
    if driver == "plain":
        from .plain_browser import run_page_plain

        state, result = run_page_plain(web_root=root / "web", results_root=results, query=query, run_id=run_id,
                                       timeout_s=timeout, log=results / "chromium.log", extra_args=browser_flags)
        if state != "done":
            print(f"browser run {state}: {result}", file=sys.stderr)
            return None, None
        return result, _uploaded(results / run_id)
    from .headless import HeadlessLab

    with HeadlessLab(web_root=root / "web", results_root=results, extra_args=browser_flags) as lab:
        page = lab.run_page({**query, "upload": run_id}, timeout_s=timeout, on_progress=_stderr_progress())
    if page.state != "done":
        print(f"browser run {page.state} at stage {page.stage}: {page.error}", file=sys.stderr)
        for line in page.console_errors + page.page_errors:
            print(f"  console: {line}", file=sys.stderr)
        return None, None
    return page.report, _uploaded(results / run_id)


def _uploaded(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()} if folder.is_dir() else {}


def _keep_artifacts(folder: Path, artifacts: dict[str, bytes]) -> None:
    """Write a run's artifacts to `folder` as files by name (what _uploaded reads back)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in artifacts.items():
        (folder / name).write_bytes(data)


def _write_json(report: dict, path: str | None) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(report, indent=1) + "\n")
        print(f"report: {path}")


# The check suites judged by the float64 host oracle after the run: verify, then one line of what held.
def _verify_q4(report, artifacts):
    from .oracle import verify_q4_report

    worst = verify_q4_report(report, artifacts.__getitem__)
    for case in report["cases"]:
        routes = "; ".join(f"M={r['rows']}: {', '.join(r['routes'])}" for r in case["runs"])
        print(f"{case['name']:<22} worst err/bound {worst[case['name']]:.4f}   {routes}")


def _verify_runtime(report, artifacts):
    from .oracle import verify_runtime_report

    verify_runtime_report(report, artifacts.__getitem__)
    print("runtime-core checks: caching, resize, profiler, attestation, errors, device loss: all as expected")


def _verify_elementwise(report, artifacts):
    from .oracle import verify_elementwise_report

    verify_elementwise_report(report, artifacts)
    print(f"elementwise: {len(report['cases'])} cases, every element within its bound")


def _verify_decoder_blocks(report, artifacts):
    from .oracle import verify_decoder_blocks_report

    verify_decoder_blocks_report(report, artifacts)
    print("decoder blocks: every output within its bound, every route attested")


def _verify_attention(report, artifacts):
    from .oracle import verify_attention_report

    worst = verify_attention_report(report, artifacts.__getitem__)
    for case in report["cases"]:
        steps = "; ".join(f"{s['tokens']} from {s['pos']}: {s['routes'][-1]}" for s in case["steps"])
        print(f"{case['name']:<34} worst err/bound {worst[case['name']]:.4f}   {steps}")


def _verify_model(report, artifacts):
    from .oracle import verify_model_report

    judged = verify_model_report(report, artifacts.__getitem__)
    print(f"{report['config']['name']}, {report['options']['layers']} layers, {report['options']['policy']}: tokens "
          f"{report['tokens']}; worst logit error {judged['worst_sigma']:.3g} sigma of a "
          f"{judged['tolerance_sigma']:.3g} sigma tolerance ({len(judged['near_ties'])} near ties)")


def _verify_tokenizer(report, artifacts):
    from .codegen import repo_root
    from .oracle.tokenizer import verify_tokenizer_report
    from .vendor import tokenizer_dir

    files = {c["vocabulary"]: tokenizer_dir(repo_root(), c["vocabulary"]) / "tokenizer.json" for c in report["cases"]}
    for case, judged in zip(report["cases"], verify_tokenizer_report(report, files)):
        print(f"{case['vocabulary']}: {judged.summary()} (against tokenizers); load {case['load_ms']:.0f} ms, "
              f"encode {case['cold_tok_s']:,.0f} tok/s cold, {case['warm_tok_s']:,.0f} tok/s with every word cached")


HOST_ORACLES = {"q4": _verify_q4, "runtime": _verify_runtime, "elementwise": _verify_elementwise,
                "decoder_blocks": _verify_decoder_blocks, "attention": _verify_attention, "model": _verify_model,
                "tokenizer": _verify_tokenizer}
PINNED_ORACLE_SUITES = ("model",)      # judged by pyproject's pinned torch and transformers, not numpy alone
UNARY_CLI_LENGTHS = [1, 63, 64, 65, 4097, 1_000_003]    # wider than the page's default: the CLI has time


def _sampling_arguments(parser, scope: str = "") -> None:
    """--temperature, --top-k, --top-p: how the decode picks each token (ops/sample.py), for `generate` and
    `bench model`; unset, they are None (the caller's defaults: greedy)."""
    parser.add_argument("--temperature", type=float,
                        help=f"{scope}sample at this temperature on the GPU (default 0: greedy, argmax)")
    parser.add_argument("--top-k", dest="top_k", type=int,
                        help=f"{scope}sample among the k most likely tokens, 1..64 (default 50; 1 is greedy)")
    parser.add_argument("--top-p", dest="top_p", type=float,
                        help=f"{scope}then among the smallest such prefix holding at least this probability, (0, 1] "
                             "(default 1)")


def _given(args, names) -> dict:
    """The options the user gave on the command line (flags left unset are the suite's defaults)."""
    return {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}


def _exit_code(result: str) -> int:
    """0 when passed or not checked (a benchmark), 1 when failed."""
    return 1 if result == "failed" else 0


def _check(args) -> int:
    from .report import format_model_soak, format_report

    if args.judge:
        return _judge_kept(args.judge)

    options = {"suite": args.suite, **_given(args, ("ops", "lengths", "seed", "max_workgroups_per_dim", "profile",
                                                    "preset", "model", "layers", "prompt", "decode", "policy",
                                                    "steps", "batch", "only", "tuning"))}
    if args.suite == "unary":
        options.setdefault("lengths", UNARY_CLI_LENGTHS)
    try:
        report, artifacts = _run_suite(args.backend, options, args.timeout, args.driver, args.browser_flags)
    except ValueError as error:
        print(f"check: {error}", file=sys.stderr)
        return 2
    if report is None:
        return 1
    _write_json(report, args.json)
    if args.keep_artifacts:             # what the GPU wrote, as the oracle reads it (for a failure's post-mortem)
        _keep_artifacts(Path(args.keep_artifacts), artifacts or {})
    if args.suite == "unary":
        print(format_report(report))
    if args.suite == "model_soak":
        print(format_model_soak(report))
    print(f"result in the runtime: {report['result']}")
    if report["result"] == "failed" or args.suite not in HOST_ORACLES:
        return _exit_code(report["result"])
    unpinned = _unpinned_oracle() if args.suite in PINNED_ORACLE_SUITES else None
    if unpinned is not None:            # a GPU host: keep what the oracle reads, judge it on a CPU machine
        if not args.json:
            print(f"check: {unpinned}, and no --json to keep the run beside: nothing judged", file=sys.stderr)
            return 1
        folder = _artifacts_folder(args.json)
        _keep_artifacts(folder, artifacts or {})
        print(f"NOT JUDGED ({unpinned}): what the GPU read back is kept in {folder}; judge it where the pinned "
              f"oracle is installed: webgpu-llm-lab check --judge {args.json}")
        return 0
    return _judge(args.suite, report, artifacts)


def _judge(suite: str, report: dict, artifacts: dict) -> int:
    try:
        HOST_ORACLES[suite](report, artifacts)
    except AssertionError as failure:
        print(f"FAILED against the host oracle: {failure}", file=sys.stderr)
        return 1
    print(f"PASSED against the float64 host oracle on {report['adapter']['info']}")
    return 0


def _artifacts_folder(json_path: str) -> Path:
    return Path(json_path).with_suffix(".artifacts")


def _judge_kept(path: str) -> int:
    """`check --judge REPORT`: a check run where the oracle was absent, judged from its JSON and kept artifacts."""
    report = json.loads(Path(path).read_text())
    suite, folder = report["suite"], _artifacts_folder(path)
    if suite not in HOST_ORACLES:
        print(f"check: {path} is a {suite!r} report, which no host oracle judges", file=sys.stderr)
        return 2
    if not folder.is_dir():
        print(f"check: no {folder} beside {path} (the run kept nothing to judge)", file=sys.stderr)
        return 2
    print(f"judging {path}: {suite} on {report['adapter']['info'].get('description')}")
    return _judge(suite, report, _uploaded(folder))


# How each benchmark is printed, and where its JSON goes by default.
BENCH_OUTPUT = {
    "host_cost": ("format_host_cost", "results/bench/host-{backend}.json"),
    "kernel_bench": ("format_kernel_bench", "results/bench/kernels-{preset}-{backend}.json"),
    "model_bench": ("format_model_bench", "results/bench/model-{model}-{backend}.json"),
    "peer_bench": ("format_peer_bench", "results/bench/compare-{model}-{backend}.json"),
}

# Benchmarks that also write a self-contained HTML report beside their JSON.
BENCH_HTML = {"model_bench": "write_model_bench_html", "peer_bench": "write_peer_bench_html"}


def _peer(args) -> int:
    from .codegen import repo_root
    from .peer import PeerError, build_peer, export_peer

    try:
        folder = build_peer(repo_root(), args.model, args.layers, args.seed,
                            log=lambda line: print(line, file=sys.stderr, flush=True))
    except PeerError as error:
        print(f"peer build: {error}", file=sys.stderr)
        return 1
    if args.export:
        print(f"[peer] exported to {export_peer(folder, Path(args.export))}", file=sys.stderr)
    print(folder.name)
    return 0


def _prepare_compare(options: dict) -> None:
    """Builds (or finds) the peer model for a comparison and names it in the options."""
    from .codegen import repo_root
    from .peer import build_peer

    workload_defaults = {o.name: o.default for o in _workload("peer_bench").options}
    model = options.get("model", workload_defaults["model"])
    layers = options.get("layers", workload_defaults["layers"])
    seed = options.get("seed", workload_defaults["seed"])
    folder = build_peer(repo_root(), model, layers, seed, log=lambda line: print(line, file=sys.stderr, flush=True))
    options["key"] = folder.name


def _unpinned_oracle() -> str | None:
    """Why this Python cannot be the oracle (None where it can): the oracle is pyproject's pinned torch and
    transformers (its `oracle` extra); a GPU host may carry other versions, which are not the oracle."""
    import tomllib
    from importlib.metadata import PackageNotFoundError, version

    from .codegen import repo_root

    pins = tomllib.loads((repo_root() / "pyproject.toml").read_text())["project"]["optional-dependencies"]["oracle"]
    for name, pinned in (pin.split("==") for pin in pins if pin.split("==")[0] in ("torch", "transformers")):
        try:
            found = version(name)
        except PackageNotFoundError:
            return f"no {name} here"
        if found.split("+")[0] != pinned:
            return f"{name} {found} here, not the pinned {pinned}"
    return None


def _judge_compare(report: dict, artifacts: dict, json_path: str) -> None:
    """Both engines' logits against the transformers oracle; the result is failed unless both pass. Without
    the pinned oracle (a GPU host) the logits are kept beside the JSON (<json>.artifacts/) for `peer judge`."""
    unpinned = _unpinned_oracle()
    if unpinned is not None:
        folder = _artifacts_folder(json_path)
        _keep_artifacts(folder, {name: data for name, data in artifacts.items() if name.endswith(".f32")})
        print(f"{unpinned}: both engines' logits kept in {folder} (judge them with the pinned oracle: "
              f"`webgpu-llm-lab peer judge {json_path}`)", file=sys.stderr)
        return
    from .oracle.model import verify_peer_report

    report["oracle"] = verify_peer_report(report, artifacts.__getitem__)
    report["result"] = "passed" if all(v["passed"] for v in report["oracle"].values()) else "failed"


def _peer_judge(args) -> int:
    from .report import format_peer_bench

    path = Path(args.report)
    report = json.loads(path.read_text())
    folder = _artifacts_folder(str(path))
    _judge_compare(report, {p.name: p.read_bytes() for p in folder.iterdir()}, str(path))
    print(format_peer_bench(report))
    _write_json(report, str(path))
    from .html_report import write_peer_bench_html
    print(f"html: {write_peer_bench_html(report, path.with_suffix('.html'))}")
    print(f"result: {report['result']}")
    return _exit_code(report["result"])


def _workload(name: str):
    from ..workloads import get

    return get(name)


def _bench(args) -> int:
    from . import report as formats
    from ..workloads import by_kind

    workload = next(w for w in by_kind("bench") if args.target in (w.name, *w.aliases))
    given = _given(args, ("dispatches", "steps", "preset", "repeats", "trials", "only", "model", "layers", "prompt",
                          "decode", "policy", "batch", "profile", "context", "position", "peer", "flavour",
                          "peer_device", "seed", "checked", "fuse_norm", "attention", "per_submit", "kv", "tuning",
                          "temperature", "top_k", "top_p"))
    if args.chain_mb is not None:
        given["chain_bytes"] = int(args.chain_mb * (1 << 20))
    options = {"suite": workload.name, **{k: v for k, v in given.items() if workload.option(k)}}
    ignored = sorted(set(given) - set(options))
    if ignored:
        print(f"bench {args.target}: {workload.name} takes no {', '.join(ignored)}; valid: "
              f"{[o.name for o in workload.options]}", file=sys.stderr)
        return 2
    comparing = workload.name == "peer_bench"
    try:
        if comparing:
            _prepare_compare(options)
        report, artifacts = _run_suite(args.backend, options, args.timeout, args.driver, args.browser_flags)
    except ValueError as error:
        print(f"bench: {error}", file=sys.stderr)
        return 2
    if report is None:
        return 1
    formatter, default_json = BENCH_OUTPUT[workload.name]
    json_path = args.json or default_json.format(backend=args.backend, preset="", model=options.get("model", ""))
    if comparing:
        _judge_compare(report, artifacts, json_path)
    print(getattr(formats, formatter)(report))
    preset = options.get("preset", workload.option("preset").default if workload.option("preset") else "")
    json_path = args.json or default_json.format(backend=args.backend, preset=preset, model=options.get("model", ""))
    _write_json(report, json_path)
    if workload.name in BENCH_HTML:
        from . import html_report

        written = getattr(html_report, BENCH_HTML[workload.name])(report, Path(json_path).with_suffix(".html"))
        print(f"html: {written}")
    print(f"result: {report['result']}")
    return _exit_code(report["result"])


def _choices(workloads, option: str) -> list:
    """Every allowed value of `option` across `workloads` (the registry's, not restated here)."""
    return list(dict.fromkeys(v for w in workloads if w.option(option) for v in w.option(option).allowed))


def _per_suite(workloads, option: str) -> str:
    return "; ".join(f"{w.name}: {' | '.join(w.option(option).allowed)}" for w in workloads if w.option(option))


def _generate(args) -> int:
    from ..ops.sample import Sampling
    from ..runtime import Runtime
    from .generate import generate_text, summary

    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    try:        # refused before anything loads
        sampling = Sampling.or_greedy(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    except ValueError as error:
        print(f"generate: {error}", file=sys.stderr)
        return 2
    if args.backend == "browser":
        return _generate_in_browser(args)

    async def go():
        runtime = await Runtime.create("native")
        return await generate_text(runtime, args.model, args.prompt, steps=args.steps, chat=args.chat,
                                   system=args.system, policy=args.policy, batch=args.batch, sampling=sampling,
                                   write=write)

    result = asyncio.run(go())
    print()
    print(summary(result), file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


def _generate_in_browser(args) -> int:
    """The page's chat view on the same model and prompt: the model must be one the dev server serves (the
    vendored name, or a .gguf file under web/); the text arrives whole with the report."""
    from ..checks.chat import VENDORED
    from .codegen import repo_root
    from .generate import summary

    web = repo_root() / "web"
    model_file = args.model
    if model_file not in VENDORED:
        path = Path(model_file).resolve()
        if path.suffix != ".gguf" or not path.is_relative_to(web):
            print(f"generate: --backend browser takes {' or '.join(sorted(VENDORED))} or a .gguf file under {web} "
                  f"(the page reads it from the dev server), not {model_file!r}", file=sys.stderr)
            return 2
        model_file = path.relative_to(web).as_posix()
    options = {"suite": "chat", "model_file": model_file, "prompt": args.prompt, "chat": args.chat,
               "system": args.system or "", "steps": args.steps, "policy": args.policy, "batch": args.batch,
               "temperature": args.temperature, "top_k": args.top_k, "top_p": args.top_p, "seed": args.seed}
    report, _ = _run_suite("browser", options, args.timeout, args.driver, args.browser_flags)
    if report is None:
        return 1
    print(report["text"])
    print(summary(report), file=sys.stderr)
    _write_json(report, args.json)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="webgpu-llm-lab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="serve the lab page on 127.0.0.1 and print its URL")
    serve.add_argument("--port", type=int, default=8000, help="0 picks a free port (default 8000)")
    serve.add_argument("--results", default="results", help="where page uploads are stored (default results/)")
    serve.add_argument("--verbose", action="store_true", help="log every request")
    serve.add_argument("--no-oracle", action="store_true",
                       help="do not judge the model views' logits (the page then says NOT CHECKED)")
    serve.set_defaults(func=_serve)

    gen = sub.add_parser("gen", help="expand shaders/ into py_runtime/kernels/generated/",
                         description="Expand shaders/**/*.wgsl (templates with a sibling .yaml, or verbatim) into "
                                     "py_runtime/kernels/generated/, validating everything before writing anything, "
                                     "then publishing all changed files as one transaction. Orphaned outputs (no "
                                     "source) block generation and are never deleted: remove them by hand. Every "
                                     "kernel's sha256 is pinned in py_runtime/kernels/kernels.lock.json: a changed "
                                     "payload fails gen and gen --check until gen --update-lock.")
    mode = gen.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="write nothing; exit 1 on missing, stale or orphaned outputs or a lock mismatch")
    mode.add_argument("--update-lock", action="store_true",
                      help="accept the current payloads: rewrite the lock along with the outputs")
    gen.set_defaults(func=_gen)
    arguments = sys.argv[1:] if argv is None else argv
    if arguments[:1] == ["gen"]:        # before the workloads' import, which reads the generated registry
        args = parser.parse_args(arguments)
        return args.func(args)

    from ..workloads import DEFAULT_SUITE, TUNING, by_kind
    from ..ops.tuning import TABLE_NAMES

    checks, benches = by_kind("check"), by_kind("bench")
    check = sub.add_parser("check", help="run a check suite and judge it against the host oracle")
    check.add_argument("--suite", choices=[w.name for w in checks], default=DEFAULT_SUITE)
    check.add_argument("--preset", choices=_choices(checks, "preset"),
                       help=f"(default: the suite's) {_per_suite(checks, 'preset')}")
    check.add_argument("--backend", choices=["native", "browser"], default="native")
    check.add_argument("--ops", nargs="*", help="operators or parts (default: all)")
    check.add_argument("--only", nargs="+", help="attention: only these cases (by name)")
    check.add_argument("--keep-artifacts", metavar="DIR", help="write what the suite read back from the GPU to DIR")
    check.add_argument("--lengths", nargs="*", type=int,
                       help=f"(default: the suite's; unary: {' '.join(map(str, UNARY_CLI_LENGTHS))})")
    check.add_argument("--seed", type=int)
    check.add_argument("--max-workgroups-per-dim", type=int, help="force 2-D grids at small lengths")
    check.add_argument("--no-profile", dest="profile", action="store_false", default=None,
                       help="skip timestamp queries")
    check.add_argument("--model", choices=_choices(checks, "model"), help="model: the geometry (default llama)")
    check.add_argument("--layers", type=int, help="model: decoder layers (default 2)")
    check.add_argument("--prompt", type=int, help="model: prompt tokens (default 32)")
    check.add_argument("--decode", type=int, help="model: greedy decode steps (default 8)")
    check.add_argument("--policy", choices=_choices(checks, "policy"), help="model: activation policy (default f32)")
    check.add_argument("--steps", type=int, help="model_soak: greedy decode steps per run (default 10000)")
    check.add_argument("--batch", type=int, help="model_soak: decode steps between readbacks of the ids")
    check.add_argument("--tuning", choices=TABLE_NAMES, help=f"model: {TUNING.help}")
    check.add_argument("--timeout", type=float, default=600, help="browser run limit in seconds")
    check.add_argument("--json", help="also write the report to this file")
    check.add_argument("--judge", metavar="REPORT", help="run nothing: judge a run whose oracle was absent (model: "
                                                         "torch and transformers) from REPORT and REPORT's .artifacts/")
    check.set_defaults(func=_check)

    bench = sub.add_parser("bench", help="benchmarks that print measured figures (not pass/fail timings)")
    bench.add_argument("target", choices=[name for w in benches for name in (*w.aliases, w.name)],
                       help="; ".join(f"{'/'.join((*w.aliases, w.name))}: {w.title}" for w in benches))
    bench.add_argument("--backend", choices=["native", "browser"], default="browser")
    bench.add_argument("--dispatches", type=int, help="host: dispatches per step (a 16-layer decode: ~230)")
    bench.add_argument("--steps", type=int, help="host: steps measured")
    bench.add_argument("--preset", choices=_choices(benches, "preset"),
                       help=f"(default: the suite's) {_per_suite(benches, 'preset')}; llama_step and qwen_step "
                            "time a whole decode token's linears")
    bench.add_argument("--only", nargs="+", help="kernels: only the cases whose name (with its [shape]) contains one of "
                                                 "these")
    bench.add_argument("--repeats", type=int, help="kernels: dispatches per measured replay (default 10)")
    bench.add_argument("--trials", type=int, help="kernels: replays per row, median (default 5)")
    bench.add_argument("--chain-mb", type=float,
                       help="kernels: MiB of weight copies per decode chain, several times the GPU's L2 "
                            "(default 384; 0 skips the chain figures; small values for CPU adapters)")
    bench.add_argument("--model", choices=_choices(benches, "model"), help="model: the geometry (default llama)")
    bench.add_argument("--layers", type=int, help="model: decoder layers (default: the model's)")
    bench.add_argument("--prompt", type=int, help="model: prompt tokens (default 128)")
    bench.add_argument("--decode", type=int, help="model: decode steps (default 64)")
    _sampling_arguments(bench, "model: ")
    bench.add_argument("--policy", choices=_choices(benches, "policy"), help="model: activation policy (default f32)")
    bench.add_argument("--batch", type=int, help="model: decode steps between readbacks of the ids (default 16)")
    bench.add_argument("--per-submit", dest="per_submit", type=int,
                       help="model: decode steps per submit, one command buffer (default: the decoder's)")
    bench.add_argument("--context", type=int, help="model: measure the decode steps ending at this position "
                                                   "(unmeasured steps fill the cache first; default: after the prompt)")
    bench.add_argument("--position", choices=_choices(benches, "position"),
                       help="model: where the position lives between decode steps (default auto: the GPU where "
                            "the plan allows)")
    bench.add_argument("--no-fuse-norm", dest="fuse_norm", action="store_false", default=None,
                       help="model: each decode RMSNorm its own dispatch (default: inside the GEMV that reads it)")
    bench.add_argument("--attention", choices=_choices(benches, "attention"),
                       help="model: attention routes (default auto: the one-pass decode up to its reach, "
                            "FlashDecoding past it; flash: FlashDecoding at every decode context)")
    bench.add_argument("--kv", choices=_choices(benches, "kv"),
                       help="model: the KV caches' kernels (default packed: f16 pairs in u32; f16: shader-f16 types "
                            "where the device has the feature)")
    bench.add_argument("--peer", choices=_choices(benches, "peer"), help="compare: the peer engine (default ort-web)")
    bench.add_argument("--flavour", choices=_choices(benches, "flavour"),
                       help="compare: ORT-web's wasm build (default jspi)")
    bench.add_argument("--peer-device", choices=_choices(benches, "peer_device"),
                       help="compare: the peer on our GPUDevice (shared), its own without subgroups (own), or auto "
                            "(default: ours unless the adapter's subgroups are narrower than 8, as SwiftShader's)")
    bench.add_argument("--seed", type=int, help="model, compare: the weights', prompt's (and sampler's) seed")
    bench.add_argument("--checked", type=int, help="compare: decode steps whose logits the oracle judges (default all)")
    bench.add_argument("--no-profile", dest="profile", action="store_false", default=None,
                       help="model: skip the profiled prefill and decode step")
    bench.add_argument("--tuning", choices=TABLE_NAMES, help=f"model, kernels: {TUNING.help}")
    bench.add_argument("--timeout", type=float, default=600, help="browser run limit in seconds")
    bench.add_argument("--json", help="where to write the JSON (default results/bench/<target>-<backend>.json)")
    bench.set_defaults(func=_bench)

    peer = sub.add_parser("peer", help="the peer engine's model (ONNX Runtime Web): build it from our weights")
    peer_sub = peer.add_subparsers(dest="peer_command", required=True)
    peer_build = peer_sub.add_parser("build", help="write our synthetic model as an HF checkpoint, convert it with "
                                                   "the onnxruntime-genai builder (int4, WebGPU), cached by content "
                                                   "hash under web/vendor/peer/; prints the folder's name")
    peer_build.add_argument("--model", choices=["llama", "qwen3", "tiny"], default="llama")
    peer_build.add_argument("--layers", type=int, help="decoder layers (default: the model's)")
    peer_build.add_argument("--seed", type=int, default=7)
    peer_build.add_argument("--export", help="also copy what rebuilds it (a few MB) to EXPORT/<key>/, for a GPU host "
                                             "without the builder (copy it under web/vendor/peer/ there)")
    peer_build.set_defaults(func=_peer)
    peer_judge = peer_sub.add_parser("judge", help="judge a saved comparison (bench compare --json J where no "
                                                   "transformers was) against the oracle: J and J.artifacts/")
    peer_judge.add_argument("report")
    peer_judge.set_defaults(func=_peer_judge)
    generate = sub.add_parser("generate", help="a checkpoint's continuation of a prompt (greedy or sampled), streamed",
                              description="Load a model (a .gguf file, or a folder with config.json, model.safetensors "
                                          "or its sharded index, and tokenizer.json), quantize its weights to q4gsw "
                                          "on the GPU and decode (greedily, or sampled on the GPU with --temperature), "
                                          "printing the text as it is read back; "
                                          "load, prefill and decode times and tok/s go to stderr.")
    generate.add_argument("--model", required=True, help="a .gguf file or an HF checkpoint folder")
    generate.add_argument("--prompt", required=True)
    generate.add_argument("--steps", type=int, default=64, help="tokens to generate at most (default 64)")
    generate.add_argument("--chat", action="store_true", help="the prompt is a user message in the chat template")
    generate.add_argument("--system", help="a system message before it (with --chat; default: the one the "
                                                 "model's chat template adds, if any)")
    generate.add_argument("--policy", choices=["f32", "int8x"], default="f32")
    generate.add_argument("--batch", type=int, default=8, help="decode steps between id reads (default 8)")
    _sampling_arguments(generate)
    chat = next(w for w in by_kind("view") if w.name == "chat")     # the page's chat view: the same run's defaults
    generate.set_defaults(**{name: chat.option(name).default for name in ("temperature", "top_k", "top_p")})
    generate.add_argument("--seed", type=int, default=0, help="the sampler's seed, 0..2^32-1: the same seed and "
                                                              "prompt give the same text (default 0)")
    generate.add_argument("--json", help="also write the result (ids, text, timings) to this file")
    generate.add_argument("--backend", choices=["native", "browser"], default="native",
                          help="browser: the page's chat view in headless Chromium (--model: smollm2, the vendored "
                               "file, or a .gguf under web/)")
    generate.add_argument("--timeout", type=float, default=600, help="browser run limit in seconds")
    generate.set_defaults(func=_generate)
    for command in (check, bench, generate):
        command.add_argument("--driver", choices=["playwright", "plain"], default="playwright",
                             help="browser runs: Playwright, or plain Chromium + page upload (no Playwright)")
        command.add_argument("--browser-flags", nargs="*", default=[], metavar="FLAG",
                             help="browser runs: Chromium flags beside the lab's, e.g. "
                                  "--browser-flags=--enable-dawn-features=vulkan_enable_f16_on_nvidia")

    args = parser.parse_args(argv)
    return args.func(args)
