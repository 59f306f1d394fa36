"""The attention oracle: the KV cache's f16 contents against the inputs' rounding, and every step's
output against float64 attention over the cache the GPU wrote, with a bound derived from the f32
arithmetic; the routes against the guards, restated here so the test checks them, not their code.

Bound per output element (u = 2^-24, gamma_n = n u / (1 - n u)), to first order: each score
s_j = scale q . k_j is within delta_j = gamma_(D + 2) scale sum_d |q_d k_jd| (D products summed in any
order, the scale, and FlashDecoding's scale * log2(e) rounded to f32), which moves each softmax weight
p_j by at most a factor e^(2 max delta); each weight goes through at most n_exp exponentials (its own,
the online rescales of FlashDecoding's steps or the one-pass routes' key tiles, FlashDecoding's
workgroup combine and reduce), each within (3 + 2 |x|) ULP = (3 + 2 |x|) 2u (WGSL's exp and exp2), |x|
at most the score range X (in base 2 for FlashDecoding: X log2(e)), and each rescale's product adds u;
the sums of weights and of weighted values over n = ctx + splits terms add 2 gamma_n, and the division
2.5 ULP = 5u. So |out - exact| <= sum_j p_j |v_j| (2 max delta + n_exp ((3 + 2 X) 2u + u) + 2 gamma_n + 5u).

The f16 subgroup-matrix prefill (half=True) rounds each pre-scaled q to f16 (2^-11 more in delta, whose f32
sums on the tensor cores are taken at 2u an addition), lets its exponentials' arguments reach LAZY above
the row's maximum (X at least LAZY, the variant's), and rounds each probability to f16 for P V: 2^-11 relative, or 2^-25
absolute below f16's normal range, against a sum of probabilities of at least 1: so 2^-11 more in the
relative bound, 2^-25 sum_j |v_j| absolute, and its sums at twice gamma_n.
"""

from __future__ import annotations

import numpy as np

from ...kernels import kernel
from ...ops.attention import (ONE_PASS_SLOTS, flash_splits, one_pass_decode, one_pass_kernel, sgmat_prefill_kernel,
                              subgroup_flash_split, subgroup_flash_step_keys, subgroup_prefill_kernel)
from ...gpu.device import SUBGROUP_MATRIX
from ...ops.subgroup_matrix import SGMAT_F16_CONFIG
from ...ops.tuning import tuning_table
from .elementwise import f16_allowed
from .synth import synth_values_np

__all__ = ["verify_attention_report", "expected_attention_route", "attention_reference"]

U = 2.0 ** -24
F16_U = 2.0 ** -11


def _gamma(n: int) -> float:
    return n * U / (1 - n * U)


