// Causal attention in one pass with an online softmax, never materializing the scores, for one exact
// geometry per variant: G = ${G} query heads per KV head, head_dim D = ${D}. A workgroup of WG
// invocations owns ROWS = T x G query rows (T = ${T} consecutive tokens x the G heads of one KV head;
// row r is token r / G, head r % G) and walks the keys in tiles of KT = ${KT}, up to its last token's
// causal bound: per tile, K and then V are staged in workgroup memory (one buffer, padded rows) and
// shared by the rows. Each of the SUB = WG / ROWS invocations of a row holds DIMS = D / SUB of its
// query's dims in registers and dots them with every key of the tile (each K word read once, no query
// read from workgroup memory); the row's first invocation adds the SUB partial dots and updates its
// online softmax (running max m, sum l, rescale alpha), and each invocation accumulates its DIMS output
// dims in registers, a V word (two dims) per load. Grid: (ceil(tokens / T), Hkv).
// The cache is f16 packed two per u32, [capacity, Hkv, D / 2]; q and out are [tokens, Hq, D].
const WG: u32 = ${WG}u;
const G: u32 = ${G}u;
const D: u32 = ${D}u;
const T: u32 = ${T}u;
const KT: u32 = ${KT}u;
const ROWS: u32 = T * G;
const SUB: u32 = WG / ROWS;           // invocations per row
const DIMS: u32 = D / SUB;            // query and output dims each invocation holds
const HALF: u32 = D / 2u;
const PITCH: u32 = HALF + 1u;         // a staged row's words (padded: columns spread over banks)
const NEG: f32 = -0x1.fffffep+127f;

struct Params {
  tokens: u32,
  heads: u32,
  kv_heads: u32,
  head_dim: u32,
  pos: u32,
  ctx: u32,
  scale: f32,
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k_cache: array<u32>;
@group(0) @binding(2) var<storage, read> v_cache: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;

// Key-major, so the invocations of a warp (consecutive rows and subs) touch consecutive words.
var<workgroup> dots: array<f32, KT * WG>;               // [key, row, sub]: the partial dot products
var<workgroup> tile_rows: array<u32, KT * PITCH>;   // the tile's K rows, then its V rows
var<workgroup> probs: array<f32, KT * ROWS>;      // [key, row]
var<workgroup> run_m: array<f32, ROWS>;
var<workgroup> run_l: array<f32, ROWS>;
var<workgroup> alpha: array<f32, ROWS>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let tid = lid.x;
  let kv = wid.y;
  let t0 = wid.x * T;
  let row = tid / SUB;
  let sub = tid % SUB;
  let token = t0 + row / G;
  let head = kv * G + row % G;
  let live = token < params.tokens;
  let stride = params.kv_heads * HALF;
  var qd: array<f32, DIMS>;                                  // this invocation's query dims
  for (var e = 0u; e < DIMS; e++) {
    qd[e] = select(0.0, q[(min(token, params.tokens - 1u) * params.heads + head) * D + sub * DIMS + e], live);
  }
  if (sub == 0u) {
    run_m[row] = NEG;
    run_l[row] = 0.0;
  }
  var acc: array<f32, DIMS>;
  let last = params.pos + min(t0 + T, params.tokens) - 1u;    // the group's last key
  let bound = params.pos + token;                            // this row's last key
  let word0 = sub * DIMS / 2u;                               // this invocation's first word of a row
  for (var tile = 0u; tile <= last; tile += KT) {
    let n = min(KT, last + 1u - tile);
    // Constant trip counts: the loads of a loop can all be in flight before the first is used.
    for (var u = 0u; u < KT * HALF / WG; u++) {
      let i = tid + u * WG;
      if (i < n * HALF) {
        tile_rows[(i / HALF) * PITCH + i % HALF] = k_cache[(tile + i / HALF) * stride + kv * HALF + i % HALF];
      }
    }
    workgroupBarrier();
    for (var j = 0u; j < KT; j++) {
      var dot = 0.0;
      for (var w = 0u; w < DIMS / 2u; w++) {
        let pair = unpack2x16float(tile_rows[j * PITCH + word0 + w]);
        dot += qd[2u * w] * pair.x + qd[2u * w + 1u] * pair.y;
      }
      dots[(j * ROWS + row) * SUB + sub] = dot;
    }
    workgroupBarrier();
    if (sub == 0u) {
      var scores: array<f32, KT>;
      var m = run_m[row];
      for (var j = 0u; j < KT; j++) {
        var dot = 0.0;
        for (var s = 0u; s < SUB; s++) {
          dot += dots[(j * ROWS + row) * SUB + s];
        }
        scores[j] = select(NEG, dot * params.scale, j < n && tile + j <= bound && live);
        m = max(m, scores[j]);
      }
      var sum = 0.0;
      for (var j = 0u; j < KT; j++) {
        let p = select(0.0, exp(scores[j] - m), scores[j] > NEG);
        probs[j * ROWS + row] = p;
        sum += p;
      }
      let a = select(0.0, exp(run_m[row] - m), run_m[row] > NEG);
      alpha[row] = a;
      run_l[row] = run_l[row] * a + sum;
      run_m[row] = m;
    }
    for (var u = 0u; u < KT * HALF / WG; u++) {
      let i = tid + u * WG;
      if (i < n * HALF) {
        tile_rows[(i / HALF) * PITCH + i % HALF] = v_cache[(tile + i / HALF) * stride + kv * HALF + i % HALF];
      }
    }
    workgroupBarrier();
    let a = alpha[row];
    for (var e = 0u; e < DIMS; e++) {
      acc[e] *= a;
    }
    for (var j = 0u; j < n; j++) {
      let p = probs[j * ROWS + row];
      for (var w = 0u; w < DIMS / 2u; w++) {
        let pair = unpack2x16float(tile_rows[j * PITCH + word0 + w]);
        acc[2u * w] += p * pair.x;
        acc[2u * w + 1u] += p * pair.y;
      }
    }
    workgroupBarrier();
  }
  if (live) {
    let l = run_l[row];
    for (var e = 0u; e < DIMS; e++) {
      out[(token * params.heads + head) * D + sub * DIMS + e] = acc[e] / l;
    }
  }
}
