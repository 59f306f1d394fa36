// FlashDecoding's split pass on subgroups, for one live token at position ctx - 1, exactly G = ${G}
// query heads per KV head and head_dim at most ${8 * 4 * W} (a multiple of 8). One workgroup per
// (split, KV head), its keys [split * chunk, min(ctx, (split + 1) * chunk)). Nothing is staged and the
// key loop has no barrier: each key belongs to LANES = 4 invocations of one subgroup (WebGPU's
// narrowest), each holding W vec4 words (8 f16 values each) of the K row and of the V row, loaded
// together, the queries of all G heads for those dims in registers. The four partial dot products
// meet in two subgroup shuffles; each group of four (a slot) keeps its own online softmax in base 2
// (the queries carry scale * log2(e)) over its keys and U keys per step. After the loop the slots
// rescale to the workgroup's maximum, sum by shuffles within a subgroup, then subgroup by subgroup in
// workgroup memory; the partial (m, l) and unnormalized output o go to scratch [q head, split] for
// sdpa_flash_reduce, as the workgroup-memory split pass writes them.
enable subgroups;

const WG: u32 = 128u;
const LANES: u32 = 4u;                  // invocations per key
const SLOTS: u32 = WG / LANES;          // keys in flight per step, U each
const G: u32 = ${G}u;
const W: u32 = ${W}u;                   // words per lane: lane part p holds row words p, p + 4, ...
const U: u32 = ${U}u;
const ROW: u32 = 8u * LANES * W;        // dims a row may have
const MAX_SUBGROUPS: u32 = WG / 4u;     // at the narrowest subgroups
const NEG: f32 = -0x1.fffffep+127f;     // an empty running max: exp2(NEG - m) is 0 for any real m
alias Heads = vec${G}<f32>;             // a value per query head of the KV head

struct Params {
  kv_heads: u32,
  group: u32,
  head_dim: u32,
  ctx: u32,             // keys in the cache: the live position + 1
  chunk: u32,           // keys per split
  splits: u32,
  scale: f32,           // scale * log2(e)
  steps: u32,           // ceil(chunk / (SLOTS * U)): the same trip count for every slot
}

@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> k_cache: array<vec4<u32>>;   // four f16 pairs a word
@group(0) @binding(2) var<storage, read> v_cache: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> part_ml: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read_write> part_o: array<f32>;
@group(0) @binding(5) var<uniform> params: Params;

var<workgroup> tickets: atomic<u32>;                       // WGSL has no subgroup index: subgroups take one
var<workgroup> subgroup_max: array<Heads, MAX_SUBGROUPS>;
var<workgroup> total_o: array<f32, G * ROW>;               // [head, dim]
var<workgroup> total_l: Heads;

fn low_half(word: vec4<u32>) -> vec4<f32> {
  return vec4<f32>(unpack2x16float(word.x), unpack2x16float(word.y));
}

