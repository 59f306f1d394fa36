// out[m, n] = sum_k x[m, k] w[n, k] over ${"int8 (i32 results)" if KIND == "i8" else "f16 (f32 results)"} operands stored row-major and K-contiguous, as a
// workgroup of 2 x 2 subgroups of 32 owning a 64 x 64 output tile, each subgroup 2 x 2 result matrices
// of 16 x 16, loaded per ${32 if KIND == "i8" else 16}-value step of K straight from the storage buffers (x as the left operand, w
// read column-major as the right one) and stored straight to out. M and N are multiples of 64 and K of
// ${32 if KIND == "i8" else 16} (the op's check); needs subgroups of exactly 32 (the probes' guard).
enable subgroups;
enable chromium_experimental_subgroup_matrix;
$if KIND == "f16":
  enable f16;
diagnostic(off, chromium_experimental.subgroup_matrix_uniformity);    // offsets from subgroup_id

// (int8 operands are packed four to an i32 word; offsets count int8 values)
const KC: u32 = ${32 if KIND == "i8" else 16}u;

struct Params {
  m: u32,
  n: u32,
  k: u32,
}

@group(0) @binding(0) var<storage, read> x: array<${'i32' if KIND == 'i8' else 'f16'}>;
@group(0) @binding(1) var<storage, read> w: array<${'i32' if KIND == 'i8' else 'f16'}>;
@group(0) @binding(2) var<storage, read_write> out: array<${'i32' if KIND == 'i8' else 'f32'}>;
@group(0) @binding(3) var<uniform> params: Params;

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(subgroup_id) sg: u32) {
  let m0 = wid.y * 64u + (sg / 2u) * 32u;
  let n0 = wid.x * 64u + (sg % 2u) * 32u;
  $for i in range(2):
    $for j in range(2):
      var sum${i}${j} = subgroup_matrix_result<${'i32' if KIND == 'i8' else 'f32'}, 16, 16>();
  for (var k = 0u; k < params.k; k += KC) {
    $for i in range(2):
      let left${i} = subgroupMatrixLoad<subgroup_matrix_left<${"i8" if KIND == "i8" else "f16"}, ${32 if KIND == "i8" else 16}, 16>>(
          &x, (m0 + ${16 * i}u) * params.k + k, false, params.k);
    $for j in range(2):
      let right${j} = subgroupMatrixLoad<subgroup_matrix_right<${"i8" if KIND == "i8" else "f16"}, 16, ${32 if KIND == "i8" else 16}>>(
          &w, (n0 + ${16 * j}u) * params.k + k, true, params.k);
    $for i in range(2):
      $for j in range(2):
        sum${i}${j} = subgroupMatrixMultiplyAccumulate(left${i}, right${j}, sum${i}${j});
  }
  $for i in range(2):
    $for j in range(2):
      subgroupMatrixStore(&out, (m0 + ${16 * i}u) * params.n + n0 + ${16 * j}u, sum${i}${j}, false, params.n);
}
