"""The params struct layout: parsed from the WGSL by the codegen, per the WGSL spec's uniform layout
rules, and packed by field name at run time."""

from __future__ import annotations

import json
import struct

import pytest

from py_runtime.host.codegen import GENERATED_DIR
from py_runtime.host.wgsl_meta import WgslMetaError, parse_kernel_meta
from py_runtime.kernels import Kernel, ParamsError, kernel, kernel_names

# (align, size) per type in the uniform address space, from the WGSL spec's "Alignment and Size" table.
SPEC = {"u32": (4, 4), "i32": (4, 4), "f32": (4, 4), "vec2": (8, 8), "vec3": (16, 12), "vec4": (16, 16)}


def _fields(name: str) -> list[tuple[str, str, int, int]]:
    return [(f.name, f.type, f.offset, f.size) for f in kernel(name).params_layout.fields]


def _wgsl(struct_body: str, uniform: str = "@group(0) @binding(1) var<uniform> params: Params;") -> str:
    return (f"struct Params {{ {struct_body} }}\n"
            "@group(0) @binding(0) var<storage, read_write> dst: array<f32>;\n"
            f"{uniform}\n@compute @workgroup_size(64)\nfn main() {{}}\n")


def test_seven_u32_fields_pack_back_to_back():
    # q4gsw_gemv: seven u32 (align 4, size 4) at 0, 4, ..., 24; the struct ends at 28, a multiple of
    # its alignment (4), so its size is 28.
    layout = kernel("q4gsw_gemv_wg_r8").params_layout
    assert layout.struct == "Params" and layout.size == 28
    assert _fields("q4gsw_gemv_wg_r8") == [
        ("k", "u32", 0, 4), ("n", "u32", 4, 4), ("n_total", "u32", 8, 4), ("n_offset", "u32", 12, 4),
        ("group_size", "u32", 16, 4), ("has_bias", "u32", 20, 4), ("accumulate", "u32", 24, 4)]


def test_vec4_fields_align_to_16_and_round_the_struct_up_to_16():
    # binary: three vec4<u32> (align 16, size 16) at 0, 16, 32; a u32 at 48 ends the members at 52;
    # the struct's alignment is its largest member's, 16, so its size rounds 52 up to 64.
    assert kernel("binary_add").params_layout.size == 64
    assert _fields("binary_add") == [("shape", "vec4<u32>", 0, 16), ("a_strides", "vec4<u32>", 16, 16),
                                     ("b_strides", "vec4<u32>", 32, 16), ("length", "u32", 48, 4)]


def test_mixed_scalars_keep_their_declared_order_and_types():
    # fill_uniform: u32, u32, u32, i32, f32, all align 4 size 4: 0..16, size 20.
    assert kernel("fill_uniform").params_layout.size == 20
    assert _fields("fill_uniform") == [("length", "u32", 0, 4), ("seed", "u32", 4, 4), ("stream", "u32", 8, 4),
                                       ("scale_log2", "i32", 12, 4), ("offset", "f32", 16, 4)]
    # rms_norm: u32, u32, f32: size 12.
    assert _fields("rms_norm_wg64") == [("rows", "u32", 0, 4), ("d", "u32", 4, 4), ("eps", "f32", 8, 4)]
    assert kernel("rms_norm_wg64").params_layout.size == 12


def test_vec2_and_vec3_follow_the_spec_table():
    # a: u32 at 0 (ends 4); b: vec2<f32>, align 8, at 8 (ends 16); c: vec3<u32>, align 16 size 12, at 16
    # (ends 28); d: f32 at 28 (ends 32); struct alignment 16: size 32.
    meta = parse_kernel_meta(_wgsl("a: u32, b: vec2<f32>, c: vec3<u32>, d: f32,"), where="k")
    assert meta["params_layout"] == {"struct": "Params", "size": 32, "fields": [
        {"name": "a", "type": "u32", "offset": 0, "size": 4}, {"name": "b", "type": "vec2<f32>", "offset": 8, "size": 8},
        {"name": "c", "type": "vec3<u32>", "offset": 16, "size": 12}, {"name": "d", "type": "f32", "offset": 28, "size": 4}]}
    # A lone vec3 is 12 bytes but aligned to 16: the struct is 16. Shorthand aliases are canonicalised.
    lone = parse_kernel_meta(_wgsl("v: vec3f"), where="k")["params_layout"]
    assert lone["size"] == 16 and lone["fields"] == [{"name": "v", "type": "vec3<f32>", "offset": 0, "size": 12}]
    # x: f32 at 0, then vec4i aligns to 16: at 16, ends 32.
    assert [f["offset"] for f in parse_kernel_meta(_wgsl("x: f32, v: vec4i"), where="k")["params_layout"]["fields"]] == [0, 16]


