"""webgpu-llm-lab: serve | gen | check | bench."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
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


def _run_suite(backend: str, options: dict, timeout: float) -> dict | None:
    """Run one suite natively, or in headless Chromium through the dev server (None on failure)."""
    if backend == "native":
        from ..app import run

        return asyncio.run(run("native", options))
    from .codegen import repo_root
    from .headless import HeadlessLab
    from .vendor import ensure_current

    root = repo_root()
    ensure_current(root)
    query = {k: ",".join(map(str, v)) if isinstance(v, (list, tuple)) else (int(v) if isinstance(v, bool) else v)
             for k, v in options.items()}
    with HeadlessLab(web_root=root / "web", results_root=root / "results") as lab:
        page = lab.run_page(query, timeout_s=timeout)
    if page.state != "done":
        print(f"browser run {page.state} at stage {page.stage}: {page.error}", file=sys.stderr)
        for line in page.console_errors + page.page_errors:
            print(f"  console: {line}", file=sys.stderr)
        return None
    return page.report


def _write_json(report: dict, path: str | None) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(report, indent=1) + "\n")
        print(f"report: {path}")


def _check(args) -> int:
    from .report import format_report

    options = {"lengths": args.lengths, "seed": args.seed, "profile": not args.no_profile}
    if args.ops:
        options["ops"] = args.ops
    if args.max_workgroups_per_dim:
        options["max_workgroups_per_dim"] = args.max_workgroups_per_dim
    report = _run_suite(args.backend, options, args.timeout)
    if report is None:
        return 1
    print(format_report(report))
    _write_json(report, args.json)
    return 0 if report["passed"] else 1


def _bench(args) -> int:
    from .report import format_host_cost

    if args.target != "host":
        print(f"unknown bench target {args.target!r}", file=sys.stderr)
        return 2
    report = _run_suite(args.backend, {"suite": "host_cost", "dispatches": args.dispatches, "steps": args.steps},
                        args.timeout)
    if report is None:
        return 1
    print(format_host_cost(report))
    _write_json(report, args.json or f"results/bench/host-{args.backend}.json")
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

    check = sub.add_parser("check", help="run the unary kernel check and print a table (and JSON)")
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
    bench.add_argument("target", choices=["host"], help="host: host time per dispatch, naive encoding vs plan replay")
    bench.add_argument("--backend", choices=["native", "browser"], default="browser")
    bench.add_argument("--dispatches", type=int, default=230, help="dispatches per step (a 16-layer decode: ~230)")
    bench.add_argument("--steps", type=int, default=50)
    bench.add_argument("--timeout", type=float, default=600, help="browser run limit in seconds")
    bench.add_argument("--json", help="where to write the JSON (default results/bench/host-<backend>.json)")
    bench.set_defaults(func=_bench)

    args = parser.parse_args(argv)
    return args.func(args)
