// Fused SwiGLU on [tokens, ffn] f32: out[i] = g * sigmoid(g) * up[i] with g = gate[i], evaluated as
// g / (1 + exp(-g)) * up[i] (exp(-g) = inf for very negative g gives -0, not NaN), for i < length.
// Replaces the silu / mul chain: one read of each input, one write. 2-D grid as the elementwise kernels.
const WG: u32 = 256u;

struct Params {
  length: u32,
}

@group(0) @binding(0) var<storage, read> gate: array<f32>;
@group(0) @binding(1) var<storage, read> up: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.y * (groups.x * WG) + gid.x;
  if (i >= params.length) {
    return;
  }
  let g = gate[i];
  out[i] = g / (1.0 + exp(-g)) * up[i];
}
