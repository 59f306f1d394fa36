"""webgpu-llm-lab: serve | gen | check | bench."""

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
    server = LabServer(web_root=root / "web", results_root=root / args.results, port=args.port, verbose=args.verbose)
    print(f"webgpu-llm-lab: serving {root / 'web'} at {server.url}  (Ctrl-C to stop)", flush=True)
    print(f"open {server.url} in Chromium with --enable-unsafe-webgpu; it runs the unary check by default", flush=True)
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


def _run_suite(backend: str, options: dict, timeout: float, driver: str = "playwright"):
    """Run one suite natively, or in headless Chromium through the dev server. Returns (report,
    artifacts): {name: bytes} of what the suite handed to its sink; (None, None) on failure.
    driver "plain" needs no Playwright: the page uploads its report (the GPU host has no Playwright)."""
    if backend == "native":
        from ..app import run

        artifacts = {}

        async def sink(name, data):
            artifacts[name] = bytes(data)

        return asyncio.run(run("native", {**options, "artifacts": True}, sink)), artifacts
    from .codegen import repo_root
    from .vendor import ensure_current

    root = repo_root()
    ensure_current(root)
    results = root / "results"
    run_id = time.strftime("cli-%Y%m%d-%H%M%S")
    query = {k: ",".join(map(str, v)) if isinstance(v, (list, tuple)) else (int(v) if isinstance(v, bool) else v)
             for k, v in options.items()}
    if driver == "plain":
        from .plain_browser import run_page_plain

        state, result = run_page_plain(web_root=root / "web", results_root=results, query=query, run_id=run_id,
                                       timeout_s=timeout, log=results / "chromium.log")
        if state != "done":
            print(f"browser run {state}: {result}", file=sys.stderr)
            return None, None
        return result, _uploaded(results / run_id)
    from .headless import HeadlessLab

    with HeadlessLab(web_root=root / "web", results_root=results) as lab:
        page = lab.run_page({**query, "upload": run_id}, timeout_s=timeout)
    if page.state != "done":
        print(f"browser run {page.state} at stage {page.stage}: {page.error}", file=sys.stderr)
        for line in page.console_errors + page.page_errors:
            print(f"  console: {line}", file=sys.stderr)
        return None, None
    return page.report, _uploaded(results / run_id)


def _uploaded(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()} if folder.is_dir() else {}


def _write_json(report: dict, path: str | None) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(report, indent=1) + "\n")
        print(f"report: {path}")


def _check(args) -> int:
    from .report import format_report

    if args.suite == "unary":
        options = {"lengths": args.lengths, "seed": args.seed, "profile": not args.no_profile}
        if args.ops:
            options["ops"] = args.ops
        if args.max_workgroups_per_dim:
            options["max_workgroups_per_dim"] = args.max_workgroups_per_dim
    else:
        options = {"suite": args.suite, **({"preset": args.preset} if args.suite == "q4" else {})}
    report, artifacts = _run_suite(args.backend, options, args.timeout, args.driver)
    if report is None:
        return 1
    _write_json(report, args.json)
    if args.suite == "unary":
        print(format_report(report))
        return 0 if report["passed"] else 1
    from .oracle import (verify_decoder_blocks_report, verify_elementwise_report, verify_q4_report,
                         verify_runtime_report)

    try:
        if args.suite == "q4":
            worst = verify_q4_report(report, artifacts.__getitem__)
            for case in report["cases"]:
                routes = "; ".join(f"M={r['rows']}: {', '.join(r['routes'])}" for r in case["runs"])
                print(f"{case['name']:<22} worst err/bound {worst[case['name']]:.4f}   {routes}")
        elif args.suite == "runtime":
            verify_runtime_report(report, artifacts.__getitem__)
            print("runtime-core checks: caching, resize, profiler, attestation, errors, device loss: all as expected")
        elif args.suite == "elementwise":
            verify_elementwise_report(report, artifacts)
            print(f"elementwise: {len(report['cases'])} cases, every element within its bound")
        else:
            verify_decoder_blocks_report(report, artifacts)
            print("decoder blocks: every output within its bound, every route attested")
    except AssertionError as failure:
        print(f"FAILED against the host oracle: {failure}", file=sys.stderr)
        return 1
    print(f"PASSED against the float64 host oracle on {report['adapter']['info']}")
    return 0


