"""The unary self-check: generate inputs on the GPU, run every requested operator at every length,
check the results in-runtime against a float64 `math` reference, and time every dispatch.

The in-runtime check covers a deterministic sample of each output (all of it for short lengths);
the host tests re-check every element against numpy from the uploaded artifacts. Each output
buffer is poisoned first and has a guard tail, so unwritten and overrun elements are caught.
"""

from __future__ import annotations

import math
import time
from array import array
from dataclasses import dataclass, field

from ..ops import unary as unary_ops
from ..ops.synth import fill_uniform, synth_value
from ..plan import Plan
from ..runtime import Runtime
from .outcome import no_progress, verdict

__all__ = ["CheckOptions", "run_unary_check", "POISON", "GUARD_ELEMENTS", "allowed_error", "ulp32"]

POISON = bytes.fromhex("addbba7f")     # f32 NaN 0x7FBADBAD, little-endian
GUARD_ELEMENTS = 64

_REFERENCE = {
    "abs": abs,
    "neg": lambda x: -x,
    "round": round,                     # Python rounds half to even, as WGSL round() does
    "sqrt": math.sqrt,
    "rsqrt": lambda x: 1.0 / math.sqrt(x),
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tanh": math.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + math.exp(-x)),
    "silu": lambda x: x / (1.0 + math.exp(-x)),
    "hardswish": lambda x: x * min(max(x + 3.0, 0.0), 6.0) / 6.0,
}


@dataclass(frozen=True, kw_only=True)
class CheckOptions:
    ops: tuple[str, ...] = unary_ops.UNARY_OPS
    lengths: tuple[int, ...] = (1, 4097, 65537)
    seed: int = 2024
    profile: bool = True
    max_workgroups_per_dim: int | None = None   # force a 2-D grid at small lengths
    sample: int = 4096                          # elements checked in-runtime per case
    artifacts: bool = False                     # hand inputs and outputs to the sink


def ulp32(value: float) -> float:
    """Spacing of f32 values at |value| (the smallest subnormal step at zero)."""
    if value == 0 or not math.isfinite(value):
        return 2.0 ** -149
    _, exponent = math.frexp(abs(value))
    return 2.0 ** max(exponent - 24, -149)


def allowed_error(op: str, x: float, exact: float) -> float:
    t = unary_ops.TOLERANCES[op]
    return ((t.ulps + t.ulps_per_abs_x * abs(x)) * ulp32(exact)
            + (t.abs_units + t.abs_units_per_abs_x * abs(x)) * 2.0 ** -23)


