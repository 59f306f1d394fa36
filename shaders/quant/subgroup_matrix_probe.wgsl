// The int8 subgroup-matrix spelling q4gsw_gemm_sgmat.wgsl is written in, in one 16 x 16 x 32 product:
// c = a b with a [16, 32] i8 row-major and b [32, 16] i8 stored as its transpose (rows of b's columns,
// read column-major), c [16, 16] i32 row-major. The device compiles it at startup (the route's probe:
// the extension's spelling has changed between Chromium releases); the subgroup-matrix check runs it
// against integer products. One workgroup of one 32-wide subgroup.
enable subgroups;
enable chromium_experimental_subgroup_matrix;
diagnostic(off, chromium_experimental.subgroup_matrix_uniformity);

@group(0) @binding(0) var<storage, read> a: array<i32>;         // 16 rows of 32 bytes
@group(0) @binding(1) var<storage, read> b_columns: array<i32>; // 16 columns of 32 bytes
@group(0) @binding(2) var<storage, read_write> c: array<i32>;   // 16 x 16

var<workgroup> a_tile: array<i32, 128>;
var<workgroup> b_tile: array<i32, 128>;

@compute @workgroup_size(32, 1, 1)
fn main(@builtin(local_invocation_index) t: u32, @builtin(subgroup_id) sg: u32) {
  for (var i = t; i < 128u; i += 32u) {
    a_tile[i] = a[i];
    b_tile[i] = b_columns[i];
  }
  workgroupBarrier();
  // (the offset uses subgroup_id as the GEMM does: 0 in this one-subgroup workgroup)
  let left = subgroupMatrixLoad<subgroup_matrix_left<i8, 32, 16>>(&a_tile, sg * 512u, false, 32u);
  let right = subgroupMatrixLoad<subgroup_matrix_right<i8, 16, 32>>(&b_tile, 0u, true, 32u);
  let product = subgroupMatrixMultiplyAccumulate(left, right, subgroup_matrix_result<i32, 16, 16>());
  subgroupMatrixStore(&c, 0u, product, false, 16u);
}
