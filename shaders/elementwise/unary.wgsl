// Elementwise ${OP} on f32: dst[i] = ${EXPR} with x = src[i].
// The 1-D index is spread over a 2-D grid so lengths beyond 65535 workgroups still fit:
// i = gid.y * (num_workgroups.x * WG) + gid.x.
const WG: u32 = ${WG}u;

struct Params {
  length: u32,
}

@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

fn op(x: f32) -> f32 {
  return ${EXPR};
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.y * (groups.x * WG) + gid.x;
  if (i >= params.length) {
    return;
  }
  dst[i] = op(src[i]);
}
