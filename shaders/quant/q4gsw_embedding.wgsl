// Q4 embedding lookup: out[t, d] = (q[id, d]) * scale(id, d / gs) for the live tokens t, from a Q4
// weight of [vocab, dim] (packed u32 words [vocab, dim / 8]), e.g. the weight a tied lm_head shares.
// Immutable controls (kept across resizes by the op's sizing function):
//   nibble_high_first  0: the linear convention (value 2j in the LOW nibble of byte j), 1: swapped
//   scales_transposed  1: scales [dim / gs, vocab] (the linear layout, shared with a tied lm_head),
//                      0: scales [vocab, dim / gs] (the embedding layout)
// Out-of-range ids never become addresses: that token's row is zeros and status[t] = 1.
const WG: u32 = 256u;

struct Params {
  tokens: u32,
  dim: u32,
  vocab: u32,
  group_size: u32,
  nibble_high_first: u32,
  scales_transposed: u32,
}

@group(0) @binding(0) var<storage, read> ids: array<u32>;
@group(0) @binding(1) var<storage, read> packed: array<u32>;
@group(0) @binding(2) var<storage, read> scales: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> status: array<u32>;
@group(0) @binding(5) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.y * (groups.x * WG) + gid.x;
  if (i >= params.tokens * params.dim) {
    return;
  }
  let t = i / params.dim;
  let d = i % params.dim;
  let id = ids[t];
  let valid = id < params.vocab;
  if (d == 0u) {
    status[t] = select(1u, 0u, valid);
  }
  if (!valid) {
    out[i] = 0.0;
    return;
  }
  // Which nibble of the word holds value d: swapped conventions exchange the pair (2j, 2j + 1).
  let slot = select(d % 8u, (d % 8u) ^ 1u, params.nibble_high_first != 0u);
  let word = packed[id * (params.dim / 8u) + d / 8u];
  let q = f32((word >> (4u * slot)) & 15u) - 8.0;
  let group = d / params.group_size;
  let groups_per_row = params.dim / params.group_size;
  let scale = select(scales[id * groups_per_row + group], scales[group * params.vocab + id],
                     params.scales_transposed != 0u);
  out[i] = q * scale;
}
