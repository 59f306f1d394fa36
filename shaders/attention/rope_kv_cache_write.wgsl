// RoPE on a step's queries and keys fused with the KV cache write, ${LAYOUT} layout: one dispatch in
// place of rope(q), rope(k) and kv_cache_write${" (and Qwen3's per-head RMSNorm of q and k before them)" if NORM else ""}.
// For token t (position pos + t), a query or KV head r of heads + kv_heads and j < head_dim / 4, the
// two pairs of frequencies 2j and 2j + 1 are rotated with (cos, sin) from the host's float64 table (as
// rope.wgsl); a query head writes its four values to q_out (f32), a KV head packs its four rotated keys,
// and the same elements of v, as f16 pairs into the caches at row pos + t (cache word i holds elements
// 2i and 2i + 1, as kv_cache_write.wgsl).
$if LAYOUT == "interleaved":
  // Pairs (x[2p], x[2p + 1]): the two pairs are elements 4j..4j + 3, cache words 2j and 2j + 1.
$else:
  // Pairs (x[p], x[p + half]): the two pairs are elements (2j, 2j + 1) and (half + 2j, half + 2j + 1),
  // cache words j and half / 2 + j.
$if NORM:
  // One workgroup of WG invocations per (token, head) row: q or k is first normalized over the head,
  // x * inverseSqrt(mean(x^2) + eps) * w (rms_norm.wgsl's heads form; w the head_dim weight of q or k),
  // the sum of squares meeting in a workgroup tree; each invocation takes j = lane, lane + WG, ...
$else:
  // One invocation per (token, head, j).
// A position at or past the cache or the table writes nothing (the op refuses such sizes first). The pairs
// are ${"spelled vec2<f16>" if KV_F16 else "packed in u32"} (f16_pairs.wgsli).
$if KV_F16:
  enable f16;

const WG: u32 = ${32 if NORM else 256}u;

struct Params {
  tokens: u32,
  heads: u32,
  kv_heads: u32,
  half: u32,            // head_dim / 2
  pos: u32,             // the first token's position, less the cache's offset
  capacity: u32,        // cache rows
  table_rows: u32,
  $if NORM:
    eps: f32,
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read> table: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read_write> q_out: array<f32>;
@group(0) @binding(5) var<storage, read_write> k_cache: array<KVPair>;
@group(0) @binding(6) var<storage, read_write> v_cache: array<KVPair>;
@group(0) @binding(7) var<storage, read> offset: array<u32>;   // the cache's GPU-side position offset
@group(0) @binding(8) var<uniform> params: Params;
$if NORM:
  @group(0) @binding(9) var<storage, read> q_norm: array<f32>;
  @group(0) @binding(10) var<storage, read> k_norm: array<f32>;
  var<workgroup> squares: array<f32, WG>;

$include f16_pairs.wgsli

fn rotate(a: f32, b: f32, rotation: vec2<f32>) -> vec2<f32> {
  return vec2<f32>(a * rotation.x - b * rotation.y, a * rotation.y + b * rotation.x);
}

// The elements (e0, e0 + 1) and (e1, e1 + 1) of quarter j.
fn elements(j: u32) -> vec2<u32> {
  $if LAYOUT == "interleaved":
    return vec2<u32>(4u * j, 4u * j + 2u);
  $else:
    return vec2<u32>(2u * j, params.half + 2u * j);
}

// Row r's (q head, or KV head r - heads) four values of quarter j of token t: x[e0], x[e0 + 1],
// x[e1], x[e1 + 1].
fn load(t: u32, r: u32, j: u32) -> vec4<f32> {
  let dim = 2u * params.half;
  let e = elements(j);
  if (r < params.heads) {
    let base = (t * params.heads + r) * dim;
    return vec4<f32>(q[base + e.x], q[base + e.x + 1u], q[base + e.y], q[base + e.y + 1u]);
  }
  let base = (t * params.kv_heads + r - params.heads) * dim;
  return vec4<f32>(k[base + e.x], k[base + e.x + 1u], k[base + e.y], k[base + e.y + 1u]);
}

// Rotates x (load's four values, normalized where the variant norms) at `position` and stores it:
// q_out for a query head; for a KV head the cache's K words, and V's same elements.
fn rotate_store(t: u32, r: u32, j: u32, position: u32, x: vec4<f32>) {
  let first = table[position * params.half + 2u * j];
  let second = table[position * params.half + 2u * j + 1u];
  let dim = 2u * params.half;
  let e = elements(j);
  $if LAYOUT == "interleaved":
    let a = rotate(x.x, x.y, first);          // (e0, e0 + 1)
    let b = rotate(x.z, x.w, second);         // (e1, e1 + 1)
    let out = vec4<f32>(a, b);
  $else:
    let a = rotate(x.x, x.z, first);          // (e0, e1)
    let b = rotate(x.y, x.w, second);         // (e0 + 1, e1 + 1)
    let out = vec4<f32>(a.x, b.x, a.y, b.y);
  if (r < params.heads) {
    let base = (t * params.heads + r) * dim;
    q_out[base + e.x] = out.x;
    q_out[base + e.x + 1u] = out.y;
    q_out[base + e.y] = out.z;
    q_out[base + e.y + 1u] = out.w;
    return;
  }
  let h = r - params.heads;
  let base = (t * params.kv_heads + h) * dim;
  let row = (position * params.kv_heads + h) * params.half;
  k_cache[row + e.x / 2u] = kv_pair(out.xy);
  k_cache[row + e.y / 2u] = kv_pair(out.zw);
  v_cache[row + e.x / 2u] = kv_pair(vec2<f32>(v[base + e.x], v[base + e.x + 1u]));
  v_cache[row + e.y / 2u] = kv_pair(vec2<f32>(v[base + e.y], v[base + e.y + 1u]));
}

$if NORM:
  @compute @workgroup_size(WG)
  fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
          @builtin(local_invocation_index) lane: u32) {
    let all_heads = params.heads + params.kv_heads;
    let rows = wid.y * groups.x + wid.x;          // (token, head) rows: uniform across the workgroup
    let t = rows / all_heads;
    let r = rows % all_heads;
    let position = params.pos + offset[0] + t;
    if (t >= params.tokens || position >= params.capacity || position >= params.table_rows) {
      return;
    }
    let quarter = params.half / 2u;
    var acc = 0.0;
    for (var j = lane; j < quarter; j += WG) {
      let x = load(t, r, j);
      acc += dot(x, x);
    }
    squares[lane] = acc;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
      if (lane < stride) {
        squares[lane] += squares[lane + stride];
      }
      workgroupBarrier();
    }
    let scale = inverseSqrt(squares[0] / f32(2u * params.half) + params.eps);
    for (var j = lane; j < quarter; j += WG) {
      let e = elements(j);
      var w: vec4<f32>;
      if (r < params.heads) {
        w = vec4<f32>(q_norm[e.x], q_norm[e.x + 1u], q_norm[e.y], q_norm[e.y + 1u]);
      } else {
        w = vec4<f32>(k_norm[e.x], k_norm[e.x + 1u], k_norm[e.y], k_norm[e.y + 1u]);
      }
      rotate_store(t, r, j, position, load(t, r, j) * scale * w);
    }
  }
$else:
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
    rotate_store(t, r, j, position, load(t, r, j));
  }
