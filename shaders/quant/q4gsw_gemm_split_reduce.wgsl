// The K splits of a GEMM added up (q4gsw_gemm_sgmat_sk's partials [split][m][n]), in split order, then
// the bias and the residual as the unsplit GEMM's store adds them:
//   out[m, n] = (sum over s of partials[s, m, n]) + bias[n] (+ out[m, n] where accumulate)
// One invocation per output.
struct Params {
  m: u32,
  n: u32,
  splits: u32,
  has_bias: u32,
  accumulate: u32,
}

@group(0) @binding(0) var<storage, read> partials: array<f32>;
@group(0) @binding(1) var<storage, read> bias: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) grid: vec3<u32>) {
  let i = gid.x + gid.y * grid.x * 256u;
  let total = params.m * params.n;
  if (i >= total) {
    return;
  }
  var sum = partials[i];
  for (var s = 1u; s < params.splits; s++) {
    sum += partials[s * total + i];
  }
  out[i] = sum + select(0.0, bias[i % params.n], params.has_bias != 0u)
           + select(0.0, out[i], params.accumulate != 0u);
}
