"""Host weights into a Q4Weight (q4_weight_from_host) and one op run through run_op, natively: the
uploaded weight gives the float64 reference's outputs, and wrong sizes or layouts are refused before
anything is allocated."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from py_runtime.host.oracle.q4 import q4_levels_np, q4_pack_np
from py_runtime.oneshot import run_op, tensor
from py_runtime.ops.q4 import Q4Weight, q4_weight_from_host
from py_runtime.ops.int8_activations import Int8Activations, quantize_activations
from py_runtime.ops.q4_linear import gemv_shapes, q4_linear
from py_runtime.runtime import Runtime
from py_runtime.tensors import Tensor

K, N, GS = 256, 96, 64
U = 2.0 ** -24


def _weights(rng):
    levels, scale = q4_levels_np(rng.uniform(-1 / 32, 1 / 32, (N, K)).astype(np.float32), GS)
    packed = q4_pack_np(levels)                                           # u32 [N, K/8]
    return levels, scale, packed


def test_uploaded_weight_matches_the_float64_reference_at_decode_and_prefill():
    rng = np.random.default_rng(3)
    levels, scale, packed = _weights(rng)
    x = rng.uniform(-1, 1, (5, K)).astype(np.float32)
    dequant = (levels.astype(np.float64) - 8) * np.repeat(scale.astype(np.float64), GS, axis=1)     # [N, K]
    exact = x.astype(np.float64) @ dequant.T
    # (K + 4) u sum |x (n + 8) s|: sequential f32 sums and the nibble and scale products (host/oracle/q4.py)
    bound = (K + 4) * U / (1 - (K + 4) * U) * (np.abs(x.astype(np.float64)) @ (
        (levels.astype(np.float64) + 8) * np.repeat(scale.astype(np.float64), GS, axis=1)).T)

    async def main():
        runtime = await Runtime.create("native")
        weight = await q4_weight_from_host(runtime, "w", k=K, n=N, group_size=GS, packed=packed.tobytes(),
                                           scales=np.ascontiguousarray(scale.T).tobytes(), scales_shape=(K // GS, N))
        xs = await tensor(runtime, "x", (5, K), data=x.tobytes())
        out = await tensor(runtime, "out", (5, N))
        op = q4_linear(x=xs, weight=weight, out=out, adapter=runtime.device.adapter)
        results = {}
        for tokens in (1, 5):
            got = await run_op(runtime, op, read=[out], tokens=tokens)
            results[tokens] = np.frombuffer(got["out"], np.float32).reshape(5, N)[:tokens]
        return op, results

    op, results = asyncio.run(main())
    for tokens, got in results.items():
        assert np.all(np.abs(got - exact[:tokens]) <= bound[:tokens]), f"tokens {tokens}"
    assert "decode" in op.explain() and "prefill" in op.explain()


def test_wrong_sizes_and_layouts_are_refused_naming_the_problem():
    rng = np.random.default_rng(4)
    _, scale, packed = _weights(rng)

    async def attempt(**changes):
        fields = dict(k=K, n=N, group_size=GS, packed=packed.tobytes(), scales=scale.T.tobytes(),
                      scales_shape=(K // GS, N))
        runtime = await Runtime.create("native")
        with pytest.raises(ValueError) as error:
            await q4_weight_from_host(runtime, "w", **{**fields, **changes})
        assert "w.packed" not in runtime.tensors          # refused before anything was allocated
        return str(error.value)

    assert "laid out [N, K/gs] = [96, 4]; the linear layout is [K/gs, N] = [4, 96]" in \
        asyncio.run(attempt(scales_shape=(N, K // GS)))
    assert "packed holds 100 bytes; [96, 128] needs 12288" in asyncio.run(attempt(packed=bytes(100)))
    assert "K 250 must be a multiple of 8 and of the group size 64" in asyncio.run(attempt(k=250))


def test_q4weight_refuses_tensors_declared_in_the_other_layout():
    packed = Tensor("p", (N, K // 8), "u32", 0)
    with pytest.raises(ValueError, match=r"is laid out \[96, 4\] \(row-major: that is scales_rows' layout\); "
                                         r"the linear scales must be \[4, 96\]"):
        Q4Weight(packed, Tensor("s", (N, K // GS), "f32", 0), K, N, GS)
    with pytest.raises(ValueError, match=r"the row-major scale copy must be \[96, 4\]"):
        Q4Weight(packed, Tensor("s", (K // GS, N), "f32", 0), K, N, GS, scales_rows=Tensor("r", (K // GS, N), "f32", 0))
    with pytest.raises(ValueError, match=r"packed .* has shape \[96, 16\]; packed words must be \[96, 32\]"):
        Q4Weight(Tensor("p", (N, K // 16), "u32", 0), Tensor("s", (K // GS, N), "f32", 0), K, N, GS)
    Q4Weight(packed, Tensor("s", (K // GS * N,), "f32", 0), K, N, GS)      # flat tensors are taken as laid out


def test_accumulate_adds_the_product_to_what_out_holds_on_every_route():
    """out += x @ W.T (the residual add folded into a linear) on each route: bit for bit the float32 sum of
    what out held and the same route's plain product (its store adds one term; the product is the
    route's own, which the oracle suites judge)."""
    rng = np.random.default_rng(5)
    levels, scale, packed = _weights(rng)
    x = rng.uniform(-1, 1, (5, K)).astype(np.float32)
    residual = rng.uniform(-4, 4, (5, N)).astype(np.float32)
    # (route, tokens, pinned variant): every int8x GEMV shape, whose store paths differ (a warp per row,
    # K split over warps, a workgroup tree) and read the residual early
    routes = [("q4_gemv_workgroup", 1, None), ("q4_gemm_tiled", 5, None), ("q4_linear_generic", 3, None),
              ("q4_gemm_dp4a", 5, None)] + [("q4_gemv_int8x", 1, shape) for shape in gemv_shapes("int8x")]

    async def main():
        runtime = await Runtime.create("native")
        adapter = runtime.device.adapter
        weight = await q4_weight_from_host(runtime, "w", k=K, n=N, group_size=GS, packed=packed.tobytes(),
                                           scales=np.ascontiguousarray(scale.T).tobytes(), scales_shape=(K // GS, N))
        xs = await tensor(runtime, "x", (5, K), data=x.tobytes())
        act = await Int8Activations.allocate(runtime, xs, GS, rows=5)
        out = await tensor(runtime, "out", (5, N))
        results = {}
        for route, tokens, shape in routes:
            int8 = act if route in ("q4_gemv_int8x", "q4_gemm_dp4a") else False
            producer = [quantize_activations(act)] if int8 else []
            runs = []
            for accumulate in (False, True):
                runtime.device.write_buffer(out.buffer, residual.tobytes())
                op = q4_linear(x=xs, weight=weight, out=out, adapter=adapter, int8=int8, force=route,
                               accumulate=accumulate, gemv_shape=shape)
                got = await run_op(runtime, *producer, op, read=[out], tokens=tokens)
                runs.append(np.frombuffer(got["out"], np.float32).reshape(5, N)[:tokens])
            results[route, shape] = runs
        with pytest.raises(ValueError, match="needs out and x in different buffers"):
            q4_linear(x=out, weight=await q4_weight_from_host(runtime, "sq", k=N, n=N, group_size=32,
                                                              packed=bytes(N * N // 2), scales=bytes(4 * N * 3),
                                                              scales_shape=(N // 32, N)),
                      out=out, adapter=adapter, accumulate=True)
        return results

    for route, (plain, added) in asyncio.run(main()).items():
        tokens = plain.shape[0]
        assert not np.array_equal(plain, residual[:tokens]), route
        assert np.array_equal(added, residual[:tokens] + plain), route
