"""float64 references and bounds for RMSNorm, RoPE, SwiGLU, residual, embedding and argmax."""

from __future__ import annotations

import numpy as np

from .synth import synth_values_np


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
    # The kernel reads cos and sin from a table whose entries are within 4u of exact, absolutely
    # (ops/rope.py: built on the GPU by the angle addition formulas; a host-made table is closer still),
    # multiplies (u each) and adds (u; an FMA only removes a rounding): for the pair (a, b),
    # |out - exact| <= 4u (|a| + |b|) + 2u (|a cos| + |b sin|) + O(u^2), at any position. On top, the
    # table (Python's math) and this reference (numpy) evaluate the angle in float64 separately, and may
    # differ by a few float64 ULPs of position * f <= position: (|a| + |b|) (position + 1) 2^-48.
    x = src.astype(np.float64)
    half = x.shape[-1] // 2
    if layout == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]
    else:
        a, b = x[..., :half], x[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]
    first, second = a * c - b * s, a * s + b * c
    slack = (np.abs(a) + np.abs(b)) * 2.0 ** -48 * (positions.astype(np.float64)[:, None, None] + 1)
    table = 4.001 * _U * (np.abs(a) + np.abs(b))
    bound = table + 2.001 * _U * (np.abs(a * c) + np.abs(b * s)) + slack
    bound_second = table + 2.001 * _U * (np.abs(a * s) + np.abs(b * c)) + slack
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
    from ...checks.decoder_blocks import (ARGMAX_POS, ARGMAX_RANGE, ARGMAX_SIZES, ARGMAX_STREAM, DEFAULT_LENGTHS,
                                         MODELS, POISON, POISON_WORD, RANGES, ROPE_POSITIONS, STREAMS, argmax_cases,
                                         step_ids, steps_for)
    from ...ops.norm import rms_norm_kernel

    seed = report["seed"]
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
        assert kernels["rms_norm"] == rms_norm_kernel(d, subgroup=False)[0]
        if subgroups:
            assert kernels["rms_norm_subgroup"] == rms_norm_kernel(d, subgroup=True)[0], kernels
        wg_head = rms_norm_kernel(hd, subgroup=False)[1]
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
            # The reduce's token-history store (token_history's work): one slot, the offset advanced by one.
            at = 1 + ARGMAX_POS + case["offset_before"]
            assert case["offset_after"] == case["offset_before"] + 1, f"{where}: offset {case['offset_after']}"
            assert case["history"][at] == expected, f"{where}: history[{at}] = {case['history'][at]}, not {expected}"
            assert [w for i, w in enumerate(case["history"]) if i != at] == [POISON_WORD] * (len(case["history"]) - 1), \
                f"{where}: history written outside slot {at}: {case['history']}"
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