def _sample_indices(length: int, limit: int) -> list[int]:
    if length <= limit:
        return list(range(length))
    edge = min(64, limit // 4)
    picks = set(range(edge)) | set(range(length - edge, length))
    stride = (length - 1) / max(1, limit - 2 * edge - 1)
    picks |= {round(k * stride) for k in range(limit - 2 * edge)}
    return sorted(picks)


def _aligned_poison_count(data: bytes, end: int) -> int:
    count, position = 0, data.find(POISON, 0, end)
    while position != -1:
        if position % 4 == 0:
            count += 1
        position = data.find(POISON, position + 1, end)
    return count


@dataclass
class _Case:
    op: str
    length: int
    stream: int
    kernel: str
    workgroups: tuple
    checked: int = 0
    worst_ratio: float = 0.0        # max |err| / allowed over the checked elements
    failures: list = field(default_factory=list)
    routes: list = field(default_factory=list)
    route_mask: int = 0
    unwritten: int = 0
    tail_intact: bool = True
    input_matches_twin: bool = True

    @property
    def passed(self) -> bool:
        return not self.failures and not self.unwritten and self.tail_intact and self.input_matches_twin

    def to_json(self) -> dict:
        return {"op": self.op, "kernel": self.kernel, "length": self.length, "stream": self.stream,
                "workgroups": list(self.workgroups), "routes": self.routes, "route_mask": self.route_mask,
                "checked": self.checked, "worst_error_ratio": self.worst_ratio, "failures": self.failures[:5],
                "failure_count": len(self.failures), "unwritten": self.unwritten, "tail_intact": self.tail_intact,
                "input_matches_twin": self.input_matches_twin, "passed": self.passed}


def _check(case: _Case, options: CheckOptions, inputs: bytes, outputs: bytes) -> None:
    n = case.length
    value_range = unary_ops.INPUT_RANGES[case.op]
    reference = _REFERENCE[case.op]
    xs, ys = array("f"), array("f")
    xs.frombytes(inputs[:4 * n])
    ys.frombytes(outputs[:4 * n])
    for i in _sample_indices(n, options.sample):
        x = synth_value(value_range, options.seed, case.stream, i)
        if xs[i] != x:
            case.input_matches_twin = False
            case.failures.append({"index": i, "input": xs[i], "expected_input": x})
            continue
        exact = reference(x)
        error = abs(ys[i] - exact) if ys[i] == ys[i] else math.inf
        allowed = allowed_error(case.op, x, exact)
        ratio = error / allowed if allowed else (0.0 if error == 0 else math.inf)
        case.worst_ratio = max(case.worst_ratio, ratio)
        case.checked += 1
        if ratio > 1:
            case.failures.append({"index": i, "x": x, "gpu": ys[i], "exact": exact, "allowed": allowed})
    case.unwritten = _aligned_poison_count(outputs, 4 * n)
    tail = outputs[4 * n:4 * (n + GUARD_ELEMENTS)]
    case.tail_intact = tail == POISON * GUARD_ELEMENTS


async def run_unary_check(runtime: Runtime, options: CheckOptions, sink=None, progress=no_progress) -> dict:
    """Run the check; `sink(name, bytes)` (async) receives inputs and outputs when options.artifacts.

    One plan per operator (fill + unary) is recorded once and resized to each length: the live
    size `n` drives both dispatches' grids and params.
    """
    device = runtime.device
    profile = options.profile and "timestamp-query" in device.adapter.device_features
    cases, timings, all_stamps_quantized = [], [], []
    started = time.perf_counter()
    longest = max(options.lengths)
    for op_index, op in enumerate(options.ops):
        progress("unary ops", op_index, len(options.ops))
        stream = op_index + 1
        src = await runtime.tensors.allocate(f"{op}.src", (longest,))
        dst = await runtime.tensors.allocate(f"{op}.dst", (longest + GUARD_ELEMENTS,))
        plan = Plan(runtime, f"unary_check.{op}", live={"n": options.lengths[0]})
        await plan.add(fill_uniform(target=src, value_range=unary_ops.INPUT_RANGES[op], seed=options.seed,
                                    stream=stream, length="n", max_per_dim=options.max_workgroups_per_dim))
        await plan.add(unary_ops.unary(op, src=src, dst=dst, length="n", max_per_dim=options.max_workgroups_per_dim))
        plan.record()
        for n in options.lengths:
            plan.resize(n=n)
            device.write_buffer(dst.buffer, POISON * (n + GUARD_ELEMENTS))
            execution = await plan.replay(profile=profile)
            inputs = await device.read_buffer(src.buffer, 4 * n)
            outputs = await device.read_buffer(dst.buffer, 4 * (n + GUARD_ELEMENTS))
            case = _Case(op=op, length=n, stream=stream, kernel=unary_ops.kernel_name(op),
                         workgroups=tuple(plan.workgroups[3:6]), routes=list(execution.routes),
                         route_mask=execution.route_mask)
            _check(case, options, inputs, outputs)
            cases.append(case)
            if execution.rows:
                all_stamps_quantized.append(execution.quantized)
                timings += [{"op": op, "length": n, **row.to_json()} for row in execution.rows]
            if sink and options.artifacts:
                await sink(f"unary_{op}_{n}.in.f32", inputs)
                await sink(f"unary_{op}_{n}.out.f32", outputs)
        plan.release()
        runtime.tensors.release(src.name)
        runtime.tensors.release(dst.name)
    progress("unary ops", len(options.ops), len(options.ops))
    quantized = None
    if profile and any(q is not None for q in all_stamps_quantized):
        quantized = any(q for q in all_stamps_quantized)
    return {
        "suite": "unary",
        "adapter": device.adapter.to_json(),
        "options": {"ops": list(options.ops), "lengths": list(options.lengths), "seed": options.seed,
                    "max_workgroups_per_dim": options.max_workgroups_per_dim, "guard_elements": GUARD_ELEMENTS,
                    "poison_hex": POISON.hex()},
        "tolerances": {op: vars(unary_ops.TOLERANCES[op]) for op in options.ops},
        "timestamps": {"profiled": profile, "quantized": quantized},
        "cases": [c.to_json() for c in cases],
        "timings": timings,
        "pipelines_created": runtime.pipelines.created,
        "bind_groups_created": runtime.bind_groups.created,
        "wall_ms": round((time.perf_counter() - started) * 1000, 3),
        "result": verdict(all(c.passed for c in cases)),
    }
