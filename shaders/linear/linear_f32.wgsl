// f32 linear: out[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n] when has_bias), sequential in k.
// One invocation per output element: the plain reference route the fast linears are checked
// against, and the generic fallback. Outputs spread over a 2-D grid like the elementwise kernels.
const WG: u32 = 64u;

struct Params {
  m: u32,
  k: u32,
  n: u32,
  has_bias: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.y * (groups.x * WG) + gid.x;
  if (i >= params.m * params.n) {
    return;
  }
  let row = i / params.n;
  let col = i % params.n;
  var acc = 0.0;
  for (var k = 0u; k < params.k; k++) {
    acc += x[row * params.k + k] * w[col * params.k + k];
  }
  if (params.has_bias != 0u) {
    acc += bias[col];
  }
  out[i] = acc;
}
