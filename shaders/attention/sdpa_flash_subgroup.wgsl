// FlashDecoding's split pass on subgroups, for one live token at position ctx - 1, exactly G = ${G}
// query heads per KV head and head_dim at most ${8 * 4 * W} (a multiple of 8). One workgroup per
// (split, KV head), its keys [split * chunk, min(ctx, (split + 1) * chunk)). Nothing is staged and the
// key loop has no barrier: a key belongs to LANES = 4 invocations of one subgroup (WebGPU's narrowest),
// each holding W vec4 words (8 f16 values each) of the K row and of the V row, loaded together, and the
// queries of its heads for those dims in registers; HS = ${HS} such groups (slots, side by side) share a
// key, each for G / HS of the heads (fewer registers; their loads are the same addresses). The four
// partial dot products meet in two subgroup shuffles; each slot keeps its own online softmax in base 2
// (the queries carry scale * log2(e)) over its keys, U = ${U} keys per step${", the next step's words
// loading while this step's are used" if PF else ""}. After the loop the slots rescale to the
// workgroup's maximum, sum by shuffles within a subgroup, then subgroup by subgroup in workgroup memory;
// the partial (m, l) and unnormalized output o go to scratch [q head, split] for sdpa_flash_reduce, as
// the workgroup-memory split pass writes them.
// The cache is read ${"in shader-f16's types" if KV_F16 else "as f16 pairs packed in u32"} (f16_words.wgsli).
enable subgroups;
$if KV_F16:
  enable f16;