def test_a_kernel_without_a_uniform_binding_has_no_layout():
    text = "@group(0) @binding(0) var<storage, read_write> dst: array<f32>;\n@compute @workgroup_size(1)\nfn main() {}\n"
    assert parse_kernel_meta(text, where="k")["params_layout"] is None


@pytest.mark.parametrize("text,fragment", [
    (_wgsl("n: u32, table: array<u32, 4>,"), "field 'table' has type 'array<u32, 4>'"),
    (_wgsl("n: u32, inner: Inner,"), "field 'inner' has type 'Inner'"),
    (_wgsl("n: u32, h: f16,"), "field 'h' has type 'f16'"),
    (_wgsl("@align(16) n: u32,"), "member '@align(16) n: u32' is not `name: type`"),
    (_wgsl("n: u32", "@group(0) @binding(1) var<uniform> params: u32;"), "uniform binding 'params' has type 'u32'"),
    (_wgsl("n: u32", "@group(0) @binding(1) var<uniform> params: Params;\n"
                     "@group(0) @binding(2) var<uniform> more: Params;"), "2 uniform bindings ['params', 'more']"),
])
def test_unsupported_params_structs_are_refused_naming_kernel_and_field(text, fragment):
    with pytest.raises(WgslMetaError) as caught:
        parse_kernel_meta(text, where="shaders/x.wgsl (x_kernel)")
    assert str(caught.value).startswith("shaders/x.wgsl (x_kernel): ") and fragment in str(caught.value)


