// Causal attention for a prefill in one pass on subgroups, with an online softmax, for any G = Hq / Hkv
// and head_dim D = ${8 * SUB * W} exactly. A query row (a token's head) belongs to SUB = ${SUB} invocations of
// one subgroup, each holding W = ${W} vec4 words (8 f16 dims each) of its query, pre-scaled, and of its
// output in registers: lane part p has row words p, p + SUB, ... Nothing is staged and nothing waits on a
// barrier: every row of a subgroup reads the same key's words at once (one KV head per workgroup), so
// the loads broadcast; the SUB partial dots meet in log2(SUB) subgroup shuffles, after which every lane
// of the row holds the same score and runs the same base-2 online softmax. U = ${U} keys per step${", the
// next step's words loading while this step's are used" if PF else ""}. A workgroup owns T = ROWS / G
// consecutive tokens x the G heads of one KV head and walks the keys up to its last token's causal
// bound (rows mask the keys past their own); the token tiles run from the last (the longest walks)
// to the first, so the short ones fill in at the end. Grid: (ceil(tokens / T), Hkv).
$if KS > 1:
  // The walk is latency-bound (a step's loads, dots, shuffles, exp2 and sums depend on each other), so
  // each row has KS = ${KS} slots of SUB invocations, slot k taking steps k, k + KS, ...: KS times the
  // invocations in flight, each with a KS-th of the chain. Every slot runs the same trip count (steps
  // past the end are masked), so control flow stays uniform; at the end the KS partial (m, l, o) of a
  // row meet in workgroup memory (a row's slots may sit in one subgroup or several: any width works).
// The cache is f16 pairs, [capacity, Hkv, D / 2]${", read in shader-f16's types" if KV_F16 else " packed in u32"}; q and out are
// [tokens, Hq, D], f32.
enable subgroups;
$if KV_F16:
  enable f16;

const WG: u32 = ${WG}u;
const SUB: u32 = ${SUB}u;               // invocations per row
const W: u32 = ${W}u;                   // vec4 words per invocation
const U: u32 = ${U}u;                   // keys per step
const D: u32 = ${8 * SUB * W}u;
const WORDS: u32 = D / 8u;              // vec4 words per cache row
const KS: u32 = ${KS}u;                 // slots per row, each a share of the keys
const ROWS: u32 = WG / SUB / KS;
const NEG: f32 = -0x1.fffffep+127f;     // an empty running max: exp2(NEG - m) is 0 for any real m

struct Params {
  tokens: u32,
  heads: u32,
  kv_heads: u32,
  head_dim: u32,
  pos: u32,             // the first token's position
  ctx: u32,             // pos + tokens
  scale: f32,           // scale * log2(e)
}

@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> k_cache: array<KVWord>;   // four f16 pairs a word (f16_words.wgsli)
@group(0) @binding(2) var<storage, read> v_cache: array<KVWord>;
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(4) var<uniform> params: Params;

$include subgroup_order.wgsli
$if KS > 1:
  var<workgroup> split_o: array<vec4<f32>, KS * ROWS * D / 4u>;   // [split, row, dim / 4]
  var<workgroup> split_ml: array<vec2<f32>, KS * ROWS>;           // [split, row]

$include f16_words.wgsli

struct Words {
  k: array<KVWord, U * W>,
  v: array<KVWord, U * W>,
}

