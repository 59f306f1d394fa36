"""The Q4 quantizer twin, the Q4 linear reference and the verifier of the q4 checks."""

from __future__ import annotations

import functools

import numpy as np

from ...gpu.device import SUBGROUP_MATRIX
from ...kernels import kernel
from ...ops.synth import UniformRange
from .synth import synth_rows_np, synth_values_np


# ---- Q4 group-wise symmetric weights -------------------------------------------------------------

_TWO_FIFTEENTHS = np.float32(2 / 15)
_MIN_SCALE = np.float32(1e-10)
_THRESHOLD_STEPS = (np.arange(15, dtype=np.float32) - np.float32(7.5))

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
    (K + 4) u * sum_k |x| (n + 8) s (u = 2^-24, n = q + 8 the stored nibble): sequential f32 sums, the
    nibble and scale products. Kernels that centre each nibble round terms of size |x (n - 8) s|; the
    MASK GEMV variants compute sum(n x) - 8 sum(x), whose terms are |x| n s and 8 |x| s: (n + 8) covers both."""
    m = x.shape[0]
    x64 = x.astype(np.float64)
    exact = np.empty((m, n_total))
    magnitude = np.empty((m, n_total))
    for row0 in range(0, n_total, chunk_rows):
        row1 = min(n_total, row0 + chunk_rows)
        levels, scale = q4_levels_np(synth_rows_np(value_range, seed, stream, k, row0, row1), group_size)
        dequant = (levels.astype(np.float64) - 8) * np.repeat(scale.astype(np.float64), group_size, axis=1)
        exact[:, row0:row1] = x64 @ dequant.T
        magnitude[:, row0:row1] = np.abs(x64) @ ((levels.astype(np.float64) + 8)
                                                 * np.repeat(scale.astype(np.float64), group_size, axis=1)).T
    u = 2.0 ** -24
    return exact, (k + 4) * u / (1 - (k + 4) * u) * magnitude


def expected_q4_routes(case: dict, rows: int, adapter: dict) -> list[str]:
    """What attestation must show, from the route rules in ops/q4.py's docstring (restated here so the
    test checks the guards, not their implementation)."""
    if case["force"]:
        return [case["force"]]
    info, limits = adapter["info"], adapter["limits"]
    sub_max = info.get("subgroupMaxSize")
    gemv = "q4_gemv_subgroup" if ("subgroups" in adapter["device_features"] and isinstance(sub_max, int)
                                  and 0 < sub_max <= 32) else "q4_gemv_workgroup"
    if rows == 1:
        # int8 where the workgroup memory holds the row (K <= 8192, ops/q4.py int8_max_k) and, for a
        # vocab-sized N, a warp's lanes all have a group (K / gs >= 32); else the f32 GEMV.
        int8 = case.get("int8") and case["k"] <= 8192 and (case["n"] < 65536 or case["k"] // case["group_size"] >= 32)
        return ["q4_gemv_int8"] if int8 else [gemv]
    if case["n_kv"]:
        if (case["k"], case["n"], case["n_kv"], case["group_size"]) == (2048, 2048, 512, 64):
            return ["q4_qkv_fused_bk64"]
        return ["q4_gemm_tiled"]
    bk64 = ((case["k"], case["n"]) in {(2048, 8192), (8192, 2048), (2048, 2048)} and case["group_size"] == 64
            and not case["bias"]
            and limits.get("maxComputeWorkgroupStorageSize", 0) >= kernel("q4gsw_gemm_bk64").workgroup_bytes)
    return ["q4_gemm_bk64" if bk64 else "q4_gemm_tiled"]


@functools.lru_cache(maxsize=64)
def _q4_case_reference(seed: int, stream: int, k: int, n_total: int, group_size: int, rows: int):
    """Cached per case: the native and the browser runs of one pytest session share the oracle."""
    from ...checks.q4_linear import ACT_RANGE, WEIGHT_RANGE

    x = synth_values_np(ACT_RANGE, seed, stream + 1000, rows * k).reshape(rows, k)
    return q4_linear_reference(x, k=k, n_total=n_total, group_size=group_size, seed=seed, stream=stream,
                               value_range=WEIGHT_RANGE)


def verify_q4_report(report: dict, read) -> dict:
    """Every output element of every case and row count against the oracle; the twin against the GPU
    quantizer where the weights were uploaded; the routes against attestation. `read(name)` gives an
    artifact's bytes. Returns worst error/bound per case."""
    from ...checks.q4_linear import ACT_RANGE, BIAS_RANGE, WEIGHT_RANGE

    seed = report["seed"]
    worst = {}
    for case in report["cases"]:
        k, gs = case["k"], case["group_size"]
        n_total = 2 * case["n"] if case.get("glu") else case["n"] + 2 * (case["n_kv"] or 0)
        stream = case["stream"]
        if case["weight_artifacts"]:
            levels, scale = q4_levels_np(synth_rows_np(WEIGHT_RANGE, seed, stream, k, 0, n_total), gs)
            packed = np.frombuffer(read(case["weight_artifacts"][0]), np.uint32)[:n_total * k // 8]
            scales = np.frombuffer(read(case["weight_artifacts"][1]), np.float32)[:n_total * k // gs]
            twin = q4_pack_np(levels).reshape(-1)
            assert np.array_equal(packed, twin), (f"{case['name']}: packed weights differ from the twin at words "
                                                  f"{np.flatnonzero(packed != twin)[:5].tolist()} of {twin.size}")
            assert np.array_equal(scales.view(np.uint32), scale.T.reshape(-1).view(np.uint32)), \
                f"{case['name']}: scales differ from the twin"
            if case.get("scales_rows"):         # the row-major copy: [N, K/gs], bit for bit
                rows_copy = np.frombuffer(read(case["weight_artifacts"][2]), np.float32)[:n_total * k // gs]
                assert np.array_equal(rows_copy.view(np.uint32), scale.reshape(-1).view(np.uint32)), \
                    f"{case['name']}: the row-major scale copy differs from the twin"
        splits = [(0, case["n"])] if not case["n_kv"] else [(0, case["n"]), (case["n"], case["n_kv"]),
                                                            (case["n"] + case["n_kv"], case["n_kv"])]
        int8_runs = [run for run in case["runs"] if run["rows"] == 1 and (
            case.get("int8x") or (case.get("int8") and run["routes"] == ["q4_gemv_int8"]))]
        ratio = max([_verify_int8_decode(case, run, seed, read) for run in int8_runs], default=0.0)
        dp4a_runs = [run for run in case["runs"] if run["rows"] > 1 and case.get("dp4a")]
        if dp4a_runs:
            ratio = max(ratio, _verify_dp4a_prefill(case, dp4a_runs, seed, read, report["adapter"]))
        half_runs = [run for run in case["runs"] if run["rows"] > 1 and case.get("half")]
        f32_runs = [run for run in case["runs"] if run not in int8_runs and run not in dp4a_runs
                    and run not in half_runs]
        if f32_runs or half_runs:      # (the float64 reference only where a run needs it: int8-only cases skip it)
            rows_max = max(run["rows"] for run in f32_runs + half_runs)
            exact, bound = _q4_case_reference(seed, stream, k, n_total, gs, rows_max)
            if half_runs:
                x = synth_values_np(ACT_RANGE, seed, stream + 1000, rows_max * k).reshape(rows_max, k)
                half_bound = f16_linear_bound(bound, np.abs(x).sum(axis=1), k, abs(WEIGHT_RANGE.offset))
            if case["bias"]:
                b = synth_values_np(BIAS_RANGE, seed, stream + 2000, case["n"]).astype(np.float64)
                exact = exact + b
                bound = bound + np.abs(b) * 2.0 ** -23
                if half_runs:
                    half_bound = half_bound + np.abs(b) * 2.0 ** -23
        if half_runs and case.get("gemm_shape"):
            assert case["kernels"][-1] == f"q4gsw_gemm_sgmat_f16_{case['gemm_shape']}", \
                f"{case['name']}: the prefill ran {case['kernels'][-1]}, not the {case['gemm_shape']} tile"
        for run in half_runs:
            m = run["rows"]
            assert run["routes"] == ["q4_gemm_sgmat_f16"], \
                f"{case['name']} rows {m}: attested {run['routes']}, expected q4_gemm_sgmat_f16"
            for (col0, width), name in zip(splits, run["artifacts"]):
                ratio = max(ratio, _within_bound(name, read(name), exact[:m, col0:col0 + width],
                                                 half_bound[:m, col0:col0 + width], "the f16 bound"))
        for run in f32_runs:
            m = run["rows"]
            assert run["routes"] == expected_q4_routes(case, m, report["adapter"]) or \
                sorted(set(run["routes"])) == expected_q4_routes(case, m, report["adapter"]), \
                f"{case['name']} rows {m}: attested {run['routes']}, expected {expected_q4_routes(case, m, report['adapter'])}"
            for (col0, width), name in zip(splits, run["artifacts"]):
                ratio = max(ratio, _within_bound(name, read(name), exact[:m, col0:col0 + width],
                                                 bound[:m, col0:col0 + width], "the bound"))
        worst[case["name"]] = ratio
    for case in report.get("embeddings", []):
        _verify_q4_embedding(case, seed, read)
        worst[case["name"]] = 0.0
    return worst


def int8_activations_np(x: np.ndarray, group_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The int8 GEMV's in-workgroup quantization of one f32 row, in numpy: per group scale = max|x|/127
    and q = round_half_even(x * f32(127 / max|x|)), clamped to +-127. The GPU's two divisions are
    within 2.5 ulp, not correctly rounded, so a value whose x * 127/max lies within 1e-4 of a rounding
    midpoint may round the other way there: those are returned as `ambiguous` (the bound covers them).
    Returns (q int64, scale float64, ambiguous bool)."""
    groups = x.astype(np.float32).reshape(-1, group_size)
    peak = np.abs(groups).max(axis=1)
    with np.errstate(divide="ignore"):
        inverse = np.where(peak > 0, np.float32(127) / peak, np.float32(0)).astype(np.float32)
    t = groups.astype(np.float64) * inverse.astype(np.float64)[:, None]
    q = np.clip(np.rint(t), -127, 127).astype(np.int64)
    ambiguous = np.abs(np.abs(t - np.floor(t)) - 0.5) < 1e-4
    return q.reshape(-1), peak.astype(np.float64) / 127, ambiguous.reshape(-1)


def _verify_int8_activations(q: np.ndarray, x_scale: np.ndarray, ambiguous: np.ndarray, words: bytes,
                             stats: bytes, name: str) -> np.ndarray:
    """int8_activations.wgsl's output against the twin: each q equal (or one away where the twin marks
    it ambiguous), in the planar layout (chunk c: values 0-15 in vec4 c, 16-31 in vec4 K/32 + c, each
    u32 the (even, odd) quadruple of a weight word's nibbles); per chunk the scale within the GPU
    division's 2.5 ulp and 8 * sum(q) of the GPU's own q exactly. Returns the GPU's q."""
    k = q.size
    chunks = k // 32
    planes = np.frombuffer(words, np.int8)[:k].reshape(2, chunks, 16).transpose(1, 0, 2).reshape(chunks, 32)
    order = np.array([0, 2, 4, 6, 1, 3, 5, 7])
    order = np.concatenate([order + 8 * i for i in range(4)])     # the byte at position p holds value order[p]
    gpu_q = np.empty((chunks, 32), np.int64)
    gpu_q[:, order] = planes
    gpu_q = gpu_q.reshape(-1)
    moved = gpu_q != q
    assert not np.any(moved & ~ambiguous), f"{name}: int8 values differ from the twin at {np.flatnonzero(moved & ~ambiguous)[:5].tolist()}"
    assert not np.any(np.abs(gpu_q - q) > 1), f"{name}: an ambiguous int8 value moved by more than one"
    got = np.frombuffer(stats, np.float32)[:2 * chunks].reshape(chunks, 2).astype(np.float64)
    chunk_scale = np.repeat(x_scale, chunks // x_scale.size)
    assert np.all(np.abs(got[:, 0] - chunk_scale) <= 3 * 2.0 ** -23 * chunk_scale), f"{name}: chunk scales off"
    assert np.array_equal(got[:, 1], 8.0 * gpu_q.reshape(chunks, 32).sum(axis=1)), f"{name}: chunk sums differ"
    return gpu_q


def _verify_norm_row(case: dict, seed: int, raw: np.ndarray, data: bytes, name: str) -> np.ndarray:
    """rms_norm_int8x's f32 row against float64 RMSNorm, within rms_norm_relative_bound for its sum of
    squares: one workgroup of 256 in passes of 256 octets, each invocation summing 8 squares per pass
    (the bound's chain counts ceil(d / WG) squares per invocation, so it is given d = 8 x 256 x passes).
    Returns the GPU's row (what the GEMV's quantization read)."""
    from ...checks.q4_linear import NORM_EPS, NORM_RANGE
    from .decoder_blocks import rms_norm_reference, rms_norm_relative_bound

    k = case["k"]
    weight = synth_values_np(NORM_RANGE, seed, case["stream"] + 3000, k)
    exact = rms_norm_reference(raw[None, :], weight, NORM_EPS)[0]
    passes = -(-k // (8 * 256))
    allowed = rms_norm_relative_bound(8 * 256 * passes, 256, subgroup=False) * np.abs(exact)
    row = np.frombuffer(data, np.float32)[:k]
    bad = ~(np.abs(row.astype(np.float64) - exact) <= allowed)
    assert not bad.any(), f"{name}: {int(bad.sum())} normalized values outside the RMSNorm bound"
    return row


def _int8_linear_reference(case: dict, seed: int, q: np.ndarray, x_scale: np.ndarray, ambiguous: np.ndarray,
                           rows: int, term: int) -> tuple[np.ndarray, np.ndarray]:
    """(exact, bound) of the int8 decode of the case's first `rows` weight rows against the int8 row q:
    the dots are exact integers, one per `term` values (a group, or a 32-value chunk); then two f32
    products per term, the scale's own rounding (a division on the GPU: 3 u) and T + 8 sequential f32
    sums over the T terms (lanes, reduction, bias): (T + 11) u sum_t |s_w s_x d_t|, plus, per value
    that may round the other way, |s_w (n - 8) s_x| (its int8 value moves by one)."""
    from ...checks.q4_linear import WEIGHT_RANGE

    k, gs = case["k"], case["group_size"]
    levels, w_scale = q4_levels_np(synth_rows_np(WEIGHT_RANGE, seed, case["stream"], k, 0, rows), gs)
    centred = levels.astype(np.int64) - 8
    dots = np.einsum("ntk,tk->nt", centred.reshape(rows, k // term, term), q.reshape(k // term, term))
    terms = dots * np.repeat(w_scale.astype(np.float64) * x_scale, gs // term, axis=1)     # [rows, terms]
    u = 2.0 ** -24
    count = k // term
    bound = (count + 11) * u / (1 - (count + 11) * u) * np.abs(terms).sum(axis=1)
    flips = np.abs(centred) * np.repeat(w_scale.astype(np.float64) * x_scale, gs, axis=1) * ambiguous
    return terms.sum(axis=1), bound + flips.sum(axis=1)


def dp4a_linear_reference(levels: np.ndarray, w_scale: np.ndarray, q: np.ndarray, x_scale: np.ndarray,
                          group_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(exact, bound) of the DP4A GEMM (q4gsw_gemm_dp4a.wgsl) for int8 rows q [M, K] with scales
    x_scale [M, G] (G = K / gs, float64: max|x| / 127 of each group) against weight levels [N, K] (the
    stored nibbles) and scales w_scale [N, G] (f32, exact), without bias.

    The GPU computes per group g the exact integer d_g = sum q (n - 8) (i32; |d_g| < 2^17, so f32(d_g)
    is exact too), then t_g = f32(d_g) * (s_x' * s_w) and acc += t_g in group order, G terms. s_x' is
    the activation kernel's scale, a division within 3 ulp = 6u of max|x| / 127 (checked by
    _verify_int8_activations), and each product rounds once: t_g = d_g s_x s_w (1 + e), |e| <= gamma_8
    (gamma_j = j u / (1 - j u), u = 2^-24). The sequential sum of the G terms (and of the bias, one more
    term) adds gamma_G of the sum of magnitudes, so the output is within
      gamma_(G+8) * (sum_g |d_g s_x s_w| + |bias|)
    of the float64 value (gamma_a + gamma_b + gamma_a gamma_b <= gamma_(a+b)). An FMA rounds fewer times."""
    m, k = q.shape
    groups = k // group_size
    centred = levels.astype(np.float64) - 8
    exact = np.zeros((m, levels.shape[0]))
    magnitude = np.zeros_like(exact)
    for g in range(groups):
        cols = slice(g * group_size, (g + 1) * group_size)
        dots = q[:, cols].astype(np.float64) @ centred[:, cols].T           # exact integers in float64
        terms = dots * x_scale[:, g:g + 1] * w_scale[None, :, g].astype(np.float64)
        exact += terms
        magnitude += np.abs(terms)
    u = 2.0 ** -24
    count = groups + 8
    return exact, count * u / (1 - count * u) * magnitude


def f16_linear_bound(f32_bound: np.ndarray, x_abs_sums: np.ndarray, k: int, weight_peak: float) -> np.ndarray:
    """The f16 subgroup-matrix GEMM's bound (q4gsw_gemm_sgmat_f16.wgsl) from q4_linear_reference's f32 bound
    (K + 4) u M, M = sum_k |x| (n + 8) s >= sum_k |x w|: each x and each dequantized weight is rounded to
    f16 once (relative 2^-11 each where normal, so a product within 2^-10 + 2^-22; where subnormal, within
    2^-25 absolutely, which sum_k |x| 2^-25 and K weight_peak 2^-25 cover), the f16 products are exact in
    f32, and the tensor cores' f32 sums may truncate rather than round: 2 K u of M, which twice the f32
    bound covers."""
    u = 2.0 ** -24
    magnitude = f32_bound / ((k + 4) * u / (1 - (k + 4) * u))
    return (2.0 ** -10 + 2.0 ** -22) * magnitude + 2 * f32_bound + 2.0 ** -25 * (x_abs_sums[:, None] + k * weight_peak)


def expected_int8_gemm(case: dict, adapter: dict, m: int = 0, n: int = 0) -> str:
    """The int8 prefill GEMM attestation must show for an output of n columns at m rows, from the rules in
    ops/q4_linear.py: a pinned tile names its kernel family; else the subgroup-matrix GEMM where the
    device has the feature, lists the i8 x i8 -> i32 16x16x32 config, compiled the probe, runs 32-wide
    subgroups and has the m32n64w4p tile's workgroup memory (its kernel's) and 128 invocations, and
    the DP4A GEMM's 64 x 64 grid at (m, n) is under 256 tiles; else DP4A."""
    from ...ops.q4_linear import gemm_sgmat_shapes

    if case.get("gemm_shape"):
        return "q4_gemm_sgmat_i8" if case["gemm_shape"] in gemm_sgmat_shapes() else "q4_gemm_dp4a"
    info, limits = adapter["info"], adapter["limits"]
    configs = info.get("subgroupMatrixConfigs", []) if SUBGROUP_MATRIX in adapter["device_features"] else []
    able = ({"componentType": "i8", "resultComponentType": "i32", "M": 16, "N": 16, "K": 32} in configs
            and adapter.get("probes", {}).get("subgroup_matrix_i8") == "ok"
            and (info.get("subgroupMinSize"), info.get("subgroupMaxSize")) == (32, 32)
            and limits.get("maxComputeWorkgroupStorageSize", 0) >= kernel("q4gsw_gemm_sgmat_m32n64w4p").workgroup_bytes
            and limits.get("maxComputeInvocationsPerWorkgroup", 0) >= 128)
    small = -(-n // 64) * -(-m // 64) < 256
    return "q4_gemm_sgmat_i8" if able and small else "q4_gemm_dp4a"


def _splits_k(case: dict, adapter: dict, m: int, n: int) -> bool:
    """Whether the int8 GEMM of an output n wide splits K at m rows, with a partials scratch: its grid under
    512 workgroups' worth of 128 invocations (the subgroup-matrix GEMM's 32 x 64 tiles of 128, DP4A's 64 x 64
    of 256, alone where the adapter has no subgroup matrices), and K room for two splits of whole groups and
    K tiles of at least 8 chunks (ops/q4_linear.py k_splits)."""
    from ...ops.q4_linear import GEMM_DP4A_SHAPE, GEMM_SGMAT_SHAPE, GemmTile, k_splits, split_k_room

    route = expected_int8_gemm(case, adapter, m, n)
    if not case.get("split_k") or (route == "q4_gemm_dp4a" and expected_int8_gemm(case, adapter, 2, n) != route):
        return False            # (the large-grid DP4A GEMM beside the subgroup-matrix one never splits)
    name = f"q4gsw_gemm_sgmat_sk_{GEMM_SGMAT_SHAPE}" if route == "q4_gemm_sgmat_i8" else \
        f"q4gsw_gemm_dp4a_sk_{GEMM_DP4A_SHAPE}"
    return k_splits(case["k"], n, case["group_size"], m, GemmTile.of(name), split_k_room())[0] > 1


def _fused_qkv(case: dict, adapter: dict, m: int, n: int) -> bool:
    """Whether a QKV case's prefill at m rows is the one fused DP4A GEMM (ops/q4_linear.py's rule): its
    stacked grid of 64 x 64 tiles at least 256, and 8 storage buffers a shader stage."""
    return (bool(case["n_kv"]) and -(-n // 64) * -(-m // 64) >= 256
            and adapter["limits"].get("maxStorageBuffersPerShaderStage", 0) >= 8)


def _verify_dp4a_prefill(case: dict, runs: list[dict], seed: int, read, adapter: dict) -> float:
    """The int8 prefill runs of a case: attestation (the int8 producer, then the int8 GEMM the adapter
    allows (expected_int8_gemm): q4_gemm_sgmat_i8 or q4_gemm_dp4a, of the tile asked for; both compute
    the same per-group sums, exactly, and the same f32 arithmetic after them), the RMSNorm's rows where it produced them (_verify_norm_row), each of the m quantized
    rows against the twin (int8_activations_np: q equal, or one away
    where the twin marks it ambiguous; scales within 3 ulp), then the outputs against
    dp4a_linear_reference over the GPU's own q. Returns the worst error/bound."""
    from ...checks.q4_linear import ACT_RANGE, BIAS_RANGE, WEIGHT_RANGE

    k, gs = case["k"], case["group_size"]
    widths = [case["n"]] + [case["n_kv"]] * 2 * bool(case["n_kv"])        # a QKV's q, k and v, side by side
    n = sum(widths) * (2 if case.get("glu") else 1)                         # a GLU's gate rows, then its up rows
    if case.get("gemm_shape"):
        family = "sgmat" if expected_int8_gemm(case, adapter) == "q4_gemm_sgmat_i8" else "dp4a"
        assert case["kernels"][-1] == f"q4gsw_gemm_{family}_{case['gemm_shape']}", \
            f"{case['name']}: the prefill ran {case['kernels'][-1]}, not the {case['gemm_shape']} tile"
    levels, w_scale = q4_levels_np(synth_rows_np(WEIGHT_RANGE, seed, case["stream"], k, 0, n), gs)
    bias = synth_values_np(BIAS_RANGE, seed, case["stream"] + 2000, n).astype(np.float64) if case["bias"] else 0.0
    worst = 0.0
    for run in runs:
        m = run["rows"]
        producer = "rms_norm_int8x" if case.get("norm") else "int8_activations"
        if case.get("glu"):     # (the check runs the GLU op alone: its prefill GEMM must run at every m > 1)
            routes = ["q4_glu_dp4a"]
            assert -(-case["n"] // 64) * -(-m // 64) >= 256, f"{case['name']}: {m} rows are too few for q4_glu_dp4a"
        elif _fused_qkv(case, adapter, m, n):
            routes = ["q4_qkv_fused_dp4a"]
        else:
            routes = {expected_int8_gemm(case, adapter, m, width) for width in widths}
            routes = sorted(routes | ({"q4_gemm_split_k"} if any(_splits_k(case, adapter, m, w) for w in widths) else set()))
        assert run["routes"][0] == producer and sorted(run["routes"][1:]) == routes, \
            f"{case['name']} rows {m}: attested {run['routes']}, expected the int8 producer and {routes}"
        extra = 3 if case.get("norm") else 2
        out_names, (words_name, stats_name) = run["artifacts"][:-extra], run["artifacts"][-extra:][:2]
        words, stats = read(words_name), read(stats_name)
        x = synth_values_np(ACT_RANGE, seed, case["stream"] + 1000, m * k).reshape(m, k)
        if case.get("norm"):        # x is then the norm's rows: each checked, then quantized by the twin
            rows_name = run["artifacts"][-1]
            normed = read(rows_name)
            x = np.stack([_verify_norm_row(case, seed, x[row], normed[4 * row * k:4 * (row + 1) * k],
                                           f"{rows_name} row {row}") for row in range(m)])
        q = np.empty((m, k), np.int64)
        x_scale = np.empty((m, k // gs))
        for row in range(m):
            twin_q, x_scale[row], ambiguous = int8_activations_np(x[row], gs)
            q[row] = _verify_int8_activations(twin_q, x_scale[row], ambiguous, words[row * k:(row + 1) * k],
                                              stats[row * k // 4:(row + 1) * k // 4], f"{words_name} row {row}")
        exact, bound = dp4a_linear_reference(levels, w_scale, q, x_scale, gs)
        count = k // gs + 8
        exact, bound = exact + bias, bound + count * 2.0 ** -24 / (1 - count * 2.0 ** -24) * np.abs(bias)
        if case.get("glu"):
            half = case["n"]
            exact, bound = swiglu_of_bounded(exact[:, :half], bound[:, :half], exact[:, half:], bound[:, half:])
        got = np.hstack([np.frombuffer(read(name), np.float32).reshape(m, width)
                         for name, width in zip(out_names, widths)])
        worst = max(worst, _within_bound(", ".join(out_names), got.tobytes(), exact, bound, "the DP4A bound"))
    return worst


def swiglu_of_bounded(g: np.ndarray, bg: np.ndarray, up: np.ndarray, bu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """silu(g) * up in float64 for g, up known within bg, bu, and the bound of the f32 evaluation
    g / (1 + exp(-g)) * up at the perturbed inputs: |silu'| <= 1.1 carries bg, |silu(g)| carries bu
    (D = 1.1 bg (|up| + bu) + |silu(g)| bu), then the evaluation's own (12 + 4|g|) 2u + u relative
    error (shaders/llm/swiglu.wgsl's budget) on |exact| + D; 1.001 for second order."""
    u = 2.0 ** -24
    silu = g / (1.0 + np.exp(-g))
    exact = silu * up
    moved = 1.1 * bg * (np.abs(up) + bu) + np.abs(silu) * bu
    rounding = (12 + 4 * (np.abs(g) + bg)) * 2 * u + u
    return exact, 1.001 * (moved + rounding * (np.abs(exact) + moved))


def _verify_int8_decode(case: dict, run: dict, seed: int, read) -> float:
    """The int8 decode against the Q4 weight times the twin's int8 row (int8_activations_np), or, for
    the pre-quantized route, the GPU's own int8 row once it is checked against the twin
    (_verify_int8_activations); bounds from _int8_linear_reference (and swiglu_of_bounded for the
    fused gate/up). Returns the worst error/bound."""
    from ...checks.q4_linear import ACT_RANGE, BIAS_RANGE

    k, gs = case["k"], case["group_size"]
    n = case["n"] + 2 * (case["n_kv"] or 0)         # a fused QKV's outputs are compared as one row
    prequantized = bool(case.get("int8x"))
    gemv = ("q4_gemv_int8x_qkv" if case["n_kv"] else "q4_gemv_int8x_glu_q8" if case.get("glu_q8")
            else "q4_gemv_int8x_glu" if case.get("glu") else "q4_gemv_int8x")
    in_gemv = "_norm" * bool(case.get("norm_prologue"))        # the epilogue GEMV normalizing the raw row itself
    gemv += in_gemv * bool(case.get("glu_q8"))
    producer = "rms_norm_int8x" if case.get("norm") else "int8_activations"
    expected = [producer, gemv] if prequantized else ["q4_gemv_int8"]
    if prequantized and case.get("glu_q8") and producer != "int8_activations":
        expected.append("int8_activations")     # quantize_activations of the same out (attested once)
    if case.get("rope"):        # the plain QKV, rope_kv_cache_write of its q, k, v, then the fused QKV
        qk_norm = bool(case["rope"].get("qk_norm"))     # (Qwen3's q/k norm first, on both sides)
        expected += ["rope_kv_cache_write" + "_norm" * qk_norm, "q4_gemv_int8x_qkv_rope" + "_qknorm" * qk_norm + in_gemv]
    assert run["routes"] == expected, f"{case['name']}: attested {run['routes']}, expected {expected}"
    x = synth_values_np(ACT_RANGE, seed, case["stream"] + 1000, k)
    outputs = 3 if case["n_kv"] else 1
    out_names = run["artifacts"][:outputs]
    if case.get("norm"):        # the GEMV's x is the norm's f32 row: checked, then quantized by the twin
        normed = run["artifacts"][outputs + 2]      # after the outputs and the int8 words and stats
        x = _verify_norm_row(case, seed, x, read(normed), normed)
    q, x_scale, ambiguous = int8_activations_np(x, gs)
    if case.get("scales_rows"):     # the variant that reads the row-major scale copy ran, not the reference one
        assert "_sr_" in case["kernels"][0], f"{case['name']}: the decode ran {case['kernels'][0]}, not an _sr variant"
    if prequantized and case.get("gemv_shape"):     # and the variant asked for, not the route's own pick
        assert case["kernels"][0].endswith("_" + case["gemv_shape"]), \
            f"{case['name']}: the decode ran {case['kernels'][0]}, not the {case['gemv_shape']} variant"
    if prequantized:
        words_name, stats_name = run["artifacts"][outputs:outputs + 2]
        # The GEMV is then checked against the GPU's own int8 row: no value is left ambiguous.
        q = _verify_int8_activations(q, x_scale, ambiguous, read(words_name), read(stats_name), words_name)
        ambiguous = np.zeros_like(ambiguous)
    term = 32 if prequantized else gs
    if case.get("glu"):
        exact, bound = _int8_linear_reference(case, seed, q, x_scale, ambiguous, 2 * n, term)
        exact, bound = swiglu_of_bounded(exact[:n], bound[:n], exact[n:], bound[n:])
    else:
        exact, bound = _int8_linear_reference(case, seed, q, x_scale, ambiguous, n, term)
    if case["bias"]:
        b = synth_values_np(BIAS_RANGE, seed, case["stream"] + 2000, n).astype(np.float64)
        exact, bound = exact + b, bound + np.abs(b) * 2.0 ** -23
    ratio = _within_bound(", ".join(out_names), b"".join(read(name) for name in out_names), exact, bound,
                          "the int8 bound")
    if case.get("glu_q8"):
        _verify_glu_q8(case, run, read)
    if case.get("rope"):
        _verify_qkv_rope(case, run, read)
    return ratio


def _verify_qkv_rope(case: dict, run: dict, read) -> None:
    """The fused QKV's RoPE and cache write (q4_gemv_int8x_qkv_rope): its rotated q and both caches are
    rope_kv_cache_write's of the plain QKV's (checked) q, k and v, bit for bit; the token's cache row is
    written and no other."""
    from ...checks.unary import POISON

    fused_q, plain_q, fused_k, plain_k, fused_v, plain_v = run["artifacts"][-6:]
    rope = case["rope"]
    poison = np.frombuffer(POISON, np.uint32)[0]
    assert not np.any(np.frombuffer(read(plain_q), np.uint32) == poison), f"{case['name']}: q never rotated"
    for fused, plain, what in ((fused_q, plain_q, "rotated q"), (fused_k, plain_k, "K cache"),
                               (fused_v, plain_v, "V cache")):
        assert read(fused) == read(plain), f"{case['name']}: the fused QKV's {what} differs from rope_kv_cache_write's"
    for name in (fused_k, fused_v):
        rows = np.frombuffer(read(name), np.uint32).reshape(rope["capacity"], -1)
        assert rows[rope["row"]].any() and not np.delete(rows, rope["row"], axis=0).any(), \
            f"{case['name']}: {name} is written at rows {np.flatnonzero(rows.any(axis=1)).tolist()}, not {rope['row']}"


def _verify_glu_q8(case: dict, run: dict, read) -> None:
    """The fused GLU's quantized output (q4_gemv_int8x_glu_q8) is quantize_activations' of the same f32
    output bit for bit, and that one is the twin's quantization of the (checked) f32 output."""
    fused_words, fused_stats, words, stats = run["artifacts"][-4:]
    out = np.frombuffer(read(run["artifacts"][0]), np.float32)
    _verify_int8_activations(*int8_activations_np(out, case["group_size"]), read(words), read(stats), words)
    assert read(fused_words) == read(words), f"{case['name']}: the GLU's int8 words differ from quantize_activations'"
    assert read(fused_stats) == read(stats), f"{case['name']}: the GLU's chunk stats differ from quantize_activations'"


def _within_bound(name: str, data: bytes, exact: np.ndarray, bound: np.ndarray, what: str) -> float:
    """A GPU output (f32 bytes, shaped as exact) against float64 within its bound: none left at the
    poison the checks fill outputs with, none outside (NaN included). Returns the worst error/bound."""
    from ...checks.unary import POISON

    poison = np.frombuffer(POISON, np.uint32)[0]
    words = np.frombuffer(data, np.uint32)
    assert not np.any(words == poison), f"{name}: {int(np.sum(words == poison))} outputs never written"
    err = np.abs(np.frombuffer(data, np.float32).reshape(exact.shape).astype(np.float64) - exact)
    bad = ~(err <= bound)
    assert not bad.any(), (f"{name}: {int(bad.sum())} outside {what}, worst err/bound "
                           f"{float(np.max(err / bound)):.2f} at {np.argwhere(bad)[0].tolist()}")
    return float(np.max(err / bound))


def _verify_q4_embedding(case: dict, seed: int, read) -> None:
    """Bit-exact: each valid row is f32(q * scale) of the twin, read in the case's nibble order;
    out-of-range ids give zeros and status 1; the controls survive the resize to one token."""
    from ...checks.q4_linear import WEIGHT_RANGE

    dim, gs, vocab = case["dim"], case["group_size"], case["vocab"]

    def twin_row(token_id: int) -> np.ndarray:
        levels, scale = q4_levels_np(synth_rows_np(WEIGHT_RANGE, seed, case["stream"], dim, token_id, token_id + 1), gs)
        order = np.arange(dim) ^ 1 if case["nibble_high_first"] else np.arange(dim)
        return (levels[0, order].astype(np.float32) - np.float32(8)) * np.repeat(scale[0], gs).astype(np.float32)

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
            expected = twin_row(token_id)
            assert status[t] == 0, f"{case['name']}: valid id {token_id} flagged"
            assert np.array_equal(out[t].view(np.uint32), expected.view(np.uint32)), \
                f"{case['name']}: row of id {token_id} differs at {np.flatnonzero(out[t] != expected)[:5].tolist()}"
    # A decode step's next input (argmax(embed=), sample(embed=)): the planted maximum chosen, and its row as
    # the lookup's.
    controls = [dim, vocab, gs, int(case["nibble_high_first"]), int(case["scales_transposed"])]
    heads = sorted({run["head"] for run in case["next_inputs"]})
    assert heads == ["argmax", "sample"], f"{case['name']}: next inputs of the heads {heads}, expected argmax and sample"
    for run in case["next_inputs"]:
        where = f"{case['name']} {run['head']} head's next input of a maximum at {run['planted']}"
        assert run["routes"] == [run["head"]] and run["index"] == run["planted"], \
            f"{where}: attested {run['routes']}, chose {run['index']}"
        params = np.frombuffer(bytes(run["params"]), np.uint32).tolist()
        assert params[-len(controls):] == controls, f"{where}: the row's params {params}, expected ... {controls}"
        row = np.frombuffer(read(run["artifact"]), np.float32)
        expected = twin_row(run["planted"])
        assert np.array_equal(row.view(np.uint32), expected.view(np.uint32)), \
            f"{where}: row differs at {np.flatnonzero(row != expected)[:5].tolist()}"
