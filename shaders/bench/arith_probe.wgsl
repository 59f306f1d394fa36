// Arithmetic probe: each invocation (each subgroup, for the matrix kinds) runs independent dependency chains
// for params.iters x 4 steps (the loop body unrolled) with no memory traffic, the ceiling a compute-bound
// kernel is measured against.
$if KIND == "dp4a":
  // A step is one dot4I8Packed accumulated into its own chain, v = dot4I8Packed(v, b) + v: one DP4A
  // instruction where the hardware has it (8 integer ops: 4 products, 4 sums).
$elif KIND == "fma":
  // A step is one f32 fma, v = fma(v, a, c) (2 flops), converging towards c / (1 - a): no overflow,
  // no subnormals.
$else:
  // A step is one subgroup-matrix product accumulated into its own chain, c = a b + c, 4 chains per
  // subgroup of 32 (the subgroup-matrix GEMMs' guard) with the operands loaded once from workgroup memory:
  // 2 x 16 x 16 x ${32 if KIND == "sgmat_i8" else 16} ops a step. The chains end in workgroup memory, one
  // region each.
  $if KIND == "sgmat_f16_smem":
    // This kind loads its operands from workgroup memory at every step, as the f16 GEMM's m32n64w4 tile does
    // (one left and two right matrices for two products, offsets from the subgroup and the step, rows 72
    // halves apart): what those loads leave of the tensor cores.
  enable subgroups;
  enable chromium_experimental_subgroup_matrix;
  $if KIND in ("sgmat_f16", "sgmat_f16_smem"):
    enable f16;
  diagnostic(off, chromium_experimental.subgroup_matrix_uniformity);    // offsets from subgroup_id
// Every chain feeds the next step, so nothing can be hoisted; the result is stored only when it equals a
// value it never meets (as stream_read.wgsl), so nothing is dropped either.
const WG: u32 = ${256 if KIND in ("dp4a", "fma") else 128 if KIND == "sgmat_f16_smem" else 64}u;

struct Params {
  iters: u32,
  seed: u32,
}

@group(0) @binding(0) var<storage, read_write> sink: array<u32>;
@group(0) @binding(1) var<uniform> params: Params;

$if KIND == "sgmat_f16_smem":
  var<workgroup> operands: array<f16, 64u * 72u>;          // the f16 GEMM's staged rows: 64 of 72 halves
  var<workgroup> chains: array<f32, 4u * 256u * (WG / 32u)>;
$elif KIND == "sgmat_i8":
  var<workgroup> operands: array<i32, 128>;                // 16 x 32 bytes: a, and b read column-major
  var<workgroup> chains: array<i32, 4u * 256u * (WG / 32u)>;
$elif KIND == "sgmat_f16":
  var<workgroup> operands: array<f16, 256>;                // 16 x 16
  var<workgroup> chains: array<f32, 4u * 256u * (WG / 32u)>;

@compute @workgroup_size(WG)
fn main(${"@builtin(global_invocation_id) gid: vec3<u32>" if KIND in ("dp4a", "fma") else "@builtin(subgroup_id) sg: u32"}, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_index) lane: u32) {
  $if KIND == "dp4a":
    let b = params.seed | 0x01010101u;
    $for c in range(8):
      var v${c} = gid.x * ${2 * c + 1}u + params.seed;
    for (var i = 0u; i < params.iters; i++) {
      $for s in range(4):
        $for c in range(8):
          v${c} = bitcast<u32>(dot4I8Packed(v${c}, b) + bitcast<i32>(v${c}));
    }
    let folded = v0 ^ v1 ^ v2 ^ v3 ^ v4 ^ v5 ^ v6 ^ v7;
  $elif KIND == "fma":
    let a = 0.999 + f32(params.seed & 1u) * 1e-4;
    let offset = 1e-3;
    $for c in range(8):
      var v${c} = f32(gid.x % 1024u) * ${1.0 / (c + 3)} + f32(params.seed);
    for (var i = 0u; i < params.iters; i++) {
      $for s in range(4):
        $for c in range(8):
          v${c} = fma(v${c}, a, offset);
    }
    let folded = bitcast<u32>(v0 + v1 + v2 + v3 + v4 + v5 + v6 + v7);
  $else:
    $if KIND == "sgmat_i8":
      for (var i = lane; i < 128u; i += WG) {
        operands[i] = bitcast<i32>((params.seed + i) & 0x01010101u);     // bytes 0 or 1
      }
      workgroupBarrier();
      let left = subgroupMatrixLoad<subgroup_matrix_left<i8, 32, 16>>(&operands, 0u, false, 32u);
      let right = subgroupMatrixLoad<subgroup_matrix_right<i8, 16, 32>>(&operands, 0u, true, 32u);
      $for c in range(4):
        var v${c} = subgroup_matrix_result<i32, 16, 16>();
    $elif KIND == "sgmat_f16_smem":
      for (var i = lane; i < 64u * 72u; i += WG) {
        operands[i] = f16(f32((params.seed + i) % 3u) * 0.0009765625);   // 0, 2^-10, 2^-9: sums stay small
      }
      workgroupBarrier();
      let sm = (sg / 2u) * 16u;           // the subgroup's rows and columns, as m32n64w4's
      let sn = (sg % 2u) * 32u;
      $for c in range(4):
        var v${c} = subgroup_matrix_result<f32, 16, 16>();
    $else:
      for (var i = lane; i < 256u; i += WG) {
        operands[i] = f16(f32((params.seed + i) % 3u) * 0.0009765625);   // 0, 2^-10, 2^-9: sums stay small
      }
      workgroupBarrier();
      let left = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&operands, 0u, false, 16u);
      let right = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&operands, 0u, true, 16u);
      $for c in range(4):
        var v${c} = subgroup_matrix_result<f32, 16, 16>();
    for (var i = 0u; i < params.iters; i++) {
      $for s in range(4):
        $if KIND == "sgmat_f16_smem":
          {
            let kk = ((i + ${s}u) % 4u) * 16u;      // from the step: no load is hoisted out of the loop
            let left = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&operands, sm * 72u + kk, false, 72u);
            let right0 = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&operands, sn * 72u + kk, true, 72u);
            let right1 = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&operands, (sn + 16u) * 72u + kk, true,
                                                                                72u);
            v${2 * (s % 2)} = subgroupMatrixMultiplyAccumulate(left, right0, v${2 * (s % 2)});
            v${2 * (s % 2) + 1} = subgroupMatrixMultiplyAccumulate(left, right1, v${2 * (s % 2) + 1});
          }
        $else:
          $for c in range(4):
            v${c} = subgroupMatrixMultiplyAccumulate(left, right, v${c});
    }
    $for c in range(4):
      subgroupMatrixStore(&chains, (sg * 4u + ${c}u) * 256u, v${c}, false, 16u);
    workgroupBarrier();
    var folded = 0u;
    for (var i = lane; i < 4u * 256u * (WG / 32u); i += WG) {
      folded ^= bitcast<u32>(chains[i]);
    }
  if (folded == 0xFFFFFFFFu && lane == 0u) {
    sink[wid.x] = folded;
  }
}
