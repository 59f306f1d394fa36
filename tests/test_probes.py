"""The benchmarks' ceilings without a GPU: the arithmetic probes' op counts and guards, the direct GEMM's
shape checks and sizing (their GPU runs are in `bench kernels --preset prefill`, the direct GEMM checked
against an exact product before it is timed)."""

from __future__ import annotations

import pytest

from py_runtime.kernels import kernel
from py_runtime.ops.probe import arith_probe, direct_gemm, probe_unavailable
from py_runtime.tensors import Tensor

from .test_routes import ADAPTERS


def t(name, numel, dtype="u32"):
    return Tensor(name, (numel,), dtype, 0)


def _sized(op):
    return op.call.sizing(kernel(op.call.kernel), {})


def test_the_matrix_probes_count_a_product_per_subgroup_of_32_and_the_others_per_invocation():
    sink = t("sink", 4096)
    i8 = _sized(arith_probe(kind="sgmat_i8", sink=sink, workgroups=10, iters=3))
    # 64 invocations: 2 subgroups, each 3 iterations of 4 steps of 4 chains, a 16 x 16 x 32 product each
    assert i8.flops == 10 * 2 * 3 * 16 * (2 * 16 * 16 * 32)
    assert _sized(arith_probe(kind="sgmat_f16", sink=sink, workgroups=10, iters=3)).flops == 10 * 2 * 3 * 16 * 8192
    assert _sized(arith_probe(kind="dp4a", sink=sink, workgroups=10, iters=3)).flops == 10 * 256 * 3 * 32 * 8


def test_the_matrix_probes_run_only_where_the_subgroup_matrix_gemms_could():
    assert probe_unavailable("dp4a", ADAPTERS["swiftshader"]) is None
    assert "int8 subgroup-matrix config" in probe_unavailable("sgmat_i8", ADAPTERS["swiftshader"])
    assert probe_unavailable("sgmat_i8", ADAPTERS["h200-chromium-sgmat"]) is None
    assert "shader-f16" in probe_unavailable("sgmat_f16", ADAPTERS["h200-chromium-sgmat"])
    assert probe_unavailable("sgmat_f16", ADAPTERS["h200-chromium-f16"]) is None


def test_direct_gemm_sizes_a_workgroup_per_64_x_64_tile():
    m, n, k = 128, 3072, 2048
    sized = _sized(direct_gemm(kind="f16", x=t("x", m * k // 2), w=t("w", n * k // 2), out=t("out", m * n, "f32"),
                               m=m, n=n, k=k))
    assert sized.workgroups == (n // 64, m // 64, 1)
    assert sized.flops == 2 * m * n * k and sized.bytes_moved == (m + n) * k * 2 + m * n * 4


@pytest.mark.parametrize("m,n,k,x_words,problem", [
    (100, 64, 64, 100 * 16, "M 100 is not a multiple of 64"),
    (64, 64, 48, 64 * 12, "K 48 is not a multiple of 32"),
    (64, 128, 64, 64 * 16, "w holds 4096 bytes, not the 8192 of w [128][64]"),
    (64, 64, 64, 8, "x holds 32 bytes, not the 4096 of x [64][64]"),
])
def test_direct_gemm_refuses_shapes_off_its_tiles_and_tensors_too_small(m, n, k, x_words, problem):
    with pytest.raises(ValueError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        direct_gemm(kind="i8", x=t("x", x_words), w=t("w", 64 * 16), out=t("out", m * n, "f32"), m=m, n=n, k=k)


def test_direct_gemm_names_its_kinds():
    with pytest.raises(ValueError, match="unknown kind 'i4'; kinds: \\['f16', 'i8'\\]"):
        direct_gemm(kind="i4", x=t("x", 16), w=t("w", 16), out=t("out", 16), m=64, n=64, k=64)
