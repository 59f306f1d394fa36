// Q4 embedding lookup: out[t, d] = (q[id, d]) * scale(id, d / gs) for the live tokens t, from a Q4
// weight of [vocab, dim] (packed u32 words [vocab, dim / 8]), e.g. the weight a tied lm_head shares;
// one packed word (8 values) an invocation. The conventions (q4_embed_word.wgsli) are immutable
// controls, kept across resizes by the op's sizing function.
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

$include q4_embed_word.wgsli

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.y * (groups.x * WG) + gid.x;      // word i of the live rows
  let words = params.dim / 8u;
  if (i >= params.tokens * words) {
    return;
  }
  let t = i / words;
  let w = i % words;
  let id = ids[t];
  let valid = id < params.vocab;
  if (w == 0u) {
    status[t] = select(1u, 0u, valid);
  }
  var values: array<f32, 8>;                    // zeros for an out-of-range id
  if (valid) {
    values = q4_embed_word(id, w);
  }
  for (var j = 0u; j < 8u; j++) {
    out[8u * i + j] = values[j];
  }
}
