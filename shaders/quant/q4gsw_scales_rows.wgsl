// A row-major copy of a Q4 weight's scales: rows[n * G + g] = scales[g * N + n] (G = K / gs groups per
// row, N = n_total rows), made once when a weight is loaded, beside the reference [K/gs, N] scales that
// every other route reads. The pre-quantized int8 GEMV's lanes take consecutive chunks of one row, so
// in this layout a warp's scale loads fall in one line per row instead of one line per group (the
// reference layout's, 8 KB apart at Llama's N): +1/8 of the packed bytes in memory, for the decode.
// One invocation per scale; a copy, so the values are bit-identical.
const WG: u32 = 256u;

struct Params {
  groups: u32,        // G, per row
  n_total: u32,
}

@group(0) @binding(0) var<storage, read> scales: array<f32>;
@group(0) @binding(1) var<storage, read_write> rows: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.y * (groups.x * WG) + gid.x;            // index into rows: row-major
  if (i >= params.groups * params.n_total) {
    return;
  }
  let n = i / params.groups;
  let g = i % params.groups;
  rows[i] = scales[g * params.n_total + n];
}
