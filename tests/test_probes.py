"""The benchmarks' yardsticks without a GPU: the arithmetic probes' op counts and guards (their GPU runs
are in `bench kernels --preset prefill`, where the matrix kinds run only on a device with subgroup
matrices), and the regions the decode step's floor reads (`bench model`)."""

from __future__ import annotations

from py_runtime.checks.kernel_bench import _chain_ranges
from py_runtime.kernels import kernel
from py_runtime.ops.probe import arith_probe, probe_for, probe_unavailable
from py_runtime.tensors import Tensor

from .test_routes import ADAPTERS


def _flops(kind: str, workgroups: int, iters: int) -> int:
    op = arith_probe(kind=kind, sink=Tensor("sink", (4096,), "u32", 0), workgroups=workgroups, iters=iters)
    return op.call.sizing(kernel(op.call.kernel), {}).flops


def test_the_matrix_probes_count_a_product_per_subgroup_of_32_and_the_others_per_invocation():
    # 64 invocations: 2 subgroups, each 3 iterations of 4 steps of 4 chains, a 16 x 16 x K product each
    assert _flops("sgmat_i8", 10, 3) == 10 * 2 * 3 * 16 * (2 * 16 * 16 * 32)
    assert _flops("sgmat_f16", 10, 3) == 10 * 2 * 3 * 16 * (2 * 16 * 16 * 16)
    # 256 invocations, each 3 iterations of 4 steps of 8 chains: 8 ops a dot4I8Packed, 2 an fma
    assert _flops("dp4a", 10, 3) == 10 * 256 * 3 * 32 * 8
    assert _flops("fma", 10, 3) == 10 * 256 * 3 * 32 * 2


def test_the_matrix_probes_run_only_where_the_subgroup_matrix_gemms_could():
    assert probe_unavailable("dp4a", ADAPTERS["swiftshader"]) is None
    assert "int8 subgroup-matrix config" in probe_unavailable("sgmat_i8", ADAPTERS["swiftshader"])
    assert probe_unavailable("sgmat_i8", ADAPTERS["h200-chromium-sgmat"]) is None
    assert "shader-f16" in probe_unavailable("sgmat_f16", ADAPTERS["h200-chromium-sgmat"])
    assert probe_unavailable("sgmat_f16", ADAPTERS["h200-chromium-f16"]) is None


def test_each_gemm_route_is_measured_against_its_instructions_probe_or_the_nearest_that_ran():
    everything = {"dp4a", "fma", "sgmat_i8", "sgmat_f16"}
    assert [probe_for(route, everything) for route in ("q4_gemm_dp4a", "q4_gemm_sgmat_i8", "q4_gemm_sgmat_f16",
                                                       "q4_gemm_bk64")] == ["dp4a", "sgmat_i8", "sgmat_f16", "fma"]
    # without the matrix probes (the device ran the GEMMs forced, or a report from before them)
    assert [probe_for(route, {"dp4a", "fma"}) for route in ("q4_gemm_sgmat_i8", "q4_gemm_sgmat_f16")] == ["dp4a", "fma"]


def test_the_step_floor_reads_consecutive_regions_and_wraps_at_the_pool_end():
    assert _chain_ranges([16, 32, 48], 1024) == [(0, 16), (16, 32), (48, 48)]
    # a read that would pass the end starts over; one larger than the pool reads all of it
    assert _chain_ranges([512, 512, 256, 2048], 1024) == [(0, 512), (512, 512), (0, 256), (0, 1024)]


def test_the_rope_qkv_bench_times_each_variant_on_its_route_and_the_qwen_cases_hold_whole_heads():
    """`bench kernels --preset qkv_rope` natively (lavapipe: times meaningless, routes and kernels real):
    each pinned case runs the fused RoPE QKV with its norm prologue in that very variant, chain included;
    Qwen3's (q/k norm: whole heads of 128) lists only the variants that hold them."""
    import asyncio

    from py_runtime.app import run
    from py_runtime.checks.kernel_bench import BENCH_PRESETS

    qwen = {c.gemv_shape for c in BENCH_PRESETS["qkv_rope"] if c.name == "qwen.qkv_rope"}
    assert qwen == {"r16u1w8", "r4u1w32"}

    async def sink(name, data):
        pass

    only = ["llama.qkv_rope[r1u1w16]", "llama.qkv_rope[r2u1w32]", "qwen.qkv_rope[r4u1w32]"]
    report = asyncio.run(run("native", {"suite": "kernel_bench", "preset": "qkv_rope", "only": only,
                                        "trials": 1, "repeats": 2, "chain_bytes": 8 << 20}, sink))
    rows = {row["case"]: row for row in report["rows"]}
    assert sorted(rows) == sorted(only)
    kernel_run = rows["llama.qkv_rope[r1u1w16]"]["kernel"]
    assert kernel_run.startswith("q4gsw_gemv_i8x_qkv_rope_half_norm_sr_") and kernel_run.endswith("_r1u1w16")
    assert rows["qwen.qkv_rope[r4u1w32]"]["route"] == "q4_gemv_int8x_qkv_rope_qknorm_norm"
    assert all(row["ns"] > 0 and row["chain_ns"] > 0 for row in rows.values())
