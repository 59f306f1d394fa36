"""The workgroup memory a kernel needs, derived from its WGSL: sizes worked out by hand from the WebGPU
spec's count (the sum of roundUp(16, SizeOf(T)) over the workgroup variables) and WGSL's "Alignment and
Size" table."""

from __future__ import annotations

import pytest

from py_runtime.host.wgsl_meta import WgslMetaError, parse_kernel_meta
from py_runtime.kernels import kernel, kernel_names

_ENTRY = "@compute @workgroup_size(64)\nfn main() {\n  const A: u32 = 1000u;   // function scope: not the module's A\n}\n"


def _bytes(declarations: str) -> int:
    return parse_kernel_meta(declarations + "\n" + _ENTRY, where="k")["workgroup_bytes"]


@pytest.mark.parametrize("declarations,expected", [
    ("", 0),
    # a lone 4-byte atomic still takes a 16-byte slot
    ("var<workgroup> ticket: atomic<u32>;", 16),
    # vec3<f32>: align 16, size 12, so an array element every 16 bytes: 5 x 16
    ("var<workgroup> a: array<vec3<f32>, 5>;", 80),
    ("var<workgroup> a: array<vec3f, 5>;", 80),
    # f16 vectors: vec3<f16> align 8, size 6, stride 8: 3 x 8 = 24, rounded up to 32
    ("var<workgroup> h: array<vec3<f16>, 3>;", 32),
    ("var<workgroup> h: vec2h;", 16),                                        # 4 bytes, one slot
    ("var<workgroup> h: array<f16, 9>;", 32),                                # 18 bytes
    ("var<workgroup> h: array<vec4<f16>, 2>;", 16),                          # 2 x 8
    # every variable rounds up on its own: 4 -> 16 and 8 -> 16, not 12 -> 16
    ("var<workgroup> x: f32;\nvar<workgroup> y: vec2<u32>;", 32),
    # a struct: a at 0 (4), b at 16 (align 16, 12 bytes), c at 28 (2); 30 rounded up to its align 16 = 32
    ("struct S {\n  a: f32,\n  b: vec3<f32>,\n  c: f16,\n}\nvar<workgroup> s: array<S, 3>;", 96),
    ("struct P { m: f32, l: f32 }\nvar<workgroup> p: array<P, 3>;", 32),     # 8-byte elements: 24 -> 32
    ("alias Heads = vec2<f32>;\nvar<workgroup> h: array<Heads, 3>;", 32),    # 24 -> 32
    # nested consts: B = (4 + 2) * 3 = 18, C = 18 / 4 = 4 (integer division), count 4 * 4 - 18 % 5 = 13
    ("const A: u32 = 4u;\nconst B: u32 = (A + 2u) * 3u;\nconst C = B / 4u;\n"
     "var<workgroup> w: array<f32, C * A - B % 5u>;", 64),                   # 52 bytes
    # declared after its use (WGSL's module scope has no order), hex and i32 literals
    ("var<workgroup> w: array<u32, N / 2i>;\nconst N: u32 = 0x10u;", 32),
    ("var<workgroup> w: array<array<f32, 3>, 2>;", 32),                      # 2 x 12 = 24 -> 32
    # a commented-out declaration does not count
    ("// var<workgroup> ghost: array<f32, 4096>;\nvar<workgroup> w: array<f32, 4>;  // [4]", 16),
])
def test_workgroup_bytes_follow_the_spec_count(declarations, expected):
    assert _bytes(declarations) == expected


@pytest.mark.parametrize("declarations,fragment", [
    ("const A: u32 = 4u;\nvar<workgroup> w: array<f32, A << 2u>;", "'A << 2u'"),
    ("const A: u32 = 4u;\nvar<workgroup> w: array<f32, min(A, 2u)>;", "'min(A, 2u)'"),
    ("var<workgroup> w: array<f32, M>;", "'M'"),                             # no such const
    ("override O: u32 = 4u;\nvar<workgroup> w: array<f32, O>;", "'O'"),      # overrides are not evaluated
    ("const F: f32 = 1.5;\nvar<workgroup> w: array<f32, F>;", "'1.5'"),
    ("var<workgroup> w: array<f32, 4u / 0u>;", "divides by zero"),
    ("var<workgroup> w: array<f32, 2u - 2u>;", "has 0 elements"),
    ("const A: u32 = B;\nconst B: u32 = A;\nvar<workgroup> w: array<f32, A>;", "defined through itself"),
    ("var<workgroup> w: mat2x2<f32>;", "'mat2x2<f32>' unknown"),
    ("var<workgroup> w: array<f32>;", "fixed-size"),
    ("struct S { @size(16) a: f32 }\nvar<workgroup> s: S;", "@align and @size"),
])
def test_workgroup_bytes_refuse_what_they_cannot_evaluate(declarations, fragment):
    with pytest.raises(WgslMetaError, match="^shaders/x.wgsl \\(x\\): ") as caught:
        parse_kernel_meta(declarations + "\n" + _ENTRY, where="shaders/x.wgsl (x)")
    assert fragment in str(caught.value)


def test_every_registry_kernel_fits_the_largest_workgroup_memory_webgpu_adapters_report():
    sizes = {name: kernel(name).workgroup_bytes for name in kernel_names()}
    assert all(0 <= size <= 65536 and size % 16 == 0 for size in sizes.values()), sizes
    assert sizes["q4gsw_gemm_bk64"] == 2 * 64 * 64 * 4          # the x and weight tiles, 64 x 64 f32 each