// This lane's words of keys [first, first + U) (a key past `last` reads `last`'s words: it is masked).
fn load_step(first: u32, last: u32, part: u32, kv: u32) -> Words {
  var loaded: Words;
  $for u in range(U):
    {
      let row = min(first + ${u}u, last) * params.kv_heads * WORDS + kv * WORDS;
      $for i in range(W):
        loaded.k[${u * W + i}u] = k_cache[row + part + ${i}u * SUB];
        loaded.v[${u * W + i}u] = v_cache[row + part + ${i}u * SUB];
    }
  return loaded;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) index: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) grid: vec3<u32>, @builtin(subgroup_invocation_id) lane: u32,
        @builtin(subgroup_size) width: u32) {
  let kv = wid.y;
  let g = params.heads / params.kv_heads;
  let per_tile = ROWS / g;                          // tokens per workgroup
  let t0 = (grid.x - 1u - wid.x) * per_tile;        // the last token tile first
  let order = subgroup_order(index, lane);
  let slot = order * (width / SUB) + lane / SUB;
  let split = slot % KS;                            // this slot's share of the steps
  let row = slot / KS;
  let part = lane % SUB;
  let token = t0 + row / g;
  let live = row < per_tile * g && token < params.tokens;
  let head = kv * g + row % g;
  let at = (min(token, params.tokens - 1u) * params.heads + min(head, params.heads - 1u)) * 2u * WORDS;
  var qs: array<vec4<f32>, 2u * W>;                 // [word i, half]: dims 8 (part + SUB i) ..
  $for i in range(W):
    qs[${2 * i}u] = select(vec4<f32>(0.0), q[at + 2u * (part + ${i}u * SUB)] * params.scale, live);
    qs[${2 * i + 1}u] = select(vec4<f32>(0.0), q[at + 2u * (part + ${i}u * SUB) + 1u] * params.scale, live);
  let bound = params.pos + token;                   // this row's last key
  let last = params.pos + min(t0 + per_tile, params.tokens) - 1u;   // the workgroup's last key
  let rounds = (last / U + KS) / KS;                // steps (last / U + 1) per subgroup, rounded up
  var m = NEG;
  var l = 0.0;
  var acc: array<vec4<f32>, 2u * W>;
  $if PF:
    var next = load_step(min(split * U, last), last, part, kv);
  for (var round = 0u; round < rounds; round++) {
    let first = (round * KS + split) * U;          // past `last`: every key masked
    $if PF:
      let now = next;
      next = load_step(min(first + KS * U, last), last, part, kv);
    $else:
      let now = load_step(first, last, part, kv);
    var scores: array<f32, U>;
    var m_new = m;
    $for u in range(U):
      {
        var s = 0.0;
        $for i in range(W):
          s += dot(qs[${2 * i}u], low_half(now.k[${u * W + i}u])) + dot(qs[${2 * i + 1}u], high_half(now.k[${u * W + i}u]));
        $for level in range(5):
          $if (1 << level) < SUB:
            s += subgroupShuffleXor(s, ${1 << level}u);
        scores[${u}u] = select(NEG, s, first + ${u}u <= bound);
        m_new = max(m_new, scores[${u}u]);
      }
    let alpha = exp2(m - m_new);
    l *= alpha;
    $for j in range(2 * W):
      acc[${j}u] *= alpha;
    $for u in range(U):
      {
        let p = select(0.0, exp2(scores[${u}u] - m_new), first + ${u}u <= bound);
        l += p;
        $for i in range(W):
          acc[${2 * i}u] += p * low_half(now.v[${u * W + i}u]);
          acc[${2 * i + 1}u] += p * high_half(now.v[${u * W + i}u]);
      }
    m = m_new;
  }
  $if KS > 1:
    // The KS shares of each row meet: rescale each to the row's maximum, add, divide once.
    let here = split * ROWS + row;
    split_ml[here] = vec2<f32>(m, l);
    $for i in range(W):
      split_o[here * (D / 4u) + 2u * (part + ${i}u * SUB)] = acc[${2 * i}u];
      split_o[here * (D / 4u) + 2u * (part + ${i}u * SUB) + 1u] = acc[${2 * i + 1}u];
    workgroupBarrier();
    if (split != 0u) {
      return;
    }
    var top = NEG;
    for (var k = 0u; k < KS; k++) {
      top = max(top, split_ml[k * ROWS + row].x);
    }
    l = 0.0;
    $for j in range(2 * W):
      acc[${j}u] = vec4<f32>(0.0);
    for (var k = 0u; k < KS; k++) {
      let share = split_ml[k * ROWS + row];
      let rescale = exp2(share.x - top);
      l += share.y * rescale;
      $for i in range(W):
        acc[${2 * i}u] += split_o[(k * ROWS + row) * (D / 4u) + 2u * (part + ${i}u * SUB)] * rescale;
        acc[${2 * i + 1}u] += split_o[(k * ROWS + row) * (D / 4u) + 2u * (part + ${i}u * SUB) + 1u] * rescale;
    }
  if (live) {
    $for i in range(W):
      out[at + 2u * (part + ${i}u * SUB)] = acc[${2 * i}u] / l;
      out[at + 2u * (part + ${i}u * SUB) + 1u] = acc[${2 * i + 1}u] / l;
  }
}
