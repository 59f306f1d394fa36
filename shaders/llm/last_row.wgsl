// The last live row of x [tokens, d] into out [1, d]: the model head (final norm, lm_head, argmax)
// needs only the last position's hidden state, at a prefill as at a decode step.
const WG: u32 = 256u;

struct Params {
  tokens: u32,
  d: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let c = gid.x;
  if (c >= params.d) {
    return;
  }
  out[c] = x[(params.tokens - 1u) * params.d + c];
}
