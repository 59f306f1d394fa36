"""webgpu-llm-lab: serve | gen | check."""

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


def _check(args) -> int:
    from .report import format_report

    options = {"lengths": args.lengths, "seed": args.seed, "profile": not args.no_profile}
    if args.ops:
        options["ops"] = args.ops
    if args.max_workgroups_per_dim:
        options["max_workgroups_per_dim"] = args.max_workgroups_per_dim
    if args.backend == "native":
        from ..app import run

        report = asyncio.run(run("native", options))
    else:
        from .codegen import repo_root
        from .headless import HeadlessLab

        root = repo_root()
        query = {"ops": ",".join(options.get("ops", [])), "lengths": ",".join(map(str, args.lengths)),
                 "seed": args.seed, "profile": int(options["profile"])}
        with HeadlessLab(web_root=root / "web", results_root=root / "results") as lab:
            run_ = lab.run_page({k: v for k, v in query.items() if v != ""}, timeout_s=args.timeout)
        if run_.state != "done":
            print(f"browser run {run_.state} at stage {run_.stage}: {run_.error}", file=sys.stderr)
            for line in run_.console_errors + run_.page_errors:
                print(f"  console: {line}", file=sys.stderr)
            return 1
        report = run_.report
    print(format_report(report))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
        print(f"report: {args.json}")
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

    args = parser.parse_args(argv)
    return args.func(args)
