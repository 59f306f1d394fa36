// Rotary position embedding, ${LAYOUT} layout: for token t (position pos + t), head h and frequency
// index p < half = head_dim / 2, the pair
$if LAYOUT == "interleaved":
  //   (a, b) = (x[.., 2p], x[.., 2p + 1])        (Meta checkpoints: interleaved pairs)
$else:
  //   (a, b) = (x[.., p], x[.., p + half])       (HF checkpoints: rotate-half)
// becomes (a cos - b sin, a sin + b cos), with (cos, sin) of angle position * f_p read from a table
// the host computed in float64 and rounded once to f32: table[position * half + p] = (cos, sin).
// One invocation per pair of a [tokens, heads, head_dim] tensor; src and dst do not alias.
// A position past the table's rows writes nothing (the op refuses such sizes before dispatch).
const WG: u32 = 256u;

struct Params {
  tokens: u32,
  heads: u32,
  half: u32,
  pos: u32,
  table_rows: u32,
}

@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read> table: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.y * (groups.x * WG) + gid.x;
  if (i >= params.tokens * params.heads * params.half) {
    return;
  }
  let p = i % params.half;
  let row = i / params.half;                  // token * heads + head
  let position = params.pos + row / params.heads;
  if (position >= params.table_rows) {
    return;
  }
  let rotation = table[position * params.half + p];
  $if LAYOUT == "interleaved":
    let ia = row * 2u * params.half + 2u * p;
    let ib = ia + 1u;
  $else:
    let ia = row * 2u * params.half + p;
    let ib = ia + params.half;
  let a = src[ia];
  let b = src[ib];
  dst[ia] = a * rotation.x - b * rotation.y;
  dst[ib] = a * rotation.y + b * rotation.x;
}