def _struct_rule(fields: list[dict]) -> tuple[list[int], int]:
    """Offsets and struct size from SPEC: each member at its alignment past the previous one's end;
    the struct's size is the last member's end rounded up to the largest alignment."""
    offsets, end, largest = [], 0, 1
    for field in fields:
        align, size = SPEC[field["type"].split("<")[0]]
        offsets.append(-(-end // align) * align)
        end, largest = offsets[-1] + size, max(largest, align)
        assert size == field["size"]
    return offsets, -(-end // largest) * largest


def test_every_generated_kernel_with_a_uniform_binding_has_a_layout_by_the_struct_size_rule(repo):
    registry = json.loads((repo / GENERATED_DIR / "registry.json").read_text())["kernels"]
    without_uniform = set()
    for name, entry in registry.items():
        uniform = [b for b in entry["bindings"] if b["space"] == "uniform"]
        layout = entry["params_layout"]
        if not uniform:
            assert layout is None, name
            without_uniform.add(name)
            continue
        assert layout["struct"] == uniform[0]["type"], name
        offsets, size = _struct_rule(layout["fields"])
        assert [f["offset"] for f in layout["fields"]] == offsets and layout["size"] == size, name
    # every kernel takes a params struct but the subgroup-matrix probes (each a fixed-size product)
    assert without_uniform == {"subgroup_matrix_probe", "subgroup_matrix_probe_f16"}


def test_packing_matches_the_hand_written_struct_pack_and_round_trips():
    gemv = kernel("q4gsw_gemv_wg_r8")
    values = dict(k=2048, n=8192, n_total=8192, n_offset=0, group_size=64, has_bias=True, accumulate=False)
    data = gemv.pack_params(**values)
    assert data == struct.pack("<7I", 2048, 8192, 8192, 0, 64, 1, 0)
    assert gemv.params_layout.unpack(data) == {**values, "has_bias": 1, "accumulate": 0}
    binary = kernel("binary_add").pack_params(shape=(1, 2, 3, 4), a_strides=[0, 12, 4, 1], b_strides=(0, 0, 0, 1), length=24)
    assert binary == struct.pack("<13I12x", 1, 2, 3, 4, 0, 12, 4, 1, 0, 0, 0, 1, 24)
    fill = kernel("fill_uniform")
    data = fill.pack_params(length=5, seed=2**32 - 1, stream=0, scale_log2=-3, offset=0.1)
    assert data == struct.pack("<IIIif", 5, 2**32 - 1, 0, -3, 0.1)       # 0.1 rounded to f32 as struct does
    assert fill.params_layout.unpack(data)["offset"] == struct.unpack("<f", struct.pack("<f", 0.1))[0]


def test_missing_and_unknown_fields_are_named_with_the_kernel_and_its_fields():
    with pytest.raises(ParamsError) as caught:
        kernel("q4gsw_gemv_wg_r8").pack_params(k=1, n=1, n_total=1, nn=1, group_size=64, has_bias=0, accumulate=0)
    assert str(caught.value) == (
        "kernel q4gsw_gemv_wg_r8: params missing ['n_offset'], unknown ['nn']; fields are "
        "['k: u32', 'n: u32', 'n_total: u32', 'n_offset: u32', 'group_size: u32', 'has_bias: u32', 'accumulate: u32']")


@pytest.mark.parametrize("name,values,fragment", [
    ("q4gsw_gemv_wg_r8", {"k": -1}, "k=-1 (out of range: u32 is 0..4294967295)"),
    ("q4gsw_gemv_wg_r8", {"n": 2**32}, "n=4294967296 (out of range: u32 is 0..4294967295)"),
    ("q4gsw_gemv_wg_r8", {"k": 1.0}, "k=1.0 (wrong type: u32 takes an int)"),
    ("fill_uniform", {"scale_log2": 2**31}, "scale_log2=2147483648 (out of range: i32 is -2147483648..2147483647)"),
    ("fill_uniform", {"scale_log2": True}, "scale_log2=True (wrong type: only a u32 takes a bool)"),
    ("fill_uniform", {"offset": 1e39}, "offset=1e+39 (out of range: beyond f32's largest finite value)"),
    ("fill_uniform", {"offset": "0.5"}, "offset='0.5' (wrong type: f32 takes a real number)"),
    ("binary_add", {"shape": (1, 2, 3)}, "shape=(1, 2, 3) (wrong type: vec4<u32> takes a sequence of 4)"),
    ("binary_add", {"a_strides": (0, 1, -2, 3)}, "a_strides[2]=-2 (out of range: u32 is 0..4294967295)"),
])
def test_bad_values_are_named_with_the_reason(name, values, fragment):
    spec = kernel(name)
    good = {f.name: ((0,) * f.width if f.width > 1 else 0) for f in spec.params_layout.fields}
    with pytest.raises(ParamsError) as caught:
        spec.pack_params(**{**good, **values})
    message = str(caught.value)
    assert message.startswith(f"kernel {name}: params invalid [") and fragment in message, message


def test_a_kernel_without_params_refuses_to_pack():
    bare = Kernel(name="bare", source="s", code="", entry_point="main", workgroup_size=(1, 1, 1), bindings=(),
                  template_values={}, params_layout=None, workgroup_bytes=0, tier="shipped", sha256="0")
    with pytest.raises(ParamsError, match="kernel bare: has no uniform params binding, given \\['n'\\]"):
        bare.pack_params(n=1)


def test_the_registry_keys_template_values_apart_from_params():
    gemv = kernel("q4gsw_gemv_wg_r8")
    assert gemv.template_values["R"] == 8 and not hasattr(gemv, "params")
    assert all(kernel(name).template_values == {} for name in ("swiglu", "linear_f32"))
    assert set(kernel_names()) >= {"swiglu", "q4gsw_gemv_wg_r8"}
