// f32 embedding lookup: out[t, c] = table[ids[t], c] for live tokens t < tokens and c < d.
// An id >= vocab (the table's rows) is never used as an address: its row of out is written as zeros
// and status[t] = 1 (else 0). Every dispatch rewrites status[t] for each live token, so there is no
// flag to clear between steps, and ids produced on the GPU (sampling) need no host round trip.
// One invocation per output element, 2-D grid as the elementwise kernels.
const WG: u32 = 256u;

struct Params {
  tokens: u32,
  d: u32,
  vocab: u32,
}

@group(0) @binding(0) var<storage, read> ids: array<u32>;
@group(0) @binding(1) var<storage, read> table: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<storage, read_write> status: array<u32>;
@group(0) @binding(4) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.y * (groups.x * WG) + gid.x;
  if (i >= params.tokens * params.d) {
    return;
  }
  let t = i / params.d;
  let c = i % params.d;
  let id = ids[t];
  let valid = id < params.vocab;
  var value = 0.0;
  if (valid) {
    value = table[id * params.d + c];
  }
  out[i] = value;
  if (c == 0u) {
    status[t] = select(1u, 0u, valid);
  }
}
