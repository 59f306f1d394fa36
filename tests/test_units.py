"""Small pure functions: grid geometry, timestamp arithmetic, the synthetic twin, tolerances."""

from __future__ import annotations

import numpy as np
import pytest

from py_runtime.host.oracle import synth_hash_np
from py_runtime.ops.grid import linear_grid
from py_runtime.ops.synth import UniformRange, synth_hash
from py_runtime.profiling import dispatch_durations, looks_quantized
from py_runtime.checks.unary import ulp32


@pytest.mark.parametrize("length,expected", [(1, (1, 1, 1)), (256, (1, 1, 1)), (257, (2, 1, 1)),
                                             (65535 * 256, (65535, 1, 1)), (65535 * 256 + 1, (65535, 2, 1))])
def test_linear_grid(length, expected):
    assert linear_grid(length, 256, 65535) == expected


def test_linear_grid_refuses_what_two_dimensions_cannot_hold():
    with pytest.raises(ValueError, match="2-D grid limit"):
        linear_grid(10 ** 6, 1, 100)


def test_durations_clip_overlapping_begins_to_the_previous_end():
    assert dispatch_durations([100, 150, 140, 200, 300, 310]) == [50, 50, 10]


@pytest.mark.parametrize("stamps,expected", [
    ([0, 65536, 131072, 196608], True), ([1000, 1817, 2333, 9001], False), ([5, 5], None)])
def test_quantization_detection(stamps, expected):
    assert looks_quantized(stamps) is expected


def test_python_and_numpy_twins_agree():
    index = np.array([0, 1, 2, 12345, 2 ** 31, 2 ** 32 - 1], np.uint64)
    for seed, stream in [(0, 0), (2024, 7), (2 ** 32 - 1, 123456)]:
        expected = [synth_hash(seed, stream, int(i)) for i in index]
        assert synth_hash_np(seed, stream, index.astype(np.uint32)).tolist() == expected


def test_hash_is_a_bijection_on_a_window():
    values = synth_hash_np(5, 9, np.arange(1 << 20, dtype=np.uint32))
    assert np.unique(values).size == 1 << 20


@pytest.mark.parametrize("scale_log2,offset", [(-20, 0.1), (-20, 17.0), (-3, 2.0 ** -20)])
def test_ranges_that_would_round_are_refused(scale_log2, offset):
    with pytest.raises(ValueError):
        UniformRange(scale_log2=scale_log2, offset=offset)


def test_ulp32_matches_numpy_spacing():
    for v in [1.0, 1.5, 2.0, 1e-3, 3e4, 0.9999999]:
        assert ulp32(v) == float(np.spacing(np.float32(v))) or ulp32(v) * 2 == float(np.spacing(np.float32(v)))


def test_row_major_scales_are_refused_by_every_route_but_the_int8_rs_gemv():
    """Only the SROW int8 GEMV variants read scales [N, K/gs]; every other route would misread them,
    so q4_linear refuses rather than record a silent wrong answer (and refuses prefill row counts)."""
    import pytest

    from py_runtime.gpu.device import AdapterReport
    from py_runtime.ops.q4 import Q4Weight, q4_linear
    from py_runtime.tensors import Tensor

    k, n = 256, 64
    adapter = AdapterReport(backend="native", info={}, features=(), device_features=(),
                            limits={"maxComputeInvocationsPerWorkgroup": 256, "maxComputeWorkgroupStorageSize": 32768})
    weight = Q4Weight(Tensor("w", (n * k // 8,), "u32", 0), Tensor("s", (k // 64 * n,), "f32", 0), k, n, 64,
                      scales_row_major=True)
    x, out = Tensor("x", (4, k), "f32", 0), Tensor("out", (4, n), "f32", 0)
    with pytest.raises(ValueError, match="row-major scales"):
        q4_linear(x=x, weight=weight, out=out, adapter=adapter, rows=1)
    with pytest.raises(ValueError, match="row-major scales"):
        q4_linear(x=x, weight=weight, out=out, adapter=adapter, rows=1, int8=True, gemv_shape="i8r4g64")
    with pytest.raises(ValueError, match="only the int8 decode GEMV"):
        q4_linear(x=x, weight=weight, out=out, adapter=adapter, rows=1, int8=True, gemv_shape="i8r4g64rs",
                  force_route="q4_gemm_tiled")
    (decode,) = q4_linear(x=x, weight=weight, out=out, adapter=adapter, rows="rows", int8=True,
                          gemv_shape="i8r4g64rs")
    assert decode.route == "q4_gemv_int8" and decode.kernel == "q4gsw_gemv_wg_i8r4g64rs"
    spec = type("Spec", (), {"params": {"I8": True, "R": 4, "KSPLIT": 1}, "workgroup_size": (32, 8, 1),
                             "name": decode.kernel})()
    with pytest.raises(ValueError, match="decode GEMV"):
        decode.sizing(spec, {"rows": 3})
