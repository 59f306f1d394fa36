// RoPE on a step's queries and keys fused with the KV cache write, ${LAYOUT} layout: one dispatch in
// place of rope(q), rope(k) and kv_cache_write. For token t (position pos + t), a query or KV head r of
// heads + kv_heads and j < head_dim / 4, an invocation rotates the two pairs of frequencies 2j and
// 2j + 1 with (cos, sin) from the host's float64 table (as rope.wgsl); a query head writes its four
// values to q_out (f32), a KV head packs its four rotated keys, and the same elements of v, as f16 pairs
// into the caches at row pos + t (cache word i holds elements 2i and 2i + 1, as kv_cache_write.wgsl).
$if LAYOUT == "interleaved":
  // Pairs (x[2p], x[2p + 1]): the two pairs are elements 4j..4j + 3, cache words 2j and 2j + 1.
$else:
  // Pairs (x[p], x[p + half]): the two pairs are elements (2j, 2j + 1) and (half + 2j, half + 2j + 1),
  // cache words j and half / 2 + j.
// A position at or past the cache or the table writes nothing (the op refuses such sizes first).
const WG: u32 = 256u;

struct Params {
  tokens: u32,
  heads: u32,
  kv_heads: u32,
  half: u32,            // head_dim / 2
  pos: u32,             // the first token's position, less the cache's offset
  capacity: u32,        // cache rows
  table_rows: u32,
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read> table: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read_write> q_out: array<f32>;
@group(0) @binding(5) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(6) var<storage, read_write> v_cache: array<u32>;
@group(0) @binding(7) var<storage, read> offset: array<u32>;   // the cache's GPU-side position offset
@group(0) @binding(8) var<uniform> params: Params;

fn rotate(a: f32, b: f32, rotation: vec2<f32>) -> vec2<f32> {
  return vec2<f32>(a * rotation.x - b * rotation.y, a * rotation.y + b * rotation.x);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.y * (groups.x * WG) + gid.x;
  let quarter = params.half / 2u;
  let all_heads = params.heads + params.kv_heads;
  if (i >= params.tokens * all_heads * quarter) {
    return;
  }
  let j = i % quarter;
  let r = (i / quarter) % all_heads;
  let t = i / (quarter * all_heads);
  let position = params.pos + offset[0] + t;
  if (position >= params.capacity || position >= params.table_rows) {
    return;
  }
  let first = table[position * params.half + 2u * j];
  let second = table[position * params.half + 2u * j + 1u];
  let dim = 2u * params.half;
  $if LAYOUT == "interleaved":
    let e0 = 4u * j;                  // the elements (e0, e0 + 1) and (e1, e1 + 1)
    let e1 = 4u * j + 2u;
  $else:
    let e0 = 2u * j;
    let e1 = params.half + 2u * j;
  if (r < params.heads) {
    let base = (t * params.heads + r) * dim;
    $if LAYOUT == "interleaved":
      let x = rotate(q[base + e0], q[base + e0 + 1u], first);
      let y = rotate(q[base + e1], q[base + e1 + 1u], second);
      q_out[base + e0] = x.x;
      q_out[base + e0 + 1u] = x.y;
      q_out[base + e1] = y.x;
      q_out[base + e1 + 1u] = y.y;
    $else:
      let x = rotate(q[base + e0], q[base + e1], first);
      let y = rotate(q[base + e0 + 1u], q[base + e1 + 1u], second);
      q_out[base + e0] = x.x;
      q_out[base + e1] = x.y;
      q_out[base + e0 + 1u] = y.x;
      q_out[base + e1 + 1u] = y.y;
    return;
  }
  let h = r - params.heads;
  let base = (t * params.kv_heads + h) * dim;
  let row = (position * params.kv_heads + h) * params.half;
  $if LAYOUT == "interleaved":
    let x = rotate(k[base + e0], k[base + e0 + 1u], first);
    let y = rotate(k[base + e1], k[base + e1 + 1u], second);
    k_cache[row + e0 / 2u] = pack2x16float(x);
    k_cache[row + e1 / 2u] = pack2x16float(y);
  $else:
    let x = rotate(k[base + e0], k[base + e1], first);
    let y = rotate(k[base + e0 + 1u], k[base + e1 + 1u], second);
    k_cache[row + e0 / 2u] = pack2x16float(vec2<f32>(x.x, y.x));
    k_cache[row + e1 / 2u] = pack2x16float(vec2<f32>(x.y, y.y));
  v_cache[row + e0 / 2u] = pack2x16float(vec2<f32>(v[base + e0], v[base + e0 + 1u]));
  v_cache[row + e1 / 2u] = pack2x16float(vec2<f32>(v[base + e1], v[base + e1 + 1u]));
}
