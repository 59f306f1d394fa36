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