def _bench(args) -> int:
    from .report import format_host_cost, format_kernel_bench

    if args.target == "host":
        options = {"suite": "host_cost", "dispatches": args.dispatches, "steps": args.steps}
        default_json, formatter = f"results/bench/host-{args.backend}.json", format_host_cost
    else:
        options = {"suite": "kernel_bench", "preset": args.preset, "repeats": args.repeats, "trials": args.trials,
                   "chain_bytes": int(args.chain_mb * (1 << 20)), **({"only": args.only} if args.only else {})}
        default_json, formatter = f"results/bench/kernels-{args.preset}-{args.backend}.json", format_kernel_bench
    report, _ = _run_suite(args.backend, options, args.timeout, args.driver)
    if report is None:
        return 1
    print(formatter(report))
    _write_json(report, args.json or default_json)
    return 0 if report["passed"] else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="webgpu-llm-lab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="serve the lab page on 127.0.0.1 and print its URL")
    serve.add_argument("--port", type=int, default=8000, help="0 picks a free port (default 8000)")
    serve.add_argument("--results", default="results", help="where page uploads are stored (default results/)")
    serve.add_argument("--verbose", action="store_true", help="log every request")
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

    check = sub.add_parser("check", help="run a check suite and judge it against the host oracle")
    check.add_argument("--suite", choices=["unary", "q4", "runtime", "elementwise", "decoder_blocks"], default="unary")
    check.add_argument("--preset", default="ci", help="q4: ci | full")
    check.add_argument("--backend", choices=["native", "browser"], default="native")
    check.add_argument("--ops", nargs="*", help="operators (default: all)")
    check.add_argument("--lengths", nargs="*", type=int, default=[1, 63, 64, 65, 4097, 1_000_003])
    check.add_argument("--seed", type=int, default=2024)
    check.add_argument("--max-workgroups-per-dim", type=int, help="force 2-D grids at small lengths")
    check.add_argument("--no-profile", action="store_true", help="skip timestamp queries")
    check.add_argument("--timeout", type=float, default=600, help="browser run limit in seconds")
    check.add_argument("--json", help="also write the report to this file")
    check.set_defaults(func=_check)

    bench = sub.add_parser("bench", help="benchmarks that print measured figures (not pass/fail timings)")
    bench.add_argument("target", choices=["host", "kernels"],
                       help="host: host time per dispatch, naive encoding vs plan replay; kernels: GPU time, GB/s, "
                            "GFLOP/s and the ratio to a streaming read, per kernel and shape")
    bench.add_argument("--backend", choices=["native", "browser"], default="browser")
    bench.add_argument("--dispatches", type=int, default=230, help="dispatches per step (a 16-layer decode: ~230)")
    bench.add_argument("--steps", type=int, default=50)
    bench.add_argument("--preset", default="decode",
                       help="kernels: tiny | decode | decode_int8 | decode_int8x | gemv_variants | gemv_vocab | gemv_next | "
                            "gemv_int8x | prefill | llama_step | qwen_step (a whole decode token's linears)")
    bench.add_argument("--only", nargs="+", help="kernels: only the cases whose name (with its [shape]) contains one of "
                                                 "these")
    bench.add_argument("--repeats", type=int, default=10, help="kernels: dispatches per measured replay")
    bench.add_argument("--trials", type=int, default=5, help="kernels: replays per row (median)")
    bench.add_argument("--chain-mb", type=float, default=384,
                       help="kernels: MiB of weight copies per decode chain, several times the GPU's L2 "
                            "(0 skips the chain figures; small values for CPU adapters)"),
    bench.add_argument("--timeout", type=float, default=600, help="browser run limit in seconds")
    bench.add_argument("--json", help="where to write the JSON (default results/bench/host-<backend>.json)")
    bench.set_defaults(func=_bench)
    for command in (check, bench):
        command.add_argument("--driver", choices=["playwright", "plain"], default="playwright",
                             help="browser runs: Playwright, or plain Chromium + page upload (no Playwright)")

    args = parser.parse_args(argv)
    return args.func(args)