fn high_half(word: vec4<u32>) -> vec4<f32> {
  return vec4<f32>(unpack2x16float(word.z), unpack2x16float(word.w));
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) index: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(subgroup_invocation_id) lane: u32, @builtin(subgroup_size) width: u32) {
  let split = wid.x;
  let kv = wid.y;
  let words = params.head_dim / 8u;
  let stride = params.kv_heads * words;               // words between consecutive keys
  let part = lane % LANES;
  // Zeroed here, not trusted to start zeroed (lavapipe reuses one workgroup's memory for the next).
  if (index == 0u) {
    atomicStore(&tickets, 0u);
    total_l = Heads(0.0);
  }
  for (var i = index; i < G * ROW; i += WG) {
    total_o[i] = 0.0;
  }
  workgroupBarrier();
  var ticket = 0u;
  if (lane == 0u) {                                 // every subgroup is full, so lane 0 is there
    ticket = atomicAdd(&tickets, 1u);
  }
  let order = subgroupBroadcastFirst(ticket);
  let slots_here = width / LANES;                     // every subgroup is full: WG is a multiple of its width
  let slot = order * slots_here + lane / LANES;

  // qs[(g * W + i) * 2 + half]: head g's dims of word part + LANES * i (zero past the row, so the
  // clamped load there adds nothing)
  var qs: array<vec4<f32>, 2u * G * W>;
  for (var g = 0u; g < G; g++) {
    for (var i = 0u; i < W; i++) {
      let word = part + LANES * i;
      let at = 2u * ((kv * G + g) * words + min(word, words - 1u));
      let inside = word < words;
      qs[(g * W + i) * 2u] = select(vec4<f32>(0.0), q[at] * params.scale, inside);
      qs[(g * W + i) * 2u + 1u] = select(vec4<f32>(0.0), q[at + 1u] * params.scale, inside);
    }
  }

  let first = split * params.chunk;
  let end = min(params.ctx, first + params.chunk);
  var m = Heads(NEG);
  var l = Heads(0.0);
  var acc: array<vec4<f32>, 2u * G * W>;
  for (var step = 0u; step < params.steps; step++) {
    // Every load of the step before any use: one memory latency per step, not one per key.
    var k_words: array<vec4<u32>, U * W>;
    var v_words: array<vec4<u32>, U * W>;
    for (var u = 0u; u < U; u++) {
      let key = first + (step * U + u) * SLOTS + slot;
      let row = min(key, end - 1u) * stride + kv * words;
      for (var i = 0u; i < W; i++) {
        let word = min(part + LANES * i, words - 1u);
        k_words[u * W + i] = k_cache[row + word];
        v_words[u * W + i] = v_cache[row + word];
      }
    }
    var scores: array<Heads, U>;
    var m_new = m;
    for (var u = 0u; u < U; u++) {
      var dots = Heads(0.0);
      for (var i = 0u; i < W; i++) {
        let lo = low_half(k_words[u * W + i]);
        let hi = high_half(k_words[u * W + i]);
        $for g in range(G):
          dots[${g}] += dot(qs[(${g}u * W + i) * 2u], lo) + dot(qs[(${g}u * W + i) * 2u + 1u], hi);
      }
      dots += subgroupShuffleXor(dots, 1u);
      dots += subgroupShuffleXor(dots, 2u);
      let key = first + (step * U + u) * SLOTS + slot;
      scores[u] = select(Heads(NEG), dots, key < end);
      m_new = max(m_new, scores[u]);
    }
    let alpha = exp2(m - m_new);
    l *= alpha;
    $for g in range(G):
      for (var j = 0u; j < 2u * W; j++) {
        acc[${g}u * 2u * W + j] *= alpha[${g}];
      }
    for (var u = 0u; u < U; u++) {
      let key = first + (step * U + u) * SLOTS + slot;
      let p = select(Heads(0.0), exp2(scores[u] - m_new), key < end);
      l += p;
      for (var i = 0u; i < W; i++) {
        let lo = low_half(v_words[u * W + i]);
        let hi = high_half(v_words[u * W + i]);
        $for g in range(G):
          acc[(${g}u * W + i) * 2u] += p[${g}] * lo;
          acc[(${g}u * W + i) * 2u + 1u] += p[${g}] * hi;
      }
    }
    m = m_new;
  }

  // The workgroup's maximum per head, from each subgroup's.
  let mine = subgroupMax(m);
  if (lane == 0u) {
    subgroup_max[order] = mine;
  }
  workgroupBarrier();
  let subgroups = WG / width;
  var top = Heads(NEG);
  for (var r = 0u; r < subgroups; r++) {
    top = max(top, subgroup_max[r]);
  }
  let rescale = exp2(m - top);
  l *= rescale;
  $for g in range(G):
    for (var j = 0u; j < 2u * W; j++) {
      acc[${g}u * 2u * W + j] *= rescale[${g}];
    }
  // Sum the subgroup's slots (lanes with the same part): afterwards every slot holds the totals.
  for (var mask = LANES; mask < width; mask <<= 1u) {
    l += subgroupShuffleXor(l, mask);
    for (var j = 0u; j < 2u * G * W; j++) {
      acc[j] += subgroupShuffleXor(acc[j], mask);
    }
  }
  // Subgroup by subgroup into workgroup memory; within one, head g is written by slot g % slots_here.
  let slot_here = lane / LANES;
  for (var r = 0u; r < subgroups; r++) {
    if (order == r) {
      $for g in range(G):
        if (${g}u % slots_here == slot_here) {
          for (var i = 0u; i < W; i++) {
            let word = part + LANES * i;
            if (word < words) {
              for (var c = 0u; c < 4u; c++) {
                total_o[${g}u * ROW + 8u * word + c] += acc[(${g}u * W + i) * 2u][c];
                total_o[${g}u * ROW + 8u * word + 4u + c] += acc[(${g}u * W + i) * 2u + 1u][c];
              }
            }
          }
        }
      if (lane == 0u) {
        total_l += l;
      }
    }
    workgroupBarrier();
  }
  let dim = params.head_dim;
  for (var i = index; i < G * dim; i += WG) {
    let g = i / dim;
    part_o[((kv * G + g) * params.splits + split) * dim + i % dim] = total_o[g * ROW + i % dim];
  }
  if (index < G) {
    part_ml[(kv * G + index) * params.splits + split] = vec2<f32>(top[index], total_l[index]);
  }
}
