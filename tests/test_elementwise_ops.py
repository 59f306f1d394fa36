"""The elementwise ops without a GPU: broadcasting, params, shapes, errors; the typed generators'
pure-Python twins against their numpy twins; and the oracle's bounds on hand-made cases."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from py_runtime.host.oracle import (binary_bounds, f32_neighbours, pow_bounds, synth_bool_np, synth_f16_bits_np,
                                    synth_i32_np, wgsl_ulp32)
from py_runtime.kernels import kernel
from py_runtime.ops import binary as binary_ops
from py_runtime.ops import extrema as extrema_ops
from py_runtime.ops import logical as logical_ops
from py_runtime.ops import to_copy as to_copy_ops
from py_runtime.ops.synth_typed import (F16Exponents, I32Range, bool_value, f16_bits, fill_bool, fill_f16,
                                        fill_i32, i32_value)
from py_runtime.routes import ROUTES
from py_runtime.tensors import Tensor

LIVE = {"max_workgroups_per_dim": 65535}


def t(name, shape, dtype="f32"):
    return Tensor(name, tuple(shape), dtype, 0)


def _sized(call):
    return call.sizing(kernel(call.kernel), LIVE)


@pytest.mark.parametrize("sa,sb", [((3, 1, 5), (4, 1)), ((2, 3, 4, 5), (5,)), ((), (7, 3)), ((1,), (6, 1, 1)),
                                   ((5, 4), ()), ((2, 1, 4, 1), (3, 1, 5)), ((4,), (4,)), ((0, 3), (1, 3))])
def test_broadcast_shape_and_strides_match_numpy(sa, sb):
    out = binary_ops.broadcast_shape("add", t("a", sa), t("b", sb))
    assert out == np.broadcast_shapes(sa, sb)
    for shape in (sa, sb):
        strides = binary_ops.broadcast_strides(shape, out)
        view = np.broadcast_to(np.arange(int(np.prod(shape))).reshape(shape), out)
        expected = [0] * (4 - view.ndim) + [s // view.itemsize for s in view.strides]
        assert list(strides) == expected, (shape, out)


def test_binary_params_pack_dims_strides_and_length():
    call = binary_ops.binary("pow", a=t("x", (3, 1, 5)), b=t("y", (4, 1)), out=t("z", (3, 4, 5))).call
    sizing = _sized(call)
    assert len(sizing.params) == 64
    words = struct.unpack("<13I", sizing.params[:52])
    assert words[:4] == (1, 3, 4, 5)            # dims, right-aligned
    assert words[4:8] == (0, 5, 0, 1)           # x [3,1,5]: the 4-dim broadcasts
    assert words[8:12] == (0, 0, 1, 0)          # y [4,1]: 3 and 5 broadcast
    assert words[12] == 60
    assert call.kernel == "binary_pow" and call.route == "binary" and set(call.tensors) == {"lhs", "rhs", "out"}


@pytest.mark.parametrize("call,fragments", [
    (lambda: binary_ops.binary("add", a=t("x", (3, 2)), b=t("y", (4,)), out=t("z", (3, 4))),
     ("binary add", "'x'", "'y'", "[3, 2]", "[4]", "do not broadcast", "dim -1 is 2 vs 4")),
    (lambda: binary_ops.binary("mul", a=t("x", (1, 1, 1, 1, 2)), b=t("y", (2,)), out=t("z", (1, 1, 1, 1, 2))),
     ("binary mul", "'x'", "rank 5", "at most 4")),
    (lambda: binary_ops.binary("sub", a=t("x", (2,)), b=t("y", (2,), "bool"), out=t("z", (2,))),
     ("binary sub", "b 'y'", "bool", "f32")),
    (lambda: binary_ops.binary("div", a=t("x", (2, 1)), b=t("y", (3,)), out=t("z", (3, 2))),
     ("binary div", "out 'z'", "[3, 2]", "[2, 3]")),
    (lambda: binary_ops.binary("cube", a=t("x", (2,)), b=t("y", (2,)), out=t("z", (2,))),
     ("unknown binary op 'cube'",)),
    (lambda: logical_ops.logical("xor", a=t("p", (5,), "bool"), b=t("q", (5, 1), "bool"), out=t("r", (5,), "bool")),
     ("logical xor", "b 'q'", "[5, 1]", "a 'p'", "equal shapes")),
    (lambda: logical_ops.logical("and", a=t("p", (5,), "bool"), out=t("r", (5,), "bool")),
     ("logical and", "needs b",)),
    (lambda: logical_ops.logical("not", a=t("p", (5,), "bool"), b=t("q", (5,), "bool"), out=t("r", (5,), "bool")),
     ("logical not", "unary", "'q'")),
    (lambda: logical_ops.logical("or", a=t("p", (5,), "bool"), b=t("q", (5,), "bool"), out=t("r", (5,), "u8")),
     ("logical or", "out 'r'", "u8")),
    (lambda: extrema_ops.extrema("amax", src=t("s", (2, 3)), out=t("m", (2,)), dim=-3),
     ("amax", "dim -3", "'s'", "rank 2", "-2 .. 1")),
    (lambda: extrema_ops.extrema("amin", src=t("s", (2, 0, 3)), out=t("m", (2, 3)), dim=1),
     ("amin", "'s'", "empty")),
    (lambda: extrema_ops.extrema("amax", src=t("s", (2, 3)), out=t("m", (2,)), dim=1, keepdim=True),
     ("amax", "out 'm'", "[2, 1]", "keepdim=True")),
    (lambda: extrema_ops.extrema("amax", src=t("s", ()), out=t("m", ()), dim=0),
     ("amax", "'s'", "rank 0")),
    (lambda: extrema_ops.extrema("amax", src=t("s", (2, 3), "i32"), out=t("m", (2,)), dim=1),
     ("amax", "src 's'", "i32")),
    (lambda: to_copy_ops.to_copy(src=t("s", (4,), "f16"), out=t("d", (4,), "i32")),
     ("to_copy", "f16 -> i32", "'s'", "'d'")),
    (lambda: to_copy_ops.to_copy(src=t("s", (4,)), out=t("d", (2, 2), "i32")),
     ("to_copy", "'s'", "'d'", "[2, 2]")),
    (lambda: fill_i32(target=t("w", (4,)), value_range=I32Range(low=0, span=4), seed=1, stream=1),
     ("fill_i32", "'w'", "f32")),
])
def test_bad_calls_raise_a_value_error_naming_op_tensors_and_problem(call, fragments):
    with pytest.raises(ValueError) as caught:
        call()
    missing = [f for f in fragments if f not in str(caught.value)]
    assert not missing, (str(caught.value), missing)


@pytest.mark.parametrize("shape,dim,keepdim,expected,params", [
    ((2, 3, 4, 5), 1, False, (2, 4, 5), (2, 3, 20, 40)),
    ((2, 3, 4, 5), -1, True, (2, 3, 4, 1), (24, 5, 1, 24)),
    ((4097,), 0, False, (), (1, 4097, 1, 1)),
    ((7, 1, 9), 1, True, (7, 1, 9), (7, 1, 9, 63)),
])
def test_extrema_shape_and_params(shape, dim, keepdim, expected, params):
    assert extrema_ops.reduced_shape(shape, dim % len(shape), keepdim) == expected
    call = extrema_ops.extrema("amin", src=t("s", shape), out=t("m", expected), dim=dim, keepdim=keepdim).call
    assert struct.unpack("<4I", _sized(call).params) == params


def test_keepdim_changes_only_the_shape_metadata():
    plain = extrema_ops.extrema("amax", src=t("s", (3, 5, 7)), out=t("m", (3, 7)), dim=1).call
    kept = extrema_ops.extrema("amax", src=t("s", (3, 5, 7)), out=t("k", (3, 1, 7)), dim=1, keepdim=True).call
    assert plain.kernel == kept.kernel
    assert _sized(plain) == _sized(kept)


@pytest.mark.parametrize("n,words", [(1, 1), (4, 1), (5, 2), (257, 65)])
def test_packed_ops_run_one_invocation_per_word(n, words):
    call = logical_ops.logical("not", a=t("p", (n,), "bool"), out=t("q", (n,), "bool")).call
    assert set(call.tensors) == {"lhs", "out"}
    assert _sized(call).workgroups == (-(-words // 64), 1, 1)
    pack = to_copy_ops.to_copy(src=t("s", (n,)), out=t("h", (n,), "f16")).call
    assert _sized(pack).workgroups == (-(-(-(-n // 2)) // 64), 1, 1)


def test_every_new_kernel_is_registered_with_a_route():
    names = ([binary_ops.kernel_name(op) for op in binary_ops.BINARY_OPS]
             + [logical_ops.kernel_name(op) for op in logical_ops.LOGICAL_OPS]
             + [extrema_ops.kernel_name(op) for op in extrema_ops.EXTREMA_OPS]
             + [k for k, _ in to_copy_ops.CONVERSIONS.values()] + ["fill_i32", "fill_bool", "fill_f16"])
    for name in names:
        assert kernel(name).workgroup_size[0] in (64, 256)
    start = ROUTES.index("binary")                      # appended together; others may follow
    assert ROUTES[start:start + 5] == ("binary", "logical", "extrema", "to_copy", "fill_typed")
    assert kernel("fill_uniform").source == "shaders/synth/fill_uniform.wgsl"


def test_fill_uniform_is_byte_identical_after_becoming_a_family():
    # The sha256 of the expanded kernel before shaders/synth/fill_uniform.wgsl became a template.
    assert kernel("fill_uniform").sha256 == "09932d16430ebfa800b6d54d0f4482dc51cf36d6bb57e098397063883e339618"
    assert kernel("fill_i32").source == kernel("fill_bool").source == "shaders/synth/fill_uniform.wgsl"


@pytest.mark.parametrize("value_range", [I32Range(low=-(2 ** 24), span=2 ** 25 + 1), I32Range(low=-(2 ** 31), span=0),
                                         I32Range(low=-64, span=128), I32Range(low=2 ** 31 - 5, span=5)])
def test_i32_twins_agree_bit_for_bit(value_range):
    numpy_values = synth_i32_np(value_range.low, value_range.span, 7, 1001, 3000)
    assert [i32_value(value_range, 7, 1001, i) for i in range(3000)] == numpy_values.tolist()
    top = value_range.low + (value_range.span or 2 ** 32) - 1
    assert numpy_values.min() >= value_range.low and numpy_values.max() <= top


def test_bool_and_f16_twins_agree_bit_for_bit():
    assert [bool_value(3, 55, i) for i in range(3000)] == synth_bool_np(3, 55, 3000).tolist()
    exponents = F16Exponents(exponent_min=1, exponent_span=30)
    bits = synth_f16_bits_np(1, 30, 3, 56, 3000)
    assert [f16_bits(exponents, 3, 56, i) for i in range(3000)] == bits.tolist()
    values = bits.view(np.float16)
    assert np.all(np.isfinite(values)) and np.all(np.abs(values) >= 2.0 ** -14)      # normal, finite
    assert set(synth_bool_np(3, 55, 3000).tolist()) == {0, 1}


def test_generator_ranges_are_validated():
    with pytest.raises(ValueError, match="past the largest i32"):
        I32Range(low=2 ** 31 - 2, span=5)
    with pytest.raises(ValueError, match=r"\[1, 30\]"):
        F16Exponents(exponent_min=0, exponent_span=4)
    with pytest.raises(ValueError, match="fill_bool writes bool"):
        fill_bool(target=t("x", (4,), "u8"), seed=1, stream=1)
    with pytest.raises(ValueError, match="fill_f16 writes f16"):
        fill_f16(target=t("x", (4,)), exponents=F16Exponents(), seed=1, stream=1)


def test_wgsl_ulp_uses_the_smaller_gap_at_powers_of_two():
    assert wgsl_ulp32(np.array([1.0, 1.5, 2.0, 3.0, -4.0]))[:].tolist() == [2.0 ** -24, 2.0 ** -23, 2.0 ** -23,
                                                                           2.0 ** -22, 2.0 ** -22]
    assert wgsl_ulp32(np.array([0.0]))[0] == 2.0 ** -149


def test_correctly_rounded_allows_exactly_the_two_neighbours():
    exact = np.array([1.0, 1.0 + 2.0 ** -25, 3.0 * 2.0 ** -24 + 1.0])
    lo, hi = f32_neighbours(exact)
    assert lo.tolist() == [1.0, 1.0, 1.0 + 2.0 ** -23] and hi.tolist() == [1.0, 1.0 + 2.0 ** -23, 1.0 + 2.0 ** -22]


def test_floor_divide_bounds_admit_both_sides_only_at_integer_quotients():
    a = np.array([6.0, 7.0, -6.0, 1.0])
    b = np.array([3.0, 3.0, 3.0, 4.0])
    lo, hi = binary_bounds("floor_divide", a, b)
    assert lo.tolist() == [1.0, 2.0, -3.0, 0.0] and hi.tolist() == [2.0, 2.0, -2.0, 0.0]


def test_pow_bounds_contain_the_float64_value_and_stay_tight():
    rng = np.random.default_rng(0)
    x = rng.uniform(2.0 ** -22, 4.0, 10000).astype(np.float32).astype(np.float64)
    y = rng.uniform(-4.0, 4.0, 10000).astype(np.float32).astype(np.float64)
    lo, hi = pow_bounds(x, y)
    exact = x ** y
    assert np.all((lo < exact) & (exact < hi))
    # The budget is a few tens of f32 ULPs where |y log2 x| is moderate.
    moderate = np.abs(y * np.log2(x)) < 8
    assert np.max(((hi - lo) / 2 / wgsl_ulp32(exact))[moderate]) < 64
