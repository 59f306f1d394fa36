// Arithmetic probe: each invocation runs 8 independent dependency chains for params.iters x 4 steps (the
// loop body unrolled) with no memory traffic, the ceiling a compute-bound kernel is measured against.
$if DP4A:
  // A step is one dot4I8Packed accumulated into its own chain, v = dot4I8Packed(v, b) + v: one DP4A
  // instruction where the hardware has it (8 integer ops: 4 products, 4 sums).
$else:
  // A step is one f32 fma, v = fma(v, a, c) (2 flops), converging towards c / (1 - a): no overflow,
  // no subnormals.
// Every chain feeds the next step, so nothing can be hoisted; the result is stored only when it equals a
// value it never meets (as stream_read.wgsl), so nothing is dropped either.
const WG: u32 = 256u;

struct Params {
  iters: u32,
  seed: u32,
}

@group(0) @binding(0) var<storage, read_write> sink: array<u32>;
@group(0) @binding(1) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_index) lane: u32) {
  $if DP4A:
    let b = params.seed | 0x01010101u;
    $for c in range(8):
      var v${c} = gid.x * ${2 * c + 1}u + params.seed;
    for (var i = 0u; i < params.iters; i++) {
      $for s in range(4):
        $for c in range(8):
          v${c} = bitcast<u32>(dot4I8Packed(v${c}, b) + bitcast<i32>(v${c}));
    }
    let folded = v0 ^ v1 ^ v2 ^ v3 ^ v4 ^ v5 ^ v6 ^ v7;
  $else:
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
  if (folded == 0xFFFFFFFFu && lane == 0u) {
    sink[wid.x] = folded;
  }
}
