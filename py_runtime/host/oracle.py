"""The host oracle: numpy twins of the GPU generators and float64 references of the kernels.

Independent of the runtime's own in-page check (which uses the `math` module): the references
here are numpy's, evaluated in float64 on every element.
"""

from __future__ import annotations

import functools

import numpy as np

from ..ops.synth import UniformRange
from ..ops.unary import TOLERANCES

__all__ = ["synth_hash_np", "synth_values_np", "unary_reference", "unary_allowed_error", "f32_spacing"]

_M32 = np.uint32(0xFFFFFFFF)


def _pcg(v: np.ndarray) -> np.ndarray:
    v = v.astype(np.uint32)
    state = v * np.uint32(747796405) + np.uint32(2891336453)
    word = ((state >> ((state >> np.uint32(28)) + np.uint32(4))) ^ state) * np.uint32(277803737)
    return (word >> np.uint32(22)) ^ word


def synth_hash_np(seed: int, stream: int, index: np.ndarray) -> np.ndarray:
    key = _pcg(np.array([seed & 0xFFFFFFFF], np.uint32) ^ _pcg(np.array([stream & 0xFFFFFFFF], np.uint32)))
    return _pcg(_pcg(index.astype(np.uint32) + key) ^ key)


def synth_values_np(value_range: UniformRange, seed: int, stream: int, length: int) -> np.ndarray:
    """float32 values the GPU's fill_uniform writes for indices 0..length-1."""
    u = (synth_hash_np(seed, stream, np.arange(length, dtype=np.uint32)) >> np.uint32(8)).astype(np.float64)
    values = u * 2.0 ** value_range.scale_log2 + value_range.offset
    as_f32 = values.astype(np.float32)
    assert np.array_equal(as_f32.astype(np.float64), values), "synthetic range is not exact in f32"
    return as_f32


