"""float64 references and spec-derived bounds for the elementwise families."""

from __future__ import annotations

import numpy as np

from .synth import generated_np


def wgsl_ulp32(x: np.ndarray) -> np.ndarray:
    """ULP of f32 at x as the WGSL spec defines it (Muller 2005): the gap between the two f32 values
    around x; at a power of two that is the smaller gap (below it). Smallest subnormal gap at 0."""
    ax = np.abs(np.asarray(x, np.float64))
    mantissa, exponent = np.frexp(ax)               # ax = mantissa * 2^exponent, mantissa in [0.5, 1)
    gap = np.ldexp(1.0, exponent - 24)
    gap = np.where(mantissa == 0.5, gap / 2, gap)
    return np.maximum(np.where(ax > 0, gap, 0.0), 2.0 ** -149)


def _neighbours(exact: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
    """The values of `dtype` just below and above each exact value (both equal to it when representable)."""
    exact = np.asarray(exact, np.float64)
    with np.errstate(over="ignore"):
        rounded = exact.astype(dtype)
    value = rounded.astype(np.float64)
    down = np.nextafter(rounded, dtype(-np.inf)).astype(np.float64)
    up = np.nextafter(rounded, dtype(np.inf)).astype(np.float64)
    lo = np.where(value > exact, down, value)
    hi = np.where(value < exact, up, value)
    return lo, hi


def f32_neighbours(exact: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Correctly rounded in WGSL's sense: exact when representable, else either f32 neighbour."""
    return _neighbours(exact, np.float32)


def binary_bounds(op: str, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi] each f32 result of `op` may take (float64), from the WGSL spec's accuracy table.

    + - * of the check's inputs are exact in float64 (multiples of 2^-21 below 2^4, or products of
    two 24-bit significands), so their bounds are the exact value's two f32 neighbours."""
    from ...ops.binary import TOLERANCES

    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    kind = TOLERANCES[op].kind
    if kind == "correctly_rounded":
        exact = {"add": a + b, "sub": a - b, "mul": a * b}[op]
        return f32_neighbours(exact)
    if kind == "exact":
        exact = np.minimum(a, b) if op == "minimum" else np.maximum(a, b)
        return exact, exact
    if kind in ("div", "floor_divide"):
        q = a / b                                       # within 2^-53 relative of a/b: widen by that
        budget = 2.5 * wgsl_ulp32(q) + np.abs(q) * 2.0 ** -52
        if kind == "div":
            return q - budget, q + budget
        return np.floor(q - budget), np.floor(q + budget)
    if kind == "pow":
        return pow_bounds(a, b)
    raise ValueError(f"no bound for binary op {op!r}")


def pow_bounds(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """pow(x, y), x > 0, inherited from exp2(y * log2(x)), each step at its spec accuracy:
      L' = log2(x) within e_L = 2^-21 absolute for x in [0.5, 2], else 3 ULP(log2 x);
      p  = y * L' correctly rounded: within 1 ULP(y L'), so |p - y log2 x| <= e_P = |y| e_L + ULP(|y| (|L| + e_L));
      r  = exp2(p) within (3 + 2|p|) ULP(2^p).
    So r lies in [2^(z - e_P) - E, 2^(z + e_P) + E] with z = y log2 x and E = (3 + 2(|z| + e_P)) ULP(2^(z + e_P))."""
    x = np.asarray(x, np.float64)
    y = np.asarray(y, np.float64)
    log = np.log2(x)
    e_log = np.where((x >= 0.5) & (x <= 2.0), 2.0 ** -21, 3 * wgsl_ulp32(log))
    e_p = np.abs(y) * e_log + wgsl_ulp32(np.abs(y) * (np.abs(log) + e_log))
    z = y * log
    e_p = e_p + np.abs(z) * 2.0 ** -50                 # float64 evaluation of z and 2^z
    high = np.exp2(z + e_p)
    e_exp = (3 + 2 * (np.abs(z) + e_p)) * wgsl_ulp32(high)
    return np.exp2(z - e_p) - e_exp, high + e_exp


def _poison_pattern(poison: bytes, size: int) -> bytes:
    return (poison * (size // 4 + 1))[:size]


def _stored(dtype: str, data: bytes, n: int) -> np.ndarray:
    kind = {"f32": np.float32, "i32": np.int32, "bool": np.uint8, "f16": np.uint16}[dtype]
    return np.frombuffer(data, kind, count=n)


def _unwritten(dtype: str, stored: np.ndarray, poison: bytes) -> int:
    if dtype == "bool":
        return int(np.count_nonzero(stored > 1))
    if dtype == "f16":
        return int(np.count_nonzero(stored == np.frombuffer(poison[:2], np.uint16)[0]))
    return int(np.count_nonzero(stored.view(np.uint32) == np.frombuffer(poison, np.uint32)[0]))


def f16_allowed(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """pack2x16float of in-range x: exact, or either f16 neighbour (correctly rounded); a result in
    the f16 subnormal range may also be flushed to zero. Returns (lo, hi, may_flush)."""
    lo, hi = _neighbours(x, np.float16)
    may_flush = np.minimum(np.abs(lo), np.abs(hi)) < 2.0 ** -14
    return lo, hi, may_flush


def verify_elementwise_case(case: dict, buffers: dict[str, bytes], *, seed: int, poison: bytes,
                            poison_f16: bytes, guard_bytes: int) -> dict:
    """Every element of one case (inputs against the generators' twins, the output against the
    float64 reference and its tolerance), plus poison: unwritten outputs and overwritten guards."""
    import math
    from fractions import Fraction

    result = {"id": case["id"], "kernel": case["kernel"], "input_mismatches": 0, "out_of_tolerance": 0,
              "first_bad": [], "unwritten": 0, "guard_overwritten": 0, "size_mismatches": 0}
    values = {}
    for entry in case["tensors"]:
        data = buffers[entry["role"]]
        pz = poison_f16 if entry["dtype"] == "f16" else poison
        n = int(np.prod(entry["shape"], dtype=np.int64))
        size = n * {"f32": 4, "i32": 4, "bool": 1, "f16": 2}[entry["dtype"]]
        if len(data) != -(-size // 4) * 4 + guard_bytes or entry["data_bytes"] != size:
            result["size_mismatches"] += 1
            continue
        result["guard_overwritten"] += sum(1 for x, y in zip(data[size:], _poison_pattern(pz, len(data))[size:])
                                           if x != y)
        stored = _stored(entry["dtype"], data, n)
        if entry["generator"]:
            expected = generated_np(entry["generator"], seed, entry["stream"], n)
            result["input_mismatches"] += int(np.count_nonzero(stored.view(expected.dtype) != expected))
            values[entry["role"]] = expected.reshape(entry["shape"])     # the oracle's own inputs
        else:
            result["unwritten"] += _unwritten(entry["dtype"], stored, pz)
            values[entry["role"]] = stored.reshape(entry["shape"])
    if result["size_mismatches"]:
        return result
    out = values["out"]
    family = case["family"]
    if family == "binary":
        a, b = values["a"], values["b"]
        lo, hi = binary_bounds(case["op"], np.broadcast_to(a, out.shape), np.broadcast_to(b, out.shape))
        gpu = out.astype(np.float64)
        ok = (gpu >= lo) & (gpu <= hi)
        if case["op"] == "floor_divide":
            ok &= gpu == np.floor(gpu)
            ambiguous = np.flatnonzero((lo != hi).reshape(-1))
            result["near_integer_quotients"] = int(ambiguous.size)
            fa, fb = np.broadcast_to(a, out.shape).reshape(-1), np.broadcast_to(b, out.shape).reshape(-1)
            exact_floor = [Fraction(float(fa[i])) / Fraction(float(fb[i])) for i in ambiguous]
            result["exact_floor_among_them"] = int(sum(
                1 for i, q in zip(ambiguous, exact_floor) if gpu.reshape(-1)[i] == math.floor(q)))
        reference = (lo + hi) / 2
    elif family == "logical":
        a = values["a"]
        b = values.get("b")
        expected = {"and": lambda: a & b, "or": lambda: a | b, "xor": lambda: a ^ b, "not": lambda: a ^ 1}[case["op"]]()
        ok = out == expected
        gpu, lo, hi, reference = out, expected, expected, expected
    elif family == "extrema":
        src = values["src"].astype(np.float64)
        reduce = np.max if case["op"] == "amax" else np.min
        expected = reduce(src, axis=case["dim"], keepdims=case["keepdim"]).reshape(out.shape)
        gpu = out.astype(np.float64)
        ok = gpu == expected
        lo = hi = reference = expected
    else:
        src_dtype, dst_dtype = case["op"].split("->")
        src = values["src"]
        if (src_dtype, dst_dtype) == ("f32", "i32"):
            expected = np.clip(np.trunc(src.astype(np.float64)), -2.0 ** 31, 2147483520.0)
            gpu = out.astype(np.float64)
            ok = gpu == expected
            lo = hi = expected
            truncated = np.trunc(src.astype(np.float64))
            result["clamped"] = int(np.count_nonzero((truncated < -2.0 ** 31) | (truncated > 2147483520.0)))
        elif (src_dtype, dst_dtype) == ("i32", "f32"):
            lo, hi = f32_neighbours(src.astype(np.float64))
            gpu = out.astype(np.float64)
            ok = (gpu == lo) | (gpu == hi)
            result["rounded"] = int(np.count_nonzero(lo != hi))
            result["nearest_even"] = int(np.count_nonzero((lo != hi) & (gpu == src.astype(np.float32))))
        elif (src_dtype, dst_dtype) == ("f32", "f16"):
            lo, hi, may_flush = f16_allowed(src.astype(np.float64))
            gpu = out.view(np.float16).astype(np.float64)
            ok = (gpu == lo) | (gpu == hi) | (may_flush & (gpu == 0))
            nearest = src.astype(np.float16).astype(np.float64)
            result["rounded"] = int(np.count_nonzero(lo != hi))
            result["nearest_even"] = int(np.count_nonzero((lo != hi) & (gpu == nearest)))
            result["flushed"] = int(np.count_nonzero(may_flush & (gpu == 0) & (nearest != 0)))
        elif (src_dtype, dst_dtype) == ("f16", "f32"):
            expected = src.view(np.float16).astype(np.float64)
            gpu = out.astype(np.float64)
            ok = gpu == expected
            lo = hi = expected
        elif (src_dtype, dst_dtype) == ("bool", "f32"):
            expected = (src != 0).astype(np.float64)
            gpu = out.astype(np.float64)
            ok = gpu == expected
            lo = hi = expected
        else:
            raise ValueError(f"no oracle for to_copy {case['op']}")
        reference = lo
    bad = np.flatnonzero(~np.asarray(ok).reshape(-1))
    result["out_of_tolerance"] = int(bad.size)
    flat = [np.asarray(v).reshape(-1) for v in (gpu, lo, hi)]
    result["first_bad"] = [(int(i), float(flat[0][i]), float(flat[1][i]), float(flat[2][i])) for i in bad[:5]]
    result["elements"] = int(np.asarray(reference).size)
    return result


def verify_elementwise_report(report: dict, artifacts: dict[str, bytes]) -> dict:
    """Assert everything the elementwise check reports, on either backend; returns per-kernel counts.

    Every case: inputs bit-identical to the generators' numpy twins, every output element inside its
    tolerance, no unwritten output, every guard byte still poisoned. Every variant of every family
    (and every generator) ran. Every error path raised a ValueError naming the op and the tensors."""
    from ...checks.elementwise import FAMILIES, variants

    assert report["suite"] == "elementwise", report.get("suite")
    options = report["options"]
    seed = options["seed"]
    poison, poison_f16 = bytes.fromhex(options["poison_hex"]), bytes.fromhex(options["poison_f16_hex"])
    assert options["guard_bytes"] >= 16 and all(byte > 1 for byte in poison), options   # bools are 0/1
    failures, summary = [], {}
    for case in report["cases"]:
        buffers = {t["role"]: artifacts[t["artifact"]] for t in case["tensors"]}
        with np.errstate(invalid="ignore"):             # the poison is a signalling NaN
            result = verify_elementwise_case(case, buffers, seed=seed, poison=poison, poison_f16=poison_f16,
                                             guard_bytes=options["guard_bytes"])
        counts = summary.setdefault(case["kernel"], {"cases": 0, "elements": 0})
        counts["cases"] += 1
        counts["elements"] += result.get("elements", 0)
        for key in ("near_integer_quotients", "exact_floor_among_them", "rounded", "nearest_even", "flushed",
                    "clamped"):
            if key in result:
                counts[key] = counts.get(key, 0) + result[key]
        problems = {k: result[k] for k in ("input_mismatches", "out_of_tolerance", "unwritten", "guard_overwritten",
                                           "size_mismatches") if result[k]}
        if problems or not case["passed"]:
            failures.append({"case": case["id"], **problems, "first_bad (index, gpu, lo, hi)": result["first_bad"],
                             "runtime_passed": case["passed"]})
    by_kernel = {}
    for failure in failures:
        kernel = failure["case"].rsplit("_", 1)[0]
        by_kernel[kernel] = by_kernel.get(kernel, 0) + 1
    assert not failures, f"{len(failures)} failing case(s), by kernel {by_kernel}; the first: {failures[:6]}"

    expected_variants = variants()
    assert report["variants"] == {k: list(v) for k, v in expected_variants.items()}, report["variants"]
    families = options["families"]
    ran = {c["kernel"] for c in report["cases"]}
    generators = {t["generator"]["kernel"] for c in report["cases"] for t in c["tensors"] if t["generator"]}
    for family in families:
        missing = set(expected_variants[family]) - ran
        assert not missing, f"{family}: variants never exercised: {sorted(missing)}"
    if tuple(families) == FAMILIES:
        assert generators == set(expected_variants["fill"]), f"generators exercised: {sorted(generators)}"
    routes = {"binary": {"fill_uniform", "fill_typed", "to_copy", "binary"}, "logical": {"fill_typed", "logical"},
              "extrema": {"fill_uniform", "extrema"}, "to_copy": {"fill_uniform", "fill_typed", "to_copy"}}
    for family in families:
        attested = report["attestation"][family]
        assert set(attested["routes"]) == routes[family], (family, attested)

    fragments = {
        "binary_no_broadcast": ("binary add", "'x'", "'y'", "do not broadcast"),
        "binary_rank_5": ("binary mul", "'x'", "rank 5"),
        "binary_wrong_dtype": ("binary div", "'x'", "i32"),
        "binary_wrong_out_shape": ("binary sub", "'z'", "[3, 4]"),
        "logical_shape_mismatch": ("logical and", "'q'", "'p'", "equal shapes"),
        "logical_wrong_dtype": ("logical or", "'p'", "f32"),
        "extrema_dim_out_of_range": ("amax", "dim 2", "'s'"),
        "extrema_rank_5": ("amin", "'s'", "rank 5"),
        "to_copy_unknown_pair": ("to_copy", "i32 -> f16", "'s'", "'d'"),
    }
    assert set(report["errors"]) == set(fragments), sorted(report["errors"])
    for path, needles in fragments.items():
        error = report["errors"][path]
        assert error is not None, f"error path {path!r} did not raise"
        assert error["type"] == "ValueError", (path, error)
        missing = [n for n in needles if n not in error["message"]]
        assert not missing, f"{path}: message {error['message']!r} lacks {missing}"
    assert report["result"] == "passed", f"the runtime's own structural checks: {report['result']}"
    return summary
