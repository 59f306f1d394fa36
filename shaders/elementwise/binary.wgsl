// Elementwise ${OP} on f32 with numpy broadcasting over up to 4 dims: out[i] = ${EXPR}, where
// a = lhs[offset of i in lhs] and b = rhs[offset of i in rhs].
// Dims are right-aligned into 4 slots (slot 3 innermost, unused leading slots 1). Per-input strides
// are in elements and 0 on a dim the input broadcasts (size 1 or absent), so both inputs are read
// in place. The 1-D output index is spread over a 2-D grid: i = gid.y * (num_workgroups.x * WG) + gid.x.
const WG: u32 = ${WG}u;

struct Params {
  shape: vec4<u32>,         // output dims
  a_strides: vec4<u32>,
  b_strides: vec4<u32>,
  length: u32,              // output elements
}

@group(0) @binding(0) var<storage, read> lhs: array<f32>;
@group(0) @binding(1) var<storage, read> rhs: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

fn op(a: f32, b: f32) -> f32 {
  return ${EXPR};
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.y * (groups.x * WG) + gid.x;
  if (i >= params.length) {
    return;
  }
  var rest = i;
  var ia = 0u;
  var ib = 0u;
  for (var d = 3; d > 0; d--) {
    let coord = rest % params.shape[d];
    rest = rest / params.shape[d];
    ia += coord * params.a_strides[d];
    ib += coord * params.b_strides[d];
  }
  ia += rest * params.a_strides[0];
  ib += rest * params.b_strides[0];
  out[i] = op(lhs[ia], rhs[ib]);
}