def unary_reference(op: str, x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    with np.errstate(over="ignore"):
        match op:
            case "abs": return np.abs(x)
            case "neg": return -x
            case "round": return np.round(x)          # half to even, as WGSL round()
            case "sqrt": return np.sqrt(x)
            case "rsqrt": return 1.0 / np.sqrt(x)
            case "exp": return np.exp(x)
            case "sin": return np.sin(x)
            case "cos": return np.cos(x)
            case "tanh": return np.tanh(x)
            case "sigmoid": return 1.0 / (1.0 + np.exp(-x))
            case "silu": return x / (1.0 + np.exp(-x))
            case "hardswish": return x * np.clip(x + 3.0, 0.0, 6.0) / 6.0
    raise ValueError(f"no reference for unary op {op!r}")


def f32_spacing(values: np.ndarray) -> np.ndarray:
    """Spacing of f32 at |values| (float64 result)."""
    return np.spacing(np.abs(values).astype(np.float32)).astype(np.float64)


def unary_allowed_error(op: str, x: np.ndarray, exact: np.ndarray) -> np.ndarray:
    t = TOLERANCES[op]
    ax = np.abs(x.astype(np.float64))
    return ((t.ulps + t.ulps_per_abs_x * ax) * f32_spacing(exact)
            + (t.abs_units + t.abs_units_per_abs_x * ax) * 2.0 ** -23)


def verify_unary_case(*, op: str, length: int, seed: int, stream: int, inputs: bytes, outputs: bytes,
                      guard_elements: int, poison: bytes) -> dict:
    """Every element of one uploaded case against the oracle; returns counts for the test to assert."""
    from ..ops.unary import INPUT_RANGES

    expected_inputs = synth_values_np(INPUT_RANGES[op], seed, stream, length)
    gpu_inputs = np.frombuffer(inputs, np.float32, count=length)
    words = np.frombuffer(outputs, np.uint32)
    poison_word = np.frombuffer(poison, np.uint32)[0]
    gpu = np.frombuffer(outputs, np.float32, count=length).astype(np.float64)
    x = expected_inputs.astype(np.float64)
    exact = unary_reference(op, x)
    allowed = unary_allowed_error(op, x, exact)
    error = np.abs(gpu - exact)
    bad = ~(error <= allowed)           # NaN counts as bad
    ratio = np.where(allowed > 0, error / np.where(allowed > 0, allowed, 1), np.where(error == 0, 0, np.inf))
    return {
        "input_mismatches": int(np.count_nonzero(gpu_inputs.view(np.uint32) != expected_inputs.view(np.uint32))),
        "out_of_tolerance": int(np.count_nonzero(bad)),
        "first_bad": [(int(i), float(x[i]), float(gpu[i]), float(exact[i])) for i in np.flatnonzero(bad)[:5]],
        "unwritten": int(np.count_nonzero(words[:length] == poison_word)),
        "guard_overwritten": int(np.count_nonzero(words[length:length + guard_elements] != poison_word)),
        "output_words": int(words.size),
        "worst_error_ratio": float(np.nanmax(ratio)) if length else 0.0,
    }


def linear_reference(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """float64 x @ w.T (+ bias), and the f32 error bound of a sequential sum over k:
    |err| <= gamma_(K+2) * (sum_k |x w| + |bias|), gamma_n = n u / (1 - n u), u = 2^-24."""
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    exact = x64 @ w64.T
    magnitude = np.abs(x64) @ np.abs(w64).T
    if bias is not None:
        exact = exact + bias.astype(np.float64)
        magnitude = magnitude + np.abs(bias.astype(np.float64))
    n = x.shape[-1] + 2
    u = 2.0 ** -24
    return exact, (n * u / (1 - n * u)) * magnitude


def verify_runtime_report(report: dict, read) -> None:
    """Assert everything the runtime-core checks report, on either backend (AssertionError names what).
    `read(name)` gives an artifact's bytes."""
    from ..checks.runtime_core import LINEAR_RANGE, LINEAR_SHAPE, LINEAR_STREAMS
    from ..routes import route_mask

    m, k, n = LINEAR_SHAPE["prefill_rows"], LINEAR_SHAPE["k"], LINEAR_SHAPE["n"]
    seed = report["seed"]
    x = synth_values_np(LINEAR_RANGE, seed, LINEAR_STREAMS["x"], m * k).reshape(m, k)
    w = synth_values_np(LINEAR_RANGE, seed, LINEAR_STREAMS["w"], n * k).reshape(n, k)
    bias = synth_values_np(LINEAR_RANGE, seed, LINEAR_STREAMS["bias"], n)
    exact, bound = linear_reference(x, w, bias)
    for name, rows in (("linear_prefill.f32", m), ("linear_decode.f32", 1), ("linear_recovered.f32", m)):
        gpu = np.frombuffer(read(name), np.float32).reshape(rows, n).astype(np.float64)
        error = np.abs(gpu - exact[:rows])
        assert np.all(error <= bound[:rows]), f"{name}: worst error/bound {np.max(error / bound[:rows]):.3f}"

    caching = report["caching"]
    assert caching["after_second_step"] == caching["after_first_step"], f"second step created objects: {caching}"
    assert caching["after_second_plan"][0] == caching["after_first_step"][0], f"second plan made pipelines: {caching}"

    params_prefill = np.frombuffer(bytes(report["resize"]["params_prefill"]), np.uint32).tolist()
    params_decode = np.frombuffer(bytes(report["resize"]["params_decode"]), np.uint32).tolist()
    assert params_prefill == [m, k, n, 1] and params_decode == [1, k, n, 1], (params_prefill, params_decode)

    profile = report["profile"]
    assert profile["available"], "this adapter cannot profile (no timestamp-query)"
    assert [r["kernel"] for r in profile["rows"]] == ["fill_uniform"] * 3 + ["linear_f32"]
    linear_row = profile["rows"][-1]
    assert linear_row["route"] == "linear_f32_naive" and linear_row["flops"] == 2 * 1 * n * k
    assert linear_row["bytes"] == 4 * (k + n * k + n + n) and linear_row["ns"] > 0
    assert profile["quantized"] is False

    attestation = report["attestation"]
    assert attestation["routes"] == ["fill_uniform", "linear_f32_naive"]
    assert attestation["mask"] == route_mask(attestation["routes"]) == attestation["second_step_mask"]
    assert attestation["mask_routes"] == sorted(attestation["routes"], key=attestation["routes"].index)
    assert attestation["attention_conflicts"] == 0

    for path, expected in report["error_types"].items():
        error = report["errors"][path]
        assert error is not None, f"error path {path!r} did not raise"
        assert error["type"] == expected, f"{path}: {error}"
    assert "broken_kernel" in report["errors"]["compile"]["message"]
    assert ":3:" in report["errors"]["compile"]["message"], "compile error without its line"
    assert "core.bad_binding" in report["errors"]["validation"]["message"]
    too_large = report["errors"]["too_large"]["message"]
    assert "core.huge" in too_large and ("maxStorageBufferBindingSize" in too_large or "maxBufferSize" in too_large)
    loss = report["device_loss"]
    assert loss["noticed"] and loss["error_is_device_lost"] and loss["reason"] == "destroyed", loss


# ---------------------------------------------------------------------------------------------
# Elementwise families (binary, logical, extrema, to_copy) and the typed generators feeding them.

def synth_i32_np(low: int, span: int, seed: int, stream: int, length: int) -> np.ndarray:
    """int32 values fill_i32 writes: low + (h % span) wrapping in u32 (span 0 = 2^32)."""
    h = synth_hash_np(seed, stream, np.arange(length, dtype=np.uint32))
    step = h % np.uint32(span) if span else h
    return (np.uint32(low & 0xFFFFFFFF) + step).astype(np.uint32).view(np.int32)


def synth_bool_np(seed: int, stream: int, length: int) -> np.ndarray:
    """uint8 0/1 values fill_bool writes (the hash's top bit), one byte per element."""
    return (synth_hash_np(seed, stream, np.arange(length, dtype=np.uint32)) >> np.uint32(31)).astype(np.uint8)


def synth_f16_bits_np(exponent_min: int, exponent_span: int, seed: int, stream: int, length: int) -> np.ndarray:
    """uint16 bit patterns fill_f16 writes."""
    h = synth_hash_np(seed, stream, np.arange(length, dtype=np.uint32))
    exponent = np.uint32(exponent_min) + ((h >> np.uint32(10)) & np.uint32(0xFFFF)) % np.uint32(exponent_span)
    return (((h >> np.uint32(31)) << np.uint32(15)) | (exponent << np.uint32(10)) | (h & np.uint32(0x3FF))).astype(np.uint16)


def generated_np(generator: dict, seed: int, stream: int, length: int) -> np.ndarray:
    """What a typed or uniform generator writes, as the stored numpy dtype (f32, i32, u8, u16)."""
    kind = generator["kernel"]
    if kind == "fill_uniform":
        return synth_values_np(UniformRange(scale_log2=generator["scale_log2"], offset=generator["offset"]),
                               seed, stream, length)
    if kind == "fill_i32":
        values = synth_i32_np(generator["low"], generator["span"], seed, stream, length)
        if generator.get("convert") == "f32":           # then to_copy_i32_f32: exact below 2^24
            assert np.all(np.abs(values) <= 2 ** 24), "converted integers must be exact in f32"
            return values.astype(np.float32)
        return values
    if kind == "fill_bool":
        return synth_bool_np(seed, stream, length)
    if kind == "fill_f16":
        return synth_f16_bits_np(generator["exponent_min"], generator["exponent_span"], seed, stream, length)
    raise ValueError(f"no twin for generator {kind!r}")


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
    from ..ops.binary import TOLERANCES

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


def _f16_allowed(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
            lo, hi, may_flush = _f16_allowed(src.astype(np.float64))
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
    from ..checks.elementwise import FAMILIES, variants

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
    assert report["passed"]
    return summary


# ---- Q4 group-wise symmetric weights -------------------------------------------------------------

_TWO_FIFTEENTHS = np.float32(2 / 15)
_MIN_SCALE = np.float32(1e-10)
_THRESHOLD_STEPS = (np.arange(15, dtype=np.float32) - np.float32(7.5))


def synth_rows_np(value_range: UniformRange, seed: int, stream: int, k: int, row0: int, row1: int) -> np.ndarray:
    """Rows [row0, row1) of a synthetic [N, K] weight (element n * K + k of the sequence), f32."""
    index = np.arange(row0 * k, row1 * k, dtype=np.uint64).astype(np.uint32)
    u = (synth_hash_np(seed, stream, index) >> np.uint32(8)).astype(np.float64)
    return (u * 2.0 ** value_range.scale_log2 + value_range.offset).astype(np.float32).reshape(row1 - row0, k)


def q4_levels_np(w: np.ndarray, group_size: int) -> tuple[np.ndarray, np.ndarray]:
    """The quantizer's twin: (levels q + 8 as uint8 [N, K], scales f32 [N, K/gs]) with the kernel's
    exact arithmetic: scale = max(amax * f32(2/15), 1e-10); level = #{t : w > f32((t - 7.5) * scale)}."""
    n, k = w.shape
    groups = w.reshape(n, k // group_size, group_size)
    scale = np.maximum(np.max(np.abs(groups), axis=2) * _TWO_FIFTEENTHS, _MIN_SCALE).astype(np.float32)
    thresholds = (_THRESHOLD_STEPS[None, None, :] * scale[:, :, None]).astype(np.float32)    # [N, G, 15]
    levels = np.zeros(groups.shape, np.uint8)
    for t in range(15):
        levels += groups > thresholds[:, :, t:t + 1]
    return levels.reshape(n, k), scale


def q4_pack_np(levels: np.ndarray) -> np.ndarray:
    """Levels [N, K] -> u32 words [N, K/8]: nibble i of word j is k = 8j + i."""
    n, k = levels.shape
    nibbles = levels.reshape(n, k // 8, 8).astype(np.uint32)
    return np.bitwise_or.reduce(nibbles << (np.arange(8, dtype=np.uint32) * 4), axis=2)


def q4_linear_reference(x: np.ndarray, *, k: int, n_total: int, group_size: int, seed: int, stream: int,
                        value_range: UniformRange, chunk_rows: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """float64 x @ dequant(W).T for the synthetic quantized weight, and the f32 error bound
    (K + 4) u * sum_k |x q s| (u = 2^-24): sequential f32 sums, the q*s product and the scale product."""
    m = x.shape[0]
    x64 = x.astype(np.float64)
    exact = np.empty((m, n_total))
    magnitude = np.empty((m, n_total))
    for row0 in range(0, n_total, chunk_rows):
        row1 = min(n_total, row0 + chunk_rows)
        levels, scale = q4_levels_np(synth_rows_np(value_range, seed, stream, k, row0, row1), group_size)
        dequant = (levels.astype(np.float64) - 8) * np.repeat(scale.astype(np.float64), group_size, axis=1)
        exact[:, row0:row1] = x64 @ dequant.T
        magnitude[:, row0:row1] = np.abs(x64) @ np.abs(dequant).T
    u = 2.0 ** -24
    return exact, (k + 4) * u / (1 - (k + 4) * u) * magnitude


def expected_q4_routes(case: dict, rows: int, adapter: dict) -> list[str]:
    """What attestation must show, from the route rules in ops/q4.py's docstring (restated here so the
    test checks the guards, not their implementation)."""
    if case["force_route"]:
        return [case["force_route"]]
    info, limits = adapter["info"], adapter["limits"]
    sub_max = info.get("subgroupMaxSize")
    gemv = "q4_gemv_subgroup" if ("subgroups" in adapter["device_features"] and isinstance(sub_max, int)
                                  and 0 < sub_max <= 32) else "q4_gemv_workgroup"
    if rows == 1:
        return [gemv]
    if case["n_kv"]:
        if (case["k"], case["n"], case["n_kv"], case["group_size"]) == (2048, 2048, 512, 64):
            return ["q4_qkv_fused_bk64"]
        return ["q4_gemm_tiled"]
    bk64 = ((case["k"], case["n"]) in {(2048, 8192), (8192, 2048), (2048, 2048)} and case["group_size"] == 64
            and not case["bias"] and limits.get("maxComputeWorkgroupStorageSize", 0) >= 32768)
    return ["q4_gemm_bk64" if bk64 else "q4_gemm_tiled"]


@functools.lru_cache(maxsize=64)
def _q4_case_reference(seed: int, stream: int, k: int, n_total: int, group_size: int, rows: int):
    """Cached per case: the native and the browser runs of one pytest session share the oracle."""
    from ..checks.q4_linear import ACT_RANGE, WEIGHT_RANGE

    x = synth_values_np(ACT_RANGE, seed, stream + 1000, rows * k).reshape(rows, k)
    return q4_linear_reference(x, k=k, n_total=n_total, group_size=group_size, seed=seed, stream=stream,
                               value_range=WEIGHT_RANGE)


def verify_q4_report(report: dict, read) -> dict:
    """Every output element of every case and row count against the oracle; the twin against the GPU
    quantizer where the weights were uploaded; the routes against attestation. `read(name)` gives an
    artifact's bytes. Returns worst error/bound per case."""
    from ..checks.q4_linear import BIAS_RANGE, WEIGHT_RANGE

    seed = report["seed"]
    poison = np.frombuffer(bytes.fromhex("addbba7f"), np.uint32)[0]
    worst = {}
    for case in report["cases"]:
        k, gs, n_total = case["k"], case["group_size"], case["n"] + 2 * (case["n_kv"] or 0)
        stream = case["stream"]
        if case["weight_artifacts"]:
            levels, scale = q4_levels_np(synth_rows_np(WEIGHT_RANGE, seed, stream, k, 0, n_total), gs)
            packed = np.frombuffer(read(case["weight_artifacts"][0]), np.uint32)[:n_total * k // 8]
            scales = np.frombuffer(read(case["weight_artifacts"][1]), np.float32)[:n_total * k // gs]
            assert np.array_equal(packed, q4_pack_np(levels).reshape(-1)), f"{case['name']}: packed weights differ from the twin"
            assert np.array_equal(scales.view(np.uint32), scale.T.reshape(-1).view(np.uint32)), \
                f"{case['name']}: scales differ from the twin"
        rows_max = max(run["rows"] for run in case["runs"])
        exact, bound = _q4_case_reference(seed, stream, k, n_total, gs, rows_max)
        if case["bias"]:
            b = synth_values_np(BIAS_RANGE, seed, stream + 2000, case["n"]).astype(np.float64)
            exact = exact + b
            bound = bound + np.abs(b) * 2.0 ** -23
        splits = [(0, case["n"])] if not case["n_kv"] else [(0, case["n"]), (case["n"], case["n_kv"]),
                                                            (case["n"] + case["n_kv"], case["n_kv"])]
        ratio = 0.0
        for run in case["runs"]:
            m = run["rows"]
            assert run["routes"] == expected_q4_routes(case, m, report["adapter"]) or \
                sorted(set(run["routes"])) == expected_q4_routes(case, m, report["adapter"]), \
                f"{case['name']} rows {m}: attested {run['routes']}, expected {expected_q4_routes(case, m, report['adapter'])}"
            for (col0, width), name in zip(splits, run["artifacts"]):
                data = read(name)
                words = np.frombuffer(data, np.uint32)
                assert not np.any(words == poison), f"{name}: {int(np.sum(words == poison))} outputs never written"
                gpu = np.frombuffer(data, np.float32).reshape(m, width).astype(np.float64)
                err = np.abs(gpu - exact[:m, col0:col0 + width])
                lim = bound[:m, col0:col0 + width]
                bad = ~(err <= lim)
                assert not bad.any(), (f"{name}: {int(bad.sum())} outside the bound, worst err/bound "
                                       f"{float(np.max(err / lim)):.2f} at {np.argwhere(bad)[0].tolist()}")
                ratio = max(ratio, float(np.max(err / lim)))
        worst[case["name"]] = ratio
    for case in report.get("embeddings", []):
        _verify_q4_embedding(case, seed, read)
        worst[case["name"]] = 0.0
    return worst


def _verify_q4_embedding(case: dict, seed: int, read) -> None:
    """Bit-exact: each valid row is f32(q * scale) of the twin, read in the case's nibble order;
    out-of-range ids give zeros and status 1; the controls survive the resize to one token."""
    from ..checks.q4_linear import WEIGHT_RANGE

    dim, gs, vocab = case["dim"], case["group_size"], case["vocab"]
    for run in case["runs"]:
        tokens = run["tokens"]
        params = np.frombuffer(bytes(run["params"]), np.uint32).tolist()
        assert params == [tokens, dim, vocab, gs, int(case["nibble_high_first"]), int(case["scales_transposed"])], \
            f"{case['name']}: params after resize {params}"
        assert run["routes"] == ["q4_embedding"], f"{case['name']}: attested {run['routes']}"
        out = np.frombuffer(read(run["artifacts"][0]), np.float32).reshape(tokens, dim)
        status = np.frombuffer(read(run["artifacts"][1]), np.uint32)
        for t, token_id in enumerate(case["ids"][:tokens]):
            if token_id >= vocab:
                assert status[t] == 1 and not out[t].any(), f"{case['name']}: id {token_id} not flagged/zeroed"
                continue
            levels, scale = q4_levels_np(synth_rows_np(WEIGHT_RANGE, seed, case["stream"], dim, token_id, token_id + 1), gs)
            order = np.arange(dim) ^ 1 if case["nibble_high_first"] else np.arange(dim)
            q = levels[0, order].astype(np.float32) - np.float32(8)
            expected = q * np.repeat(scale[0], gs).astype(np.float32)
            assert status[t] == 0, f"{case['name']}: valid id {token_id} flagged"
            assert np.array_equal(out[t].view(np.uint32), expected.view(np.uint32)), \
                f"{case['name']}: row of id {token_id} differs at {np.flatnonzero(out[t] != expected)[:5].tolist()}"


# ---------------------------------------------------------------------------------------------
# Decoder building blocks (RMSNorm, q/k norm, RoPE, SwiGLU, residual add, f32 embedding, argmax):
# float64 references, the error bounds the kernels are held to, and the one verifier that the
# native test (tests/test_native_decoder_blocks.py) and the browser test
# (e2e/test_decoder_blocks_browser.py) both call. u = 2^-24 is the f32 unit roundoff; one ULP of
# an f32 value v is at most 2u |v|.

_U = 2.0 ** -24


def _gamma(n: int) -> float:
    """gamma_n = n u / (1 - n u): the relative error bound of n chained f32 roundings."""
    return n * _U / (1 - n * _U)


def rms_norm_reference(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """float64 x / sqrt(mean(x^2) + eps) * w over the last dim."""
    x64 = x.astype(np.float64)
    return x64 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + eps) * w.astype(np.float64)


def rms_norm_relative_bound(d: int, workgroup: int, *, subgroup: bool) -> float:
    """|y - exact| <= bound * |exact| for the rms_norm kernels.

    The row's sum of squares: every square is rounded once and goes through at most h - 1 additions,
    so its relative error is <= gamma_h in any summation order. h = ceil(d / WG) + 1 + log2(WG) on
    the tree route; on the subgroup route subgroupAdd's order is unspecified (up to 128 lanes, so up
    to 127 additions) and up to WG / 4 subgroup sums follow in sequence: h = ceil(d / WG) + 1 + 127 +
    WG / 4. Then / d (WGSL: 2.5 ULP = 5u), + eps (correctly rounded: u) and eps's own rounding to f32
    (u relative to mean + eps at most): the argument of inverseSqrt is off by <= gamma_h + 7u; the
    square root halves that; inverseSqrt adds 2 ULP = 4u and the two multiplies u each. The 1.01
    factor covers the second-order terms (all the first-order ones are < 2e-5).
    """
    chain = -(-d // workgroup) + 1 + (127 + workgroup // 4 if subgroup else int(np.log2(workgroup)))
    return 1.01 * ((_gamma(chain) + 7 * _U) / 2 + 4 * _U + 2 * _U)


def rope_cos_sin_reference(head_dim: int, theta: float, llama3: bool, positions: np.ndarray) -> tuple:
    """float64 (cos, sin) of positions[:, None] * f[None, :], f from numpy (not the runtime's code).

    Llama 3 scaling (factor 32, low 1, high 4, original context 8192) per the model's config."""
    f = np.power(float(theta), -np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    if llama3:
        wavelength = 2 * np.pi / f
        s = (8192.0 / wavelength - 1.0) / (4.0 - 1.0)
        blended = (1 - s) * f / 32.0 + s * f
        f = np.where(wavelength < 8192.0 / 4.0, f, np.where(wavelength > 8192.0 / 1.0, f / 32.0, blended))
    angle = positions.astype(np.float64)[:, None] * f[None, :]
    return np.cos(angle), np.sin(angle)


def rope_reference(src: np.ndarray, cos: np.ndarray, sin: np.ndarray, layout: str,
                   positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 RoPE of src [S, H, D] (cos/sin [S, D/2] at `positions`) and the kernel's error bound."""
    # The kernel reads cos and sin rounded once to f32 from a float64 table (u relative each),
    # multiplies (u each) and adds (u; an FMA only removes a rounding): for the pair (a, b),
    # |out - exact| <= 3u (|a cos| + |b sin|) + O(u^2), at any position. On top, the table (Python's
    # math in the page) and this reference (numpy) evaluate position * f in float64 separately, and
    # may differ by a few float64 ULPs of position * f <= position: (|a| + |b|) (position + 1) 2^-48.
    x = src.astype(np.float64)
    half = x.shape[-1] // 2
    if layout == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]
    else:
        a, b = x[..., :half], x[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]
    first, second = a * c - b * s, a * s + b * c
    slack = (np.abs(a) + np.abs(b)) * 2.0 ** -48 * (positions.astype(np.float64)[:, None, None] + 1)
    bound = 3.001 * _U * (np.abs(a * c) + np.abs(b * s)) + slack
    bound_second = 3.001 * _U * (np.abs(a * s) + np.abs(b * c)) + slack
    out, allowed = np.empty_like(x), np.empty_like(x)
    if layout == "interleaved":
        out[..., 0::2], out[..., 1::2] = first, second
        allowed[..., 0::2], allowed[..., 1::2] = bound, bound_second
    else:
        out[..., :half], out[..., half:] = first, second
        allowed[..., :half], allowed[..., half:] = bound, bound_second
    return out, allowed


def swiglu_reference(gate: np.ndarray, up: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 g * sigmoid(g) * up and the kernel's bound: the unary silu budget (12 + 4|g| ULP of
    the silu value, from exp's 3 + 2|g| ULP, the add, the divide's 2.5 ULP, doubled) plus the
    multiply by up (u): |out - exact| <= ((12 + 4|g|) 2u + u) |exact| (1.001 for second order)."""
    g, u64 = gate.astype(np.float64), up.astype(np.float64)
    exact = g / (1.0 + np.exp(-g)) * u64
    return exact, 1.001 * ((12 + 4 * np.abs(g)) * 2 * _U + _U) * np.abs(exact)


def argmax_expected(values: np.ndarray) -> int:
    """numpy.argmax semantics, which the kernels implement: NaN above all (first NaN wins),
    -0 == +0, ties to the lowest index."""
    return int(np.argmax(values))


def _within(name: str, gpu: np.ndarray, exact: np.ndarray, allowed: np.ndarray) -> float:
    error = np.abs(gpu.astype(np.float64) - exact)
    bad = ~(error <= allowed)           # NaN (poison, or a NaN result) counts as bad
    if np.any(bad):
        where = np.flatnonzero(bad.ravel())[:5]
        detail = [(int(i), float(gpu.ravel()[i]), float(exact.ravel()[i]), float(allowed.ravel()[i])) for i in where]
        raise AssertionError(f"{name}: {int(bad.sum())} of {bad.size} outside the bound; first (index, gpu, "
                             f"exact, allowed): {detail}")
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(allowed > 0, error / allowed, 0.0)
    return float(ratio.max()) if ratio.size else 0.0


def verify_decoder_blocks_report(report: dict, artifacts: dict[str, bytes], *, full: bool = True) -> dict:
    """Check every output of the decoder_blocks suite against float64 numpy, on either backend.

    Raises AssertionError naming the model, step, tensor and the first bad elements; returns the
    worst error/bound ratio per check. `full` also demands the complete coverage (all geometries,
    S in {1, 7, 128}, every argmax size and case kind) rather than whatever the options selected.
    """
    from ..checks.decoder_blocks import (ARGMAX_RANGE, ARGMAX_SIZES, ARGMAX_STREAM, DEFAULT_LENGTHS, MODELS,
                                         POISON, RANGES, ROPE_POSITIONS, STREAMS, argmax_cases, step_ids, steps_for)
    from ..ops.norm import rms_norm_kernel

    seed = report["seed"]
    backend = report["adapter"]["backend"]
    subgroups = "subgroups" in report["adapter"]["device_features"]
    assert report["subgroups"] == subgroups, "the subgroup route must run exactly when the device has 'subgroups'"
    poison = np.frombuffer(POISON, np.uint32)[0]
    lengths = report["options"]["lengths"]
    steps = steps_for(lengths)
    assert [tuple(s) for s in report["options"]["steps"]] == steps
    if full:
        assert set(DEFAULT_LENGTHS) <= set(lengths), f"S {lengths} does not cover {DEFAULT_LENGTHS}"
        assert [m["key"] for m in report["models"]] == list(MODELS), "not every geometry ran"
        assert report["argmax"] is not None and report["argmax"]["sizes"] == list(ARGMAX_SIZES)
    worst: dict[str, float] = {}

    def note(key: str, ratio: float) -> None:
        worst[key] = max(worst.get(key, 0.0), ratio)

    for model_report in report["models"]:
        key = model_report["key"]
        m = MODELS[key]
        assert model_report["hidden"] == m.hidden and model_report["head_dim"] == m.head_dim
        cap = model_report["capacity"]
        assert cap == max(lengths)
        d, hd, f = m.hidden, m.head_dim, m.ffn

        def inputs(role: str, shape) -> np.ndarray:
            return synth_values_np(RANGES[role], seed, STREAMS[key][role], int(np.prod(shape))).reshape(shape)

        x, norm_w = inputs("x", (cap, d)), inputs("norm_w", (d,))
        q, k = inputs("q", (cap, m.q_heads, hd)), inputs("k", (cap, m.kv_heads, hd))
        gate, up = inputs("gate", (cap, f)), inputs("up", (cap, f))
        res_a, res_b = inputs("res_a", (cap + 1, d)), inputs("res_b", (cap, d))
        table = inputs("emb_table", (m.table_rows, d))
        q_norm_w = inputs("q_norm_w", (hd,)) if m.qk_norm else None
        k_norm_w = inputs("k_norm_w", (hd,)) if m.qk_norm else None

        kernels = model_report["kernels"]
        wg_hidden = int(kernels["rms_norm"].rsplit("wg", 1)[1])
        assert kernels["rms_norm"] == rms_norm_kernel(d, subgroup=False, backend=backend)[0]
        if subgroups:
            assert kernels["rms_norm_subgroup"] == rms_norm_kernel(d, subgroup=True, backend=backend)[0], kernels
        wg_head = rms_norm_kernel(hd, subgroup=False, backend=backend)[1]
        expected_routes = {"fill_uniform", "rms_norm", f"rope_{m.layout}", "swiglu_fused", "residual_add",
                           "residual_add_inplace", "embedding_f32"} | ({"rms_norm_subgroup"} if subgroups else set())

        assert len(model_report["steps"]) == len(steps)
        for index, (step, (tokens, pos)) in enumerate(zip(model_report["steps"], steps)):
            where = f"{key} step {index} (S={tokens}, pos={pos})"
            assert (step["seq"], step["pos"]) == (tokens, pos), where
            assert set(step["routes"]) == expected_routes, f"{where}: routes {step['routes']}"
            assert step["rope_params"] == [tokens, m.q_heads, hd // 2, pos, ROPE_POSITIONS], \
                f"{where}: the resized RoPE params {step['rope_params']}"

            def output(name: str, row_shape) -> np.ndarray:
                raw = np.frombuffer(artifacts[f"{key}_{index}_{name}.f32"], np.float32)
                per_row = int(np.prod(row_shape))
                assert raw.size == (tokens + 1) * per_row, f"{where}: {name} has {raw.size} elements"
                guard = raw[tokens * per_row:].view(np.uint32)
                assert np.all(guard == poison), f"{where}: {name} wrote past its {tokens} live rows"
                return raw[:tokens * per_row].reshape(tokens, *row_shape)

            # RMSNorm of the hidden rows, on every route that ran.
            exact = rms_norm_reference(x[:tokens], norm_w, m.eps)
            for name, subgroup in (("xn", False), ("xn_sg", True)):
                if subgroup and not subgroups:
                    continue
                bound = rms_norm_relative_bound(d, wg_hidden, subgroup=subgroup)
                note(f"rms_norm{'_subgroup' if subgroup else ''}",
                     _within(f"{where}: {name}", output(name, (d,)), exact, bound * np.abs(exact)))

            # Qwen3's per-head q/k norm (before RoPE): rows of head_dim sharing one weight.
            q_src, k_src = q[:tokens], k[:tokens]
            if m.qk_norm:
                for name, src, w, heads, subgroup in (("qn", q_src, q_norm_w, m.q_heads, False),
                                                      ("kn", k_src, k_norm_w, m.kv_heads, False),
                                                      ("qn_sg", q_src, q_norm_w, m.q_heads, True)):
                    if subgroup and not subgroups:
                        continue
                    exact = rms_norm_reference(src, w, m.eps)
                    bound = rms_norm_relative_bound(hd, wg_head, subgroup=subgroup)
                    note(f"qk_norm{'_subgroup' if subgroup else ''}",
                         _within(f"{where}: {name}", output(name, (heads, hd)), exact, bound * np.abs(exact)))
                # RoPE is checked on exactly what it read: the GPU's normed q and k.
                q_src, k_src = output("qn", (m.q_heads, hd)), output("kn", (m.kv_heads, hd))

            # RoPE at positions pos .. pos + S - 1.
            positions = np.arange(pos, pos + tokens)
            cos, sin = rope_cos_sin_reference(hd, m.theta, m.scaling is not None, positions)
            for name, src, heads in (("q_rot", q_src, m.q_heads), ("k_rot", k_src, m.kv_heads)):
                exact, allowed = rope_reference(src, cos, sin, m.layout, positions)
                note(f"rope_{m.layout}", _within(f"{where}: {name}", output(name, (heads, hd)), exact, allowed))

            # Fused SwiGLU.
            exact, allowed = swiglu_reference(gate[:tokens], up[:tokens])
            note("swiglu", _within(f"{where}: act", output("act", (f,)), exact, allowed))

            # Residual add: one correctly rounded f32 add, so bit-exact; in place leaves row S alone.
            summed = (res_a[:tokens] + res_b[:tokens]).astype(np.float32)
            assert np.array_equal(output("res_out", (d,)).view(np.uint32), summed.view(np.uint32)), \
                f"{where}: res_out (residual_add) differs from float32 a + b"
            in_place = np.frombuffer(artifacts[f"{key}_{index}_res_a.f32"], np.float32).reshape(tokens + 1, d)
            assert np.array_equal(in_place[:tokens].view(np.uint32), summed.view(np.uint32)), \
                f"{where}: res_a (residual_add_inplace) differs from float32 a + b"
            assert np.array_equal(in_place[tokens].view(np.uint32), res_a[tokens].view(np.uint32)), \
                f"{where}: res_a (residual_add_inplace) wrote past its {tokens} live rows"

            # Embedding: exact rows, zeros and status 1 for ids past the table.
            ids = step_ids(m, seed, index, tokens)
            assert step["ids"] == ids, f"{where}: ids"
            valid = np.array([i < m.table_rows for i in ids])
            expected = np.zeros((tokens, d), np.float32)
            expected[valid] = table[np.array(ids)[valid]]
            assert np.array_equal(output("emb", (d,)).view(np.uint32), expected.view(np.uint32)), \
                f"{where}: emb rows differ from the table rows (zeros for bad ids)"
            assert step["status"] == [int(not v) for v in valid], f"{where}: status {step['status']}"
            assert step["status_guard_intact"], f"{where}: embedding status written past the live tokens"

    if report["argmax"] is not None:
        cases = report["argmax"]["cases"]
        expected_cases = argmax_cases(report["argmax"]["sizes"])
        assert [(c["kind"], c["n"]) for c in cases] == [(c["kind"], c["n"]) for c in expected_cases]
        largest = max(report["argmax"]["sizes"])
        generated = synth_values_np(ARGMAX_RANGE, seed, ARGMAX_STREAM, largest)
        for case, planned in zip(cases, expected_cases):
            assert case["plants"] == planned["plants"] and case["full"] == planned["full"]
            n = case["n"]
            values = generated[:n].copy()
            if case["full"] is not None:
                values = np.array(case["full"], np.uint32).view(np.float32)
            for index, bits in case["plants"]:
                values.view(np.uint32)[index] = bits
            expected = argmax_expected(values)
            where = f"argmax {case['kind']} n={n}"
            assert case["routes"] == ["argmax"], f"{where}: routes {case['routes']}"
            assert case["index"] == expected, f"{where}: GPU {case['index']}, numpy {expected}"
            assert case["expected_in_page"] == expected, f"{where}: page reference {case['expected_in_page']}"
            # The cases mean what they say: the lowest planted tie, the lowest planted NaN.
            if case["kind"] in ("ties", "last"):
                assert expected == min(i for i, _ in case["plants"]), where
            if case["kind"] == "nan":
                assert expected == min(i for i, bits in case["plants"] if bits & 0x7FFFFFFF > 0x7F800000), where

    # The profiled step of each plan: one row per dispatch, every route with its declared traffic.
    if "timestamp-query" in report["adapter"]["device_features"]:
        ran = {r for m in report["models"] for s in m["steps"] for r in s["routes"]}
        ran |= {"argmax"} if report["argmax"] is not None else set()
        assert {t["route"] for t in report["timings"]} == ran, "a route ran unprofiled"
        assert all(t["bytes"] > 0 for t in report["timings"]), "an op declared no bytes moved"
        assert all(t["flops"] > 0 for t in report["timings"] if t["route"] not in ("fill_uniform", "embedding_f32"))
    return worst