const WG: u32 = ${WG}u;
const LANES: u32 = 4u;                  // invocations per slot
const SLOTS: u32 = WG / LANES;
const HS: u32 = ${HS}u;                 // slots per key
const KEYS: u32 = SLOTS / HS;           // keys per workgroup per step, U each
const G: u32 = ${G}u;
const GH: u32 = ${G // HS}u;            // heads per slot
const W: u32 = ${W}u;                   // words per lane: lane part p holds row words p, p + 4, ...
const U: u32 = ${U}u;
const ROW: u32 = 8u * LANES * W;        // dims a row may have
const MAX_SUBGROUPS: u32 = WG / 4u;     // at the narrowest subgroups
const NEG: f32 = -0x1.fffffep+127f;     // an empty running max: exp2(NEG - m) is 0 for any real m
alias Heads = ${"f32" if G // HS == 1 else "vec%d<f32>" % (G // HS)};   // a value per head of the slot

struct Params {
  kv_heads: u32,
  group: u32,
  head_dim: u32,
  ctx: u32,             // keys in the cache (the live position + 1), less the GPU-side offset
  max_splits: u32,      // splits wanted per KV head at long contexts
  step_keys: u32,       // KEYS * U
  scale: f32,           // scale * log2(e)
}

@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> k_cache: array<KVWord>;   // four f16 pairs a word (f16_words.wgsli)
@group(0) @binding(2) var<storage, read> v_cache: array<KVWord>;
@group(0) @binding(3) var<storage, read_write> part_ml: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read_write> part_o: array<f32>;
@group(0) @binding(5) var<storage, read> offset: array<u32>;
@group(0) @binding(6) var<uniform> params: Params;

var<workgroup> tickets: atomic<u32>;                       // WGSL has no subgroup index: subgroups take one
var<workgroup> subgroup_max: array<Heads, MAX_SUBGROUPS * HS>;   // [subgroup, head set]
var<workgroup> total_o: array<f32, G * ROW>;               // [head, dim]
var<workgroup> total_l: array<f32, G>;

// (ctx, keys per split, splits) at this step, as sdpa_flash_decode.wgsl's split_layout (the reduce
// pass derives the same): the position may live on the GPU, in offset[0].
fn split_layout() -> vec3<u32> {
  let ctx = params.ctx + offset[0];
  let wanted = max(1u, min(params.max_splits, (ctx + params.step_keys - 1u) / params.step_keys));
  let chunk = (ctx + wanted - 1u) / wanted;
  return vec3<u32>(ctx, chunk, (ctx + chunk - 1u) / chunk);
}

fn head(values: Heads, c: u32) -> f32 {
  $if G // HS == 1:
    return values;
  $else:
    return values[c];
}

$include f16_words.wgsli

$include kv_step_words.wgsli

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) index: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(subgroup_invocation_id) lane: u32, @builtin(subgroup_size) width: u32) {
  let split = wid.x;
  let kv = wid.y;
  let splitting = split_layout();
  let splits = splitting.z;
  if (split >= splits) {                            // sized for the longest context: empty now
    return;
  }
  let steps = (splitting.y + KEYS * U - 1u) / (KEYS * U);   // the same trip count for every slot
  let words = params.head_dim / 8u;
  let part = lane % LANES;
  // Set here, not trusted to start zeroed (lavapipe reuses one workgroup's memory for the next).
  if (index == 0u) {
    atomicStore(&tickets, 0u);
  }
  for (var i = index; i < G * ROW; i += WG) {
    total_o[i] = 0.0;
  }
  if (index < G) {
    total_l[index] = 0.0;
  }
  workgroupBarrier();
  var ticket = 0u;
  if (lane == 0u) {                                 // every subgroup is full (WG is a multiple of its width)
    ticket = atomicAdd(&tickets, 1u);
  }
  let order = subgroupBroadcastFirst(ticket);
  let slot_here = lane / LANES;
  let slot = order * (width / LANES) + slot_here;
  let head_set = slot % HS;                         // heads head_set * GH + c, c < GH
  let key_slot = slot / HS;

  // qs[(c * W + i) * 2 + half]: head c's dims of word part + LANES * i (zero past the row, so the
  // clamped load there adds nothing)
  var qs: array<vec4<f32>, 2u * GH * W>;
  for (var c = 0u; c < GH; c++) {
    for (var i = 0u; i < W; i++) {
      let word = part + LANES * i;
      let at = 2u * ((kv * G + head_set * GH + c) * words + min(word, words - 1u));
      let inside = word < words;
      qs[(c * W + i) * 2u] = select(vec4<f32>(0.0), q[at] * params.scale, inside);
      qs[(c * W + i) * 2u + 1u] = select(vec4<f32>(0.0), q[at + 1u] * params.scale, inside);
    }
  }

  let first = split * splitting.y;
  let end = min(splitting.x, first + splitting.y);
  var m = Heads(NEG);
  var l = Heads(0.0);
  var acc: array<vec4<f32>, 2u * GH * W>;
  $if PF:
    var next = load_step(0u, key_slot, part, first, end, kv);
  for (var step = 0u; step < steps; step++) {
    $if PF:
      let now = next;
      next = load_step(min(step + 1u, steps - 1u), key_slot, part, first, end, kv);
    $else:
      let now = load_step(step, key_slot, part, first, end, kv);
    var scores: array<Heads, U>;
    var m_new = m;
    for (var u = 0u; u < U; u++) {
      var dots = Heads(0.0);
      for (var i = 0u; i < W; i++) {
        let lo = low_half(now.k[u * W + i]);
        let hi = high_half(now.k[u * W + i]);
        $for c in range(G // HS):
          let d${c} = dot(qs[(${c}u * W + i) * 2u], lo) + dot(qs[(${c}u * W + i) * 2u + 1u], hi);
        dots += Heads(${"d0" if G // HS == 1 else "d0, d1" if G // HS == 2 else "d0, d1, d2" if G // HS == 3 else "d0, d1, d2, d3"});
      }
      dots += subgroupShuffleXor(dots, 1u);
      dots += subgroupShuffleXor(dots, 2u);
      let key = first + (step * U + u) * KEYS + key_slot;
      scores[u] = select(Heads(NEG), dots, key < end);
      m_new = max(m_new, scores[u]);
    }
    let alpha = exp2(m - m_new);
    l *= alpha;
    for (var c = 0u; c < GH; c++) {
      for (var j = 0u; j < 2u * W; j++) {
        acc[c * 2u * W + j] *= head(alpha, c);
      }
    }
    for (var u = 0u; u < U; u++) {
      let key = first + (step * U + u) * KEYS + key_slot;
      let p = select(Heads(0.0), exp2(scores[u] - m_new), key < end);
      l += p;
      for (var i = 0u; i < W; i++) {
        let lo = low_half(now.v[u * W + i]);
        let hi = high_half(now.v[u * W + i]);
        for (var c = 0u; c < GH; c++) {
          acc[(c * W + i) * 2u] += head(p, c) * lo;
          acc[(c * W + i) * 2u + 1u] += head(p, c) * hi;
        }
      }
    }
    m = m_new;
  }

  // The workgroup's maximum per head: within the subgroup across the slots of this head set (lanes
  // LANES * HS apart), then over the subgroups.
  var mine = m;
  for (var mask = LANES * HS; mask < width; mask <<= 1u) {
    mine = max(mine, subgroupShuffleXor(mine, mask));
  }
  if (slot_here < HS) {                             // one slot per head set (of each set this subgroup has)
    subgroup_max[order * HS + head_set] = mine;
  }
  workgroupBarrier();
  let subgroups = WG / width;
  var top = Heads(NEG);
  for (var r = 0u; r < subgroups; r++) {
    // (with HS slots per subgroup or more every set is written; with fewer, each subgroup writes its
    // own set, and the entries of a set a subgroup lacks are never read: width / LANES < HS means
    // subgroup r holds set r % HS only)
    if (width / LANES >= HS || r % HS == head_set) {
      top = max(top, subgroup_max[r * HS + head_set]);
    }
  }
  let rescale = exp2(m - top);
  l *= rescale;
  for (var c = 0u; c < GH; c++) {
    for (var j = 0u; j < 2u * W; j++) {
      acc[c * 2u * W + j] *= head(rescale, c);
    }
  }
  // Sum the subgroup's slots of each head set: afterwards every such slot holds the set's totals.
  for (var mask = LANES * HS; mask < width; mask <<= 1u) {
    l += subgroupShuffleXor(l, mask);
    for (var j = 0u; j < 2u * GH * W; j++) {
      acc[j] += subgroupShuffleXor(acc[j], mask);
    }
  }
  // Subgroup by subgroup into workgroup memory, by the first slot of each head set.
  for (var r = 0u; r < subgroups; r++) {
    if (order == r && slot_here < HS) {
      for (var c = 0u; c < GH; c++) {
        let g = head_set * GH + c;
        for (var i = 0u; i < W; i++) {
          let word = part + LANES * i;
          if (word < words) {
            for (var e = 0u; e < 4u; e++) {
              total_o[g * ROW + 8u * word + e] += acc[(c * W + i) * 2u][e];
              total_o[g * ROW + 8u * word + 4u + e] += acc[(c * W + i) * 2u + 1u][e];
            }
          }
        }
        if (part == 0u) {
          total_l[g] += head(l, c);
        }
      }
    }
    workgroupBarrier();
  }
  let dim = params.head_dim;
  for (var i = index; i < G * dim; i += WG) {
    let g = i / dim;
    part_o[((kv * G + g) * splits + split) * dim + i % dim] = total_o[g * ROW + i % dim];
  }
  // each head set's maxima and sums, from the part-0 lane of its first slot (slot == head set)
  if (slot < HS && part == 0u) {
    for (var c = 0u; c < GH; c++) {
      let g = head_set * GH + c;
      part_ml[(kv * G + g) * splits + split] = vec2<f32>(head(top, c), total_l[g]);
    }
  }
}
