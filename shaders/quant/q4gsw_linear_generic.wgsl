// Q4 linear, generic fallback: one invocation per output (m, n), sequential over K; accepts any
// shape the layout allows (K a multiple of the group size). Reference layout as in
// q4gsw_quantize.wgsl, rows n_offset.. of a packed matrix with n_total rows.
const WG: u32 = 64u;

struct Params {
  m: u32,
  k: u32,
  n: u32,
  n_total: u32,
  n_offset: u32,
  group_size: u32,
  has_bias: u32,
  accumulate: u32,      // out += the product (a residual add folded in)
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> weights: array<u32>;
@group(0) @binding(2) var<storage, read> scales: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.y * (groups.x * WG) + gid.x;
  if (i >= params.m * params.n) {
    return;
  }
  let m = i / params.n;
  let n = i % params.n;
  let row = n + params.n_offset;
  let words = params.k / 8u;
  var acc = 0.0;
  for (var w = 0u; w < words; w++) {
    let word = weights[row * words + w];
    let scale = scales[(w * 8u / params.group_size) * params.n_total + row];
    var s = 0.0;
    for (var j = 0u; j < 8u; j++) {
      s += (f32((word >> (4u * j)) & 15u) - 8.0) * x[m * params.k + w * 8u + j];
    }
    acc += s * scale;
  }
  out[i] = acc + select(0.0, bias[n], params.has_bias != 0u) + select(0.0, out[i], params.accumulate != 0u);
}
