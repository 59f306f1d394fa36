"""Small pure functions: grid geometry, timestamp arithmetic, the synthetic twin, tolerances."""

from __future__ import annotations

import numpy as np
import pytest

from py_runtime.host.oracle import synth_hash_np
from py_runtime.dispatch import linear_grid
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


def test_pre_quantized_int8_routes_name_what_does_not_fit():
    """The int8x routes refuse, with the reason, activations of another x or group size, a vec4-scale
    shape on rows that are no multiple of 4, a gate/up weight that is not twice the output, and a norm
    weight of another length."""
    import pytest

    from py_runtime.gpu.device import AdapterReport
    from py_runtime.ops.int8_activations import Int8Activations, rms_norm_int8x
    from py_runtime.ops.q4 import Q4Weight
    from py_runtime.ops.q4_linear import q4_linear, q4_linear_glu
    from py_runtime.tensors import Tensor

    k, n = 256, 64
    adapter = AdapterReport(backend="native", info={}, features=(), device_features=(),
                            limits={"maxComputeInvocationsPerWorkgroup": 256, "maxComputeWorkgroupStorageSize": 32768})
    weight = Q4Weight(Tensor("w", (2 * n * k // 8,), "u32", 0), Tensor("s", (k // 64 * 2 * n,), "f32", 0), k, 2 * n, 64)
    x, other, out = Tensor("x", (1, k), "f32", 0), Tensor("y", (1, k), "f32", 0), Tensor("out", (1, n), "f32", 0)
    act = Int8Activations(x, Tensor("xq", (k // 4,), "u32", 0), Tensor("xs", (k // 16,), "f32", 0), 64)
    with pytest.raises(ValueError, match="cannot feed x 'y'"):
        q4_linear(x=other, weight=weight.rows(0, n), out=out, adapter=adapter, tokens=1, int8=act)
    coarse = Int8Activations(x, act.words, act.stats, 128)
    with pytest.raises(ValueError, match=r"groups of 128\) cannot feed a weight .* groups of 64"):
        q4_linear(x=x, weight=weight.rows(0, n), out=out, adapter=adapter, tokens=1, int8=coarse)
    with pytest.raises(ValueError, match="multiples of 4"):
        q4_linear(x=x, weight=weight.rows(2, n), out=out, adapter=adapter, tokens=1, int8=act, gemv_shape="r4u1w2v")
    with pytest.raises(ValueError, match="a GEMV shape of"):
        q4_linear(x=x, weight=weight.rows(0, n), out=out, adapter=adapter, tokens=1, int8=act, gemv_shape="r4s2m")
    with pytest.raises(ValueError, match="needs 2 x 64 rows"):
        q4_linear_glu(act=act, weight=weight.rows(0, n), out=out, adapter=adapter)
    with pytest.raises(ValueError, match="rms_norm_int8x: .* must agree"):
        rms_norm_int8x(x=x, weight=Tensor("nw", (k // 2,), "f32", 0), act=act, eps=1e-5)
    with pytest.raises(ValueError, match="words must be u32"):
        Int8Activations(x, Tensor("xq", (k // 8,), "u32", 0), act.stats, 64)
    # The H200 table: the misaligned view takes the scalar-scale variant by itself; the aligned one the
    # vec4 one. The portable table (this adapter's: its info names no GPU) takes r2u2w1 everywhere.
    kernel = lambda w, **table: q4_linear(x=x, weight=w, out=out, adapter=adapter, tokens=1, int8=act,
                                          **table).calls[0].kernel
    assert kernel(weight.rows(2, n), tuning="h200").endswith("_r1u1w8")
    assert kernel(weight.rows(0, n), tuning="h200").endswith("_r1u1w8")
    assert kernel(weight.rows(0, n)) == "q4gsw_gemv_i8x_wg_r2u2w1"
    glu = q4_linear_glu(act=act, weight=weight, out=out, adapter=adapter, tuning="h200")
    assert glu.call.kernel == "q4gsw_gemv_i8x_glu_wg_r4u1w2v"

def test_native_dialect_blanks_only_the_subgroups_directive():
    """Naga rejects `enable subgroups;`; the native backend blanks that line (and only it), keeping
    every other line where it was so compile errors still point at the generated file's lines."""
    from py_runtime.gpu.native import _naga_dialect

    code = "// enable subgroups; in a comment stays\nenable subgroups;\nenable f16;\n  enable  subgroups ;\nfn f() {}\n"
    out = _naga_dialect(code)
    assert out.splitlines() == ["// enable subgroups; in a comment stays", "", "enable f16;", "", "fn f() {}"]