def expected_attention_route(case: dict, tokens: int, adapter: dict, pos: int = 0) -> str:
    """Prefill: Q32 where asked for and it fits; with half, the f16 subgroup-matrix route where the device
    has it (its guard), but through the tuning table's short length the subgroup route where it can run;
    the one-pass subgroup route where the device has
    subgroups, D is 64 or 128 (four invocations per query row: every subgroup holds them) and G is at
    most its 32 rows; then the K16 and Q16 routes at exactly Llama's and Qwen3's geometries (the checks
    use the default scale 1/sqrt(D)), the materialized route elsewhere. Decode at `pos` (the step's
    position): the one pass on subgroups where the device has them, D is a multiple of 8 up to 128 and the
    context (pos + 1) is within the tuning table's reach; beyond it FlashDecoding on subgroups
    where the device has them and a variant fits (G 4 or 3 with D <= 64, G 2 with D <= 128; D a multiple of
    8), else FlashDecoding in workgroup memory where a KV head's query heads fit it (G <= 8, D <= 128
    and a multiple of 8, G * D <= 512); the materialized route otherwise, and when forced."""
    limits = adapter["limits"]
    if case["force"]:
        return case["force"]
    geometry = (case["heads"], case["kv_heads"], case["head_dim"])
    if tokens > 1 and case.get("prefill"):
        return case["prefill"]
    subgroup_prefill = ("subgroups" in adapter["device_features"] and case["head_dim"] in (64, 128)
                        and case["heads"] // case["kv_heads"] <= 32)
    if tokens > 1 and case.get("half") and _sgmat_prefill_able(case, adapter):
        # (through the tuning table's length the subgroup prefill, unless a variant is pinned)
        short = tuning_table(adapter["info"]).short_prefill_attention(case["head_dim"])
        if tokens <= short and subgroup_prefill and not case.get("prefill_kernel") and case.get("short_prompts", True):
            return "sdpa_prefill_subgroup"
        return "sdpa_prefill_sgmat_f16"
    if tokens > 1:
        # Q32 when asked for and the device has its kernel's workgroup memory and 256 invocations
        q32 = (case.get("q32") and geometry == (16, 8, 128)
               and limits.get("maxComputeWorkgroupStorageSize", 0) >= kernel("sdpa_q32").workgroup_bytes
               and limits.get("maxComputeInvocationsPerWorkgroup", 0) >= 256)
        if q32:
            return "sdpa_q32"
        if subgroup_prefill:
            return "sdpa_prefill_subgroup"
        return {(32, 8, 64): "sdpa_k16", (16, 8, 128): "sdpa_q16"}.get(geometry, "sdpa_materialized")
    group = case["heads"] // case["kv_heads"]
    subgroups = "subgroups" in adapter["device_features"]
    # the one pass up to its reach (the context here: position + 1 of the decode step), any G
    one_pass = one_pass_decode(case["head_dim"], adapter["info"])     # (None: no variant, or not on this adapter)
    if tokens == 1 and subgroups and one_pass and pos + 1 <= one_pass[1]:
        return "sdpa_decode_subgroup"
    subgroup_fits = subgroups and case["head_dim"] % 8 == 0 and \
        case["head_dim"] <= {4: 64, 3: 64, 2: 128}.get(group, 0)
    if tokens == 1 and subgroup_fits:
        return "sdpa_flash_subgroup"
    fits = group <= 8 and case["head_dim"] <= 128 and case["head_dim"] % 8 == 0 and group * case["head_dim"] <= 512
    return "sdpa_flash_decode" if tokens == 1 and fits else "sdpa_materialized"


def _pinned(name: str | None, prefix: str) -> str | None:
    """A pinned prefill variant where it is of this route's family (sdpa() gives each route its own)."""
    return name if name is not None and name.startswith(prefix) else None


def _sgmat_prefill_able(case: dict, adapter: dict) -> bool:
    """The f16 subgroup-matrix prefill's guard: shader-f16 and the f16 x f16 -> f32 16x16x16 config (with the
    subgroup-matrix feature), its spelling's probe compiled, subgroups exactly 32 wide, a variant for D (64
    or 128), G at most its rows (the tables' variant's, or a pinned one's), its workgroup memory within the
    device's."""
    info = adapter["info"]
    configs = info.get("subgroupMatrixConfigs", []) if SUBGROUP_MATRIX in adapter["device_features"] else []
    if not ("shader-f16" in adapter["device_features"] and SGMAT_F16_CONFIG in configs
            and adapter.get("probes", {}).get("subgroup_matrix_f16") == "ok"
            and (info.get("subgroupMinSize"), info.get("subgroupMaxSize")) == (32, 32)):
        return False
    name = _pinned(case.get("prefill_kernel"), "sdpa_prefill_sgmat_") or sgmat_prefill_kernel(case["head_dim"], info)
    if name is None:
        return False
    spec = kernel(name)
    rows = 16 * spec.template_values["FM"] * spec.template_values["SG"]
    return (spec.template_values["D"] == case["head_dim"] and case["heads"] // case["kv_heads"] <= rows
            and spec.workgroup_bytes <= adapter["limits"].get("maxComputeWorkgroupStorageSize", 16384))


def attention_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, pos: int, scale: float, route: str,
                        adapter_info: dict, flash_split: tuple[str, int] | None = None,
                        prefill_kernel: str | None = None, decode_kernel: str | None = None):
    """float64 attention of q [T, H, D] over k, v [>= pos + T, Hkv, D] (causal from pos), and its bound;
    `flash_split`, `prefill_kernel` and `decode_kernel` as sdpa() took them (a subgroup split pass and its
    workgroups, a subgroup prefill variant, a one-pass decode variant, instead of the table's)."""
    tokens, heads, dim = q.shape
    kv_heads = k.shape[1]
    group = heads // kv_heads
    exact = np.empty((tokens, heads, dim))
    bound = np.empty((tokens, heads, dim))
    q64 = q.astype(np.float64)
    for t in range(tokens):
        ctx = pos + t + 1
        keys = np.repeat(k[:ctx].astype(np.float64), group, axis=1)         # [ctx, H, D]
        values = np.repeat(v[:ctx].astype(np.float64), group, axis=1)
        scores = np.einsum("hd,jhd->hj", q64[t], keys) * scale
        sgmat = route == "sdpa_prefill_sgmat_f16"      # q and p rounded to f16, sums on the tensor cores at 2u
        delta = ((F16_U + 2 * _gamma(dim + 2)) if sgmat else _gamma(dim + 2)) * scale * \
            np.einsum("hd,jhd->hj", np.abs(q64[t]), np.abs(keys)).max(axis=1)
        x = scores - scores.max(axis=1, keepdims=True)
        weights = np.exp(x)
        weights /= weights.sum(axis=1, keepdims=True)
        exact[t] = np.einsum("hj,jhd->hd", weights, values)
        # (the split and step counts only set how many terms the bound counts: taken from the op, not judged)
        spread = -x.min(axis=1) + 2 * delta                                  # the largest |exp argument|
        if route == "sdpa_decode_subgroup":                               # one rescale per step of every slot
            variant = kernel(decode_kernel or one_pass_kernel(dim, adapter_info, False))
            slots = variant.invocations // ONE_PASS_SLOTS
            steps = -(-ctx // (slots * variant.template_values["U"]))
            splits, n_exp, spread = slots, steps + 2, spread / np.log(2)      # the slots' sums meet at the end
        elif route == "sdpa_flash_subgroup":
            name, workgroups = flash_split or subgroup_flash_split(group, dim, adapter_info)
            splits, _, steps = flash_splits(ctx, kv_heads, subgroup_flash_step_keys(kernel(name)), workgroups)
            n_exp, spread = steps + 2, spread / np.log(2)
        elif route == "sdpa_prefill_subgroup":                              # one rescale per step of U keys
            variant = kernel(_pinned(prefill_kernel, "sdpa_prefill_sg_")
                             or subgroup_prefill_kernel(dim, adapter_info)).template_values
            steps = -(-ctx // variant["U"])                                  # (over all KS slots: an overcount)
            splits, n_exp, spread = variant["KS"], steps + 2, spread / np.log(2)
        elif route == "sdpa_prefill_sgmat_f16":                           # one rescale per tile of KT keys at most
            variant = kernel(_pinned(prefill_kernel, "sdpa_prefill_sgmat_")
                             or sgmat_prefill_kernel(dim, adapter_info)).template_values
            splits, n_exp = 2, -(-ctx // variant["KT"]) + 2
            spread = np.maximum(spread / np.log(2), variant["LAZY"])    # (its arguments reach LAZY above m)
        elif route == "sdpa_flash_decode":
            splits, _, tiles = flash_splits(ctx, kv_heads)                   # its 32-key tiles, one rescale each
            n_exp, spread = tiles + 2, spread / np.log(2)
        else:
            splits, tile = 1, 16 if route in ("sdpa_k16", "sdpa_q16", "sdpa_q32") else 32
            n_exp = -(-ctx // tile) + 2
        sums = (4 if sgmat else 2) * _gamma(ctx + splits)
        relative = 2 * delta + n_exp * ((3 + 2 * spread) * 2 * U + U) + sums + 5 * U + (F16_U if sgmat else 0.0)
        bound[t] = np.einsum("hj,jhd->hd", weights, np.abs(values)) * relative[:, None]
        if sgmat:               # probabilities below f16's normal range: half its subnormal spacing each
            bound[t] += 2.0 ** -25 * np.abs(values).sum(axis=0)
    return exact, bound


def _cache_values(case: dict, seed: int, value_range) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(k, v) f32 per position as the steps wrote them, and the steps' q: [T, H, D] then [1, H, D]."""
    from ...checks.attention import streams

    index, pos, tokens = case["index"], case["pos"], case["tokens"]
    heads, kv_heads, dim = case["heads"], case["kv_heads"], case["head_dim"]
    row = kv_heads * dim
    k, v = np.empty((case["capacity"], kv_heads, dim), np.float32), np.empty((case["capacity"], kv_heads, dim), np.float32)
    if pos:
        k[:pos] = synth_values_np(value_range, seed, streams(index, "history_k", 0), pos * row).reshape(pos, kv_heads, dim)
        v[:pos] = synth_values_np(value_range, seed, streams(index, "history_v", 0), pos * row).reshape(pos, kv_heads, dim)
    qs = []
    for step, (first, count) in enumerate(((pos, tokens), (pos + tokens, 1))):
        for target, role in ((k, "k"), (v, "v")):
            values = synth_values_np(value_range, seed, streams(index, role, step), tokens * row)
            target[first:first + count] = values[:count * row].reshape(count, kv_heads, dim)
        q = synth_values_np(value_range, seed, streams(index, "q", step), tokens * heads * dim)
        qs.append(q[:count * heads * dim].reshape(count, heads, dim))
    return k, v, qs[0], qs[1]


def _check_cache(name: str, stored: bytes, written: np.ndarray) -> np.ndarray:
    """The cache's f16 values where the steps wrote them: each exactly the f32 input or one of its two
    f16 neighbours (pack2x16float's allowance; a subnormal may flush). Returns them as float64."""
    halves = np.frombuffer(stored, np.uint16)[:written.size].view(np.float16).astype(np.float64)
    lo, hi, may_flush = f16_allowed(written.reshape(-1).astype(np.float64))
    ok = (halves == lo) | (halves == hi) | (may_flush & (halves == 0))
    bad = np.flatnonzero(~ok)
    assert not bad.size, (f"{name}: {bad.size} cache values are not an f16 rounding of their input, first at "
                          f"{bad[0]}: {halves[bad[0]]!r} for {written.reshape(-1)[bad[0]]!r}")
    return halves.reshape(written.shape)


def _check_rotated(case: dict, steps: list, k: np.ndarray, read) -> tuple[np.ndarray, list]:
    """A rope case: each step's rotated q (read back) and cached keys against float64 RoPE, the keys
    within RoPE's bound plus one f16 spacing (pack2x16float rounds either way), the history before the
    prefill an f16 rounding of its input. Returns the cache's keys and the steps with the GPU's rotated
    q (checked here), which the attention read."""
    from .decoder_blocks import rope_cos_sin_reference, rope_reference

    name = case["name"]
    stored = np.frombuffer(read(case["cache_artifacts"][0]), np.uint16)[:k.size].view(np.float16)
    k16 = stored.astype(np.float64).reshape(k.shape)
    if case["pos"]:
        _check_cache(f"{name} k history", stored[:k[:case["pos"]].size].tobytes(), k[:case["pos"]])
    rotated_steps = []
    for step, q in steps:
        first, count = step["pos"], step["tokens"]
        positions = np.arange(first, first + count)
        cos, sin = rope_cos_sin_reference(case["head_dim"], case["rope_theta"], case["llama3_scaling"], positions)
        q_exact, q_bound = rope_reference(q, cos, sin, case["rope_layout"], positions)
        q_rot = np.frombuffer(read(step["q_rot_artifact"]), np.float32).reshape(q.shape).astype(np.float64)
        assert np.all(np.abs(q_rot - q_exact) <= q_bound), f"{name}: rotated q off float64 RoPE at {first}"
        k_exact, k_bound = rope_reference(k[first:first + count], cos, sin, case["rope_layout"], positions)
        spacing = np.spacing((np.abs(k_exact) + k_bound).astype(np.float16)).astype(np.float64)
        bad = np.argwhere(~(np.abs(k16[first:first + count] - k_exact) <= k_bound + spacing))
        assert not bad.size, f"{name}: {len(bad)} cached keys off float64 RoPE, first at {bad[0].tolist()}"
        rotated_steps.append((step, q_rot))
    return k16, rotated_steps


def _check_spelling(case: dict, adapter: dict) -> bool:
    """Whether the case's cache was spelled in shader-f16 (asked for, and the device has the feature); if so
    every subgroup pass (a `_sg_` kernel) ran its kvf16_ spelling (all of this suite's have one), else none did
    and the cache says why it was refused."""
    spelled = bool(case.get("kv_f16")) and "shader-f16" in adapter["device_features"]
    for name in case["kernels"]:
        if "_sg_" in name:
            assert name.startswith("kvf16_") == spelled, (f"{case['name']}: ran {name} with the cache "
                                                          f"{'in shader-f16 types' if spelled else 'packed'}")
    assert bool(case.get("kv_f16_refused")) == (bool(case.get("kv_f16")) and not spelled), \
        f"{case['name']}: kv_f16 {case.get('kv_f16')}, refused {case.get('kv_f16_refused')!r}"
    return spelled


def verify_attention_report(report: dict, read) -> dict:
    """Every case's cache and every step's output and routes; returns worst error/bound per case."""
    from ...checks.attention import QKV_RANGE

    seed, worst = report["seed"], {}
    for case in report["cases"]:
        name = case["name"]
        k, v, q_prefill, q_decode = _cache_values(case, seed, QKV_RANGE)
        steps = list(zip(case["steps"], (q_prefill, q_decode)))
        if case.get("rope"):
            k16, steps = _check_rotated(case, steps, k, read)
        else:
            k16 = _check_cache(f"{name} k", read(case["cache_artifacts"][0]), k)
        v16 = _check_cache(f"{name} v", read(case["cache_artifacts"][1]), v)
        write_route = "rope_kv_cache_write" if case.get("rope") else "kv_cache_write"
        spelled = _check_spelling(case, report["adapter"])
        ratios = []
        for step, q in steps:
            route = expected_attention_route(case, step["tokens"], report["adapter"], step["pos"])
            expected = [write_route, *(["kv_f16"] if spelled else []), route]
            assert step["routes"] == expected, (f"{name} at {step['tokens']} tokens from {step['pos']}: ran "
                                                f"{step['routes']}, expected {expected}")
            assert step["attention_conflicts"] == 0, f"{name}: conflicting attention routes {step['routes']}"
            got = np.frombuffer(read(step["artifact"]), np.float32).reshape(q.shape).astype(np.float64)
            exact, bound = attention_reference(q, k16, v16, step["pos"], case["scale"], route,
                                               report["adapter"]["info"], prefill_kernel=case.get("prefill_kernel"))
            error = np.abs(got - exact)
            over = np.argwhere(~(error <= bound))
            assert not over.size, (f"{name} step at {step['tokens']} tokens from {step['pos']} ({route}): "
                                   f"{len(over)} outputs over the bound, first [t, h, d] = {over[0].tolist()}: "
                                   f"{got[tuple(over[0])]!r} vs {exact[tuple(over[0])]!r} (bound "
                                   f"{bound[tuple(over[0])]:.3g})")
            ratios.append(float((error / np.maximum(bound, np.finfo(float).tiny)).max()))
        worst[name] = max(ratios)
    return worst
