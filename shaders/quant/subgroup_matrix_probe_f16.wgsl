// The f16 subgroup-matrix spelling q4gsw_gemm_sgmat_f16.wgsl is written in, in one 16 x 16 x 16 product:
// c = a b with a [16, 16] f16 row-major and b [16, 16] f16 stored as its transpose (read column-major),
// c [16, 16] f32 row-major. Compiled when the device is made (the route's probe); one workgroup of one
// 32-wide subgroup.
enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;
diagnostic(off, chromium_experimental.subgroup_matrix_uniformity);

@group(0) @binding(0) var<storage, read> a: array<f16>;
@group(0) @binding(1) var<storage, read> b_columns: array<f16>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;

var<workgroup> a_tile: array<f16, 256>;
var<workgroup> b_tile: array<f16, 256>;

@compute @workgroup_size(32, 1, 1)
fn main(@builtin(local_invocation_index) t: u32, @builtin(subgroup_id) sg: u32) {
  for (var i = t; i < 256u; i += 32u) {
    a_tile[i] = a[i];
    b_tile[i] = b_columns[i];
  }
  workgroupBarrier();
  // (the offset uses subgroup_id as the GEMM does: 0 in this one-subgroup workgroup)
  let left = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&a_tile, sg * 256u, false, 16u);
  let right = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&b_tile, 0u, true, 16u);
  let product = subgroupMatrixMultiplyAccumulate(left, right, subgroup_matrix_result<f32, 16, 16>());
  subgroupMatrixStore(&c, 0u, product, false, 16u);
}
