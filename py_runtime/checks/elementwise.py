"""The elementwise check: every variant of the binary, logical, extrema and to_copy families (and the
typed generators feeding them), run identically in the page and natively.

Per family, one plan holds every case: the generators fill the inputs on the GPU, then the op runs.
Every tensor (input or output) is a view over a larger buffer poisoned before the run, so the bytes
past the tensor's data (a partial last word of a packed dtype, then GUARD_BYTES) must still hold the
poison afterwards, and output elements still holding it were never written. The runtime checks
only that structure (pure Python, no numpy in the page); each tensor's whole buffer goes to the
sink and the host oracle (host/oracle/, verify_elementwise_report) checks every element against
float64 numpy and the generators' numpy twins.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field

from ..ops import binary as binary_ops
from ..ops import extrema as extrema_ops
from ..ops import logical as logical_ops
from ..ops import to_copy as to_copy_ops
from ..ops.synth import UniformRange, fill_uniform
from ..ops.synth_typed import F16Exponents, I32Range, fill_bool, fill_f16, fill_i32
from ..plan import Plan
from ..runtime import Runtime
from ..tensors import DTYPE_BYTES, Tensor
from .outcome import no_progress, verdict

__all__ = ["FAMILIES", "GUARD_BYTES", "POISON", "POISON_F16", "ElementwiseOptions",
           "run_elementwise_check", "case_plan", "variants"]

FAMILIES = ("binary", "logical", "extrema", "to_copy")
GUARD_BYTES = 64
POISON = bytes.fromhex("addbba7f")          # f32 NaN 0x7FBADBAD; none of its bytes is 0 or 1 (bool)
POISON_F16 = bytes.fromhex("ad7dad7d")      # two f16 NaNs 0x7DAD

SIZES = (1, 63, 64, 65, 4097)               # around the 64-invocation workgroups of these families
BINARY_SHAPES = (
    ((3, 1, 5), (4, 1)),
    ((2, 3, 4, 5), (5,)),
    ((), (7, 3)),
    ((1,), (6, 1, 1)),
    ((5, 4), ()),
    ((2, 1, 4, 1), (3, 1, 5)),
    ((), ()),
)
# bool: four elements a word, one word an invocation: 256 elements fill a workgroup; 1-3 leave tails.
LOGICAL_SIZES = (1, 2, 3, 63, 64, 65, 256, 257, 4097)
EXTREMA_SHAPES = (
    ((4097,), 0, False), ((4097,), -1, True), ((3, 5, 7), 0, True), ((3, 5, 7), 1, False),
    ((3, 5, 7), 2, True), ((2, 3, 4, 5), 0, False), ((2, 3, 4, 5), 1, True), ((2, 3, 4, 5), 2, False),
    ((2, 3, 4, 5), -1, True), ((64, 65), 1, False), ((65, 64), 0, True), ((3, 65), 0, False),
    ((1,), 0, False), ((7, 1, 9), 1, False), ((1, 1, 1, 1), 2, True),
)
EXTREMA_RANGE = UniformRange(scale_log2=-20, offset=-8.0)                   # [-8, 8)
# to_copy inputs. f32 -> i32: in range with fractions (truncation), and far out of range (clamping).
F32_TO_I32_IN_RANGE = UniformRange(scale_log2=-3, offset=-(2.0 ** 20))      # [-2^20, 2^20), steps of 1/8
F32_TO_I32_OUT_OF_RANGE = UniformRange(scale_log2=10, offset=-(2.0 ** 33))  # [-2^33, 2^33), steps of 1024
I32_EXACT = I32Range(low=-(2 ** 24), span=2 ** 25 + 1)                      # [-2^24, 2^24]: exact in f32
I32_FULL = I32Range(low=-(2 ** 31), span=0)                                 # every i32: mostly rounded
# f32 -> f16: inside the finite f16 range (pack2x16float is indeterminate past it).
F32_TO_F16_WIDE = UniformRange(scale_log2=-8, offset=-32768.0)              # [-32768, 32768)
F32_TO_F16_NARROW = UniformRange(scale_log2=-22, offset=-2.0)               # [-2, 2): small exponents too
F16_NORMAL = F16Exponents(exponent_min=1, exponent_span=30)                 # every normal, finite f16
# Small integers as f32 (fill_i32, then to_copy_i32_f32): exact quotients and near-integer ones, where
# floor_divide may legitimately land on either side (see ops/binary.py).
INTEGER_NUMERATORS = {"kernel": "fill_i32", "low": -64, "span": 128, "convert": "f32"}       # [-64, 64)
INTEGER_DIVISORS = ({"kernel": "fill_i32", "low": 1, "span": 8, "convert": "f32"},           # [1, 8]
                    {"kernel": "fill_i32", "low": -8, "span": 8, "convert": "f32"})          # [-8, -1]
PACKED_SIZES = (1, 2, 63, 64, 65, 128, 129, 4097)                           # f16: two a word, 128 a workgroup


@dataclass(frozen=True, kw_only=True)
class ElementwiseOptions:
    families: tuple[str, ...] = FAMILIES
    seed: int = 2025
    max_workgroups_per_dim: int | None = None   # force 2-D grids at small sizes
    artifacts: bool = False                     # hand every tensor's buffer to the sink


# ---------------------------------------------------------------------------------------------
# What to run: plain data, so the host oracle can read the same plan from the report.

@dataclass(frozen=True)
class TensorSpec:
    role: str                       # "a", "b", "src", "out"
    dtype: str
    shape: tuple[int, ...]
    generator: dict | None = None   # inputs: {"kernel": "fill_uniform", ...range}; outputs: None


@dataclass(frozen=True)
class CaseSpec:
    id: str
    family: str
    op: str
    kernel: str
    tensors: tuple[TensorSpec, ...]
    extra: dict = field(default_factory=dict)     # dim / keepdim for extrema


def _uniform(value_range: UniformRange) -> dict:
    return {"kernel": "fill_uniform", "scale_log2": value_range.scale_log2, "offset": value_range.offset}


def _binary_cases() -> list[CaseSpec]:
    cases = []
    for op in binary_ops.BINARY_OPS:
        pairs = [((n,), (n,)) for n in SIZES] + list(BINARY_SHAPES)
        for index, (sa, sb) in enumerate(pairs):
            range_a, range_b = binary_ops.INPUT_RANGES[op]
            if op in ("div", "floor_divide"):
                range_b = binary_ops.DIVISOR_RANGES[index % 2]      # positive and negative divisors
            out = binary_ops.broadcast_shape(op, Tensor("a", sa, "f32", 0), Tensor("b", sb, "f32", 0))
            cases.append(CaseSpec(f"binary_{op}_{index:02d}", "binary", op, binary_ops.kernel_name(op), (
                TensorSpec("a", "f32", sa, _uniform(range_a)), TensorSpec("b", "f32", sb, _uniform(range_b)),
                TensorSpec("out", "f32", out))))
        if op in ("div", "floor_divide"):
            for index, (sa, sb) in enumerate((((4097,), (4097,)), ((64, 65), (65,))), start=len(pairs)):
                out = binary_ops.broadcast_shape(op, Tensor("a", sa, "f32", 0), Tensor("b", sb, "f32", 0))
                cases.append(CaseSpec(f"binary_{op}_{index:02d}", "binary", op, binary_ops.kernel_name(op), (
                    TensorSpec("a", "f32", sa, INTEGER_NUMERATORS),
                    TensorSpec("b", "f32", sb, INTEGER_DIVISORS[index % 2]), TensorSpec("out", "f32", out))))
    return cases


def _logical_cases() -> list[CaseSpec]:
    cases = []
    for op in logical_ops.LOGICAL_OPS:
        for index, n in enumerate(LOGICAL_SIZES):
            inputs = ("a",) if op in logical_ops.UNARY_LOGICAL_OPS else ("a", "b")
            tensors = tuple(TensorSpec(r, "bool", (n,), {"kernel": "fill_bool"}) for r in inputs)
            cases.append(CaseSpec(f"logical_{op}_{index:02d}", "logical", op, logical_ops.kernel_name(op),
                                  tensors + (TensorSpec("out", "bool", (n,)),)))
    return cases


def _extrema_cases() -> list[CaseSpec]:
    cases = []
    for op in extrema_ops.EXTREMA_OPS:
        for index, (shape, dim, keepdim) in enumerate(EXTREMA_SHAPES):
            axis = dim % len(shape)
            cases.append(CaseSpec(f"extrema_{op}_{index:02d}", "extrema", op, extrema_ops.kernel_name(op), (
                TensorSpec("src", "f32", shape, _uniform(EXTREMA_RANGE)),
                TensorSpec("out", "f32", extrema_ops.reduced_shape(shape, axis, keepdim))),
                {"dim": dim, "keepdim": keepdim}))
    return cases


def _to_copy_cases() -> list[CaseSpec]:
    f16 = {"kernel": "fill_f16", **F16_NORMAL.to_json()}
    plans = {
        ("f32", "i32"): [((n,), _uniform(F32_TO_I32_IN_RANGE)) for n in SIZES]
                        + [((3, 5, 7), _uniform(F32_TO_I32_IN_RANGE)), ((4097,), _uniform(F32_TO_I32_OUT_OF_RANGE))],
        ("i32", "f32"): [((n,), {"kernel": "fill_i32", **I32_EXACT.to_json()}) for n in SIZES]
                        + [((2, 3, 4, 5), {"kernel": "fill_i32", **I32_EXACT.to_json()}),
                           ((4097,), {"kernel": "fill_i32", **I32_FULL.to_json()})],
        ("f32", "f16"): [((n,), _uniform((F32_TO_F16_NARROW, F32_TO_F16_WIDE)[i % 2])) for i, n in enumerate(PACKED_SIZES)]
                        + [((4097,), _uniform(F32_TO_F16_WIDE))],
        ("f16", "f32"): [((n,), f16) for n in PACKED_SIZES] + [((3, 5, 7), f16)],
        ("bool", "f32"): [((n,), {"kernel": "fill_bool"}) for n in (1, 2, 3, *SIZES[1:])],
    }
    cases = []
    for (src, dst), shapes in plans.items():
        kernel = to_copy_ops.kernel_name(src, dst)
        for index, (shape, generator) in enumerate(shapes):
            cases.append(CaseSpec(f"{kernel}_{index:02d}", "to_copy", f"{src}->{dst}", kernel, (
                TensorSpec("src", src, shape, generator), TensorSpec("out", dst, shape))))
    return cases


_BUILDERS = {"binary": _binary_cases, "logical": _logical_cases, "extrema": _extrema_cases, "to_copy": _to_copy_cases}


def case_plan(families=FAMILIES) -> list[CaseSpec]:
    return [case for family in families for case in _BUILDERS[family]()]


def variants() -> dict[str, tuple[str, ...]]:
    """Every kernel each family must exercise (the generators count under 'fill')."""
    return {
        "binary": tuple(binary_ops.kernel_name(op) for op in binary_ops.BINARY_OPS),
        "logical": tuple(logical_ops.kernel_name(op) for op in logical_ops.LOGICAL_OPS),
        "extrema": tuple(extrema_ops.kernel_name(op) for op in extrema_ops.EXTREMA_OPS),
        "to_copy": tuple(kernel for kernel, _ in to_copy_ops.CONVERSIONS.values()),
        "fill": ("fill_uniform", "fill_i32", "fill_bool", "fill_f16"),
    }


# ---------------------------------------------------------------------------------------------
# Running it.

def poison_of(dtype: str) -> bytes:
    return POISON_F16 if dtype == "f16" else POISON


def data_bytes(spec: TensorSpec) -> int:
    return math.prod(spec.shape) * DTYPE_BYTES[spec.dtype]


def buffer_bytes(spec: TensorSpec) -> int:
    """The poisoned buffer behind a tensor: its data rounded up to whole words, then the guard."""
    return -(-data_bytes(spec) // 4) * 4 + GUARD_BYTES


@dataclass
class _Live:
    spec: TensorSpec
    view: Tensor
    backing: Tensor
    stream: int | None = None
    scratch: Tensor | None = None       # the i32 a "convert" generator fills before converting


def _generator_calls(live: _Live, seed: int, max_wg: int | None) -> list:
    g = live.spec.generator
    target = live.scratch if g.get("convert") else live.view
    if g["kernel"] == "fill_uniform":
        calls = [fill_uniform(target=target, value_range=UniformRange(scale_log2=g["scale_log2"], offset=g["offset"]),
                              seed=seed, stream=live.stream, max_per_dim=max_wg)]
    elif g["kernel"] == "fill_i32":
        calls = [fill_i32(target=target, value_range=I32Range(low=g["low"], span=g["span"]), seed=seed,
                          stream=live.stream, max_per_dim=max_wg)]
    elif g["kernel"] == "fill_bool":
        calls = [fill_bool(target=target, seed=seed, stream=live.stream, max_per_dim=max_wg)]
    elif g["kernel"] == "fill_f16":
        calls = [fill_f16(target=target, exponents=F16Exponents(exponent_min=g["exponent_min"],
                                                                exponent_span=g["exponent_span"]),
                          seed=seed, stream=live.stream, max_per_dim=max_wg)]
    else:
        raise ValueError(f"unknown generator {g['kernel']!r}")
    if g.get("convert"):
        calls.append(to_copy_ops.to_copy(src=live.scratch, out=live.view, max_per_dim=max_wg))
    return calls


def _op_call(case: CaseSpec, views: dict[str, Tensor], max_wg: int | None):
    if case.family == "binary":
        return binary_ops.binary(case.op, a=views["a"], b=views["b"], out=views["out"], max_per_dim=max_wg)
    if case.family == "logical":
        return logical_ops.logical(case.op, a=views["a"], b=views.get("b"), out=views["out"], max_per_dim=max_wg)
    if case.family == "extrema":
        return extrema_ops.extrema(case.op, src=views["src"], out=views["out"], dim=case.extra["dim"],
                                   keepdim=case.extra["keepdim"], max_per_dim=max_wg)
    return to_copy_ops.to_copy(src=views["src"], out=views["out"], max_per_dim=max_wg)


def _structure(spec: TensorSpec, data: bytes) -> dict:
    """Guard intact past the data; elements still holding the poison (never written)."""
    poison = poison_of(spec.dtype)
    end = data_bytes(spec)
    pattern = poison * (len(data) // 4)
    guard_intact = data[end:] == pattern[end:]
    n = math.prod(spec.shape)
    if spec.dtype == "bool":
        unwritten = sum(1 for byte in data[:n] if byte > 1)
    elif spec.dtype == "f16":
        half = poison[:2]
        unwritten = sum(1 for i in range(n) if data[2 * i:2 * i + 2] == half)
    else:
        unwritten = sum(1 for i in range(n) if data[4 * i:4 * i + 4] == poison)
    return {"guard_intact": guard_intact, "unwritten": unwritten}


async def _run_family(runtime: Runtime, family: str, cases: list[CaseSpec], options: ElementwiseOptions, sink,
                      streams) -> tuple[list[dict], dict]:
    device = runtime.device
    max_wg = options.max_workgroups_per_dim
    plan = Plan(runtime, f"elementwise.{family}")
    lives: list[list[_Live]] = []
    op_index: list[int] = []
    for case in cases:
        tensors = []
        for spec in case.tensors:
            name = f"{case.id}.{spec.role}"
            backing = await runtime.tensors.allocate(f"{name}.buffer", (buffer_bytes(spec),), "u8")
            view = Tensor(name, spec.shape, spec.dtype, backing.usage, backing.buffer)
            scratch = None
            if spec.generator and spec.generator.get("convert"):
                scratch = await runtime.tensors.allocate(f"{name}.scratch", spec.shape, "i32")
            tensors.append(_Live(spec, view, backing, next(streams) if spec.generator else None, scratch))
        for live in tensors:
            if live.spec.generator:
                for call in _generator_calls(live, options.seed, max_wg):
                    await plan.add(call)
        op_index.append(len(plan))
        await plan.add(_op_call(case, {live.spec.role: live.view for live in tensors}, max_wg))
        lives.append(tensors)
    plan.record()
    for tensors in lives:
        for live in tensors:
            device.write_buffer(live.backing.buffer, poison_of(live.spec.dtype) * (live.backing.nbytes // 4))
    execution = await plan.replay()
    results = []
    for case, tensors, index in zip(cases, lives, op_index):
        entries = []
        for live in tensors:
            data = await device.read_buffer(live.backing.buffer)
            artifact = f"{case.id}.{live.spec.role}.{live.spec.dtype}"
            entries.append({"role": live.spec.role, "dtype": live.spec.dtype, "shape": list(live.spec.shape),
                            "stream": live.stream, "generator": live.spec.generator, "artifact": artifact,
                            "data_bytes": data_bytes(live.spec), "buffer_bytes": len(data),
                            **_structure(live.spec, data)})
            if sink and options.artifacts:
                await sink(artifact, data)
        results.append({"id": case.id, "family": family, "op": case.op, "kernel": case.kernel, **case.extra,
                        "tensors": entries, "workgroups": list(plan.workgroups[3 * index:3 * index + 3]),
                        "passed": all(e["guard_intact"] and not e["unwritten"] for e in entries)})
    plan.release()
    for tensors in lives:
        for live in tensors:
            runtime.tensors.release(live.backing.name)
            if live.scratch is not None:
                runtime.tensors.release(live.scratch.name)
    return results, {"routes": list(execution.routes), "mask": execution.route_mask, "dispatches": len(plan)}


async def _error_of(call) -> dict | None:
    try:
        result = call()
        if asyncio.iscoroutine(result):
            await result
    except Exception as error:  # recording exactly what was raised is the point
        return {"type": type(error).__name__, "message": str(error)}
    return None


async def _error_paths() -> dict:
    """Bad calls must raise a ValueError naming the op, the tensors and what is wrong."""
    def t(name, shape, dtype="f32"):
        return Tensor(name, tuple(shape), dtype, 0)

    return {
        "binary_no_broadcast": await _error_of(lambda: binary_ops.binary(
            "add", a=t("x", (3, 2)), b=t("y", (4,)), out=t("z", (3, 4)))),
        "binary_rank_5": await _error_of(lambda: binary_ops.binary(
            "mul", a=t("x", (1, 2, 1, 2, 3)), b=t("y", (3,)), out=t("z", (1, 2, 1, 2, 3)))),
        "binary_wrong_dtype": await _error_of(lambda: binary_ops.binary(
            "div", a=t("x", (4,), "i32"), b=t("y", (4,)), out=t("z", (4,)))),
        "binary_wrong_out_shape": await _error_of(lambda: binary_ops.binary(
            "sub", a=t("x", (3, 1)), b=t("y", (4,)), out=t("z", (4, 3)))),
        "logical_shape_mismatch": await _error_of(lambda: logical_ops.logical(
            "and", a=t("p", (5,), "bool"), b=t("q", (6,), "bool"), out=t("r", (5,), "bool"))),
        "logical_wrong_dtype": await _error_of(lambda: logical_ops.logical(
            "or", a=t("p", (5,), "f32"), b=t("q", (5,), "bool"), out=t("r", (5,), "bool"))),
        "extrema_dim_out_of_range": await _error_of(lambda: extrema_ops.extrema(
            "amax", src=t("s", (2, 3)), out=t("m", (2,)), dim=2)),
        "extrema_rank_5": await _error_of(lambda: extrema_ops.extrema(
            "amin", src=t("s", (1, 1, 1, 1, 2)), out=t("m", (1, 1, 1, 1)), dim=4)),
        "to_copy_unknown_pair": await _error_of(lambda: to_copy_ops.to_copy(src=t("s", (4,), "i32"),
                                                                            out=t("d", (4,), "f16"))),
    }


async def run_elementwise_check(runtime: Runtime, options: ElementwiseOptions | None = None, sink=None,
                                progress=no_progress) -> dict:
    """Run every case of the requested families; `sink(name, bytes)` (async) gets every tensor's buffer."""
    options = options or ElementwiseOptions()
    started = time.perf_counter()
    streams = iter(range(1000, 1 << 30))
    cases, attestation = [], {}
    for done, family in enumerate(options.families):
        progress("elementwise families", done, len(options.families))
        results, attestation[family] = await _run_family(runtime, family, case_plan((family,)), options, sink, streams)
        cases += results
    progress("elementwise families", len(options.families), len(options.families))
    return {
        "suite": "elementwise",
        "adapter": runtime.device.adapter.to_json(),
        "options": {"families": list(options.families), "seed": options.seed,
                    "max_workgroups_per_dim": options.max_workgroups_per_dim, "guard_bytes": GUARD_BYTES,
                    "poison_hex": POISON.hex(), "poison_f16_hex": POISON_F16.hex()},
        "tolerances": {op: vars(t) for op, t in binary_ops.TOLERANCES.items()} | {
            "logical": {"kind": "exact", "why": "bytes 0/1, exact"},
            "extrema": {"kind": "exact", "why": "min/max of representable values is exact"},
            "to_copy": {"kind": "per conversion", "why": to_copy_ops.GUARANTEES}},
        "variants": {k: list(v) for k, v in variants().items()},
        "attestation": attestation,
        "errors": await _error_paths(),
        "cases": cases,
        "pipelines_created": runtime.pipelines.created,
        "wall_ms": round((time.perf_counter() - started) * 1000, 3),
        "result": verdict(all(c["passed"] for c in cases)),
    }
