"""The one entry point behind the page, the CLI and the tests: options in, a JSON-able report out.

They differ only in the backend they pass and where artifacts go (an upload from the page, a dict
in a test, files from the CLI).
"""

from __future__ import annotations

from .checks.host_cost import run_host_cost
from .checks.kernel_bench import CHAIN_BYTES, run_kernel_bench
from .checks.q4_linear import run_q4_checks
from .checks.runtime_core import run_runtime_checks
from .checks.unary import CheckOptions, run_unary_check
from .runtime import Runtime

__all__ = ["run"]


async def run(backend: str, options: dict | None = None, sink=None) -> dict:
    options = dict(options or {})
    suite = options.pop("suite", "unary")
    if suite == "unary":
        check_options = CheckOptions.from_json(options)
        return await run_unary_check(await Runtime.create(backend), check_options, sink)
    if suite == "runtime":
        unknown = sorted(set(options) - {"seed", "artifacts"})
        if unknown:
            raise ValueError(f"unknown option(s) {unknown} for suite 'runtime'; known: ['seed']")
        return await run_runtime_checks(await Runtime.create(backend), seed=options.get("seed", 77), sink=sink)
    if suite == "q4":
        unknown = sorted(set(options) - {"preset", "only", "seed", "artifacts"})
        if unknown:
            raise ValueError(f"unknown option(s) {unknown} for suite 'q4'; known: ['preset', 'only', 'seed']")
        return await run_q4_checks(await Runtime.create(backend), preset=options.get("preset", "ci"),
                                   only=options.get("only"), seed=options.get("seed", 5), sink=sink)
    if suite == "kernel_bench":
        known = ["preset", "repeats", "trials", "chain_bytes", "only"]
        unknown = sorted(set(options) - {*known, "artifacts"})
        if unknown:
            raise ValueError(f"unknown option(s) {unknown} for suite 'kernel_bench'; known: {known}")
        # A decode chain holds up to 256 dispatches besides the rest: room for 2048 params slots.
        return await run_kernel_bench(await Runtime.create(backend, params_capacity=1 << 19),
                                      preset=options.get("preset", "decode"),
                                      repeats=options.get("repeats", 10), trials=options.get("trials", 5),
                                      chain_bytes=options.get("chain_bytes", CHAIN_BYTES), only=options.get("only"))
    if suite == "host_cost":
        unknown = sorted(set(options) - {"dispatches", "steps", "artifacts"})
        if unknown:
            raise ValueError(f"unknown option(s) {unknown} for suite 'host_cost'; known: ['dispatches', 'steps']")
        return await run_host_cost(await Runtime.create(backend), dispatches=options.get("dispatches", 230),
                                   steps=options.get("steps", 50))
    if suite == "elementwise":
        from .checks.elementwise import PARAMS_CAPACITY, ElementwiseOptions, run_elementwise_check
        elementwise_options = ElementwiseOptions.from_json(options)
        runtime = await Runtime.create(backend, params_capacity=PARAMS_CAPACITY)
        return await run_elementwise_check(runtime, elementwise_options, sink)
    if suite == "decoder_blocks":
        from .checks.decoder_blocks import DecoderBlocksOptions, run_decoder_blocks
        decoder_options = DecoderBlocksOptions.from_json(options)
        return await run_decoder_blocks(await Runtime.create(backend), decoder_options, sink)
    raise ValueError(f"unknown suite {suite!r}; known: 'unary', 'runtime', 'host_cost', 'elementwise'")
