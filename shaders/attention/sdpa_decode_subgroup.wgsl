// A decode step's attention in one pass on subgroups, for one live token at position ctx - 1 and short
// contexts (py_runtime/ops/attention.py: the route sdpa_decode_subgroup runs where every key fits its
// reach; FlashDecoding's two passes beyond it). One workgroup per query head walks every key of its KV
// head, so there is no partial to write and no reduce pass to wait for: K/V rows shared by a KV head's
// G query heads are read once from memory and then from L2. As sdpa_flash_subgroup.wgsl's split pass:
// a key belongs to LANES = 4 invocations of one subgroup (WebGPU's narrowest), each holding W vec4 words
// (8 f16 values each) of the K row and of the V row and the query's dims for them in registers; the
// four partial dots meet in two shuffles; each slot keeps its own online softmax in base 2 (the query
// carries scale * log2(e)) over keys slot, slot + SLOTS, ..., U per step${", the next step's words
// loading while this step's are used" if PF else ""}. After the loop the slots rescale to the
// workgroup's maximum and sum, by shuffles within a subgroup and then in workgroup memory; the head's
// row is normalized and written${", and quantized to int8 for the int8x o-proj" if QUANT else ""}.
// The cache is read ${"in shader-f16's types" if KV_F16 else "as f16 pairs packed in u32"} (f16_words.wgsli).
enable subgroups;
$if KV_F16:
  enable f16;

const WG: u32 = ${WG}u;
const LANES: u32 = 4u;                  // invocations per slot
const SLOTS: u32 = WG / LANES;          // keys per step, U each
const KEYS: u32 = SLOTS;                // (kv_step_words.wgsli's name)
const W: u32 = ${W}u;                   // words per lane: lane part p holds row words p, p + 4, ...
const U: u32 = ${U}u;
const ROW: u32 = 8u * LANES * W;        // dims a row may have
const ROWS: u32 = 8u;                   // subgroup sums held at once in workgroup memory
const MAX_SUBGROUPS: u32 = WG / 4u;     // at the narrowest subgroups
const NEG: f32 = -0x1.fffffep+127f;     // an empty running max: exp2(NEG - m) is 0 for any real m

struct Params {
  heads: u32,
  kv_heads: u32,
  head_dim: u32,
  ctx: u32,             // keys in the cache (the live position + 1), less the GPU-side offset
  scale: f32,           // scale * log2(e)
  $if QUANT:
    row: u32,           // heads * head_dim: the quantized row's length
    group_size: u32,
}

@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> k_cache: array<KVWord>;   // four f16 pairs a word (f16_words.wgsli)
@group(0) @binding(2) var<storage, read> v_cache: array<KVWord>;
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> offset: array<u32>;
@group(0) @binding(5) var<uniform> params: Params;
$if QUANT:
  @group(0) @binding(6) var<storage, read_write> act_words: array<u32>;
  @group(0) @binding(7) var<storage, read_write> act_stats: array<vec2<f32>>;

$include subgroup_order.wgsli
var<workgroup> subgroup_max: array<f32, MAX_SUBGROUPS>;
var<workgroup> sums: array<f32, ROWS * ROW>;             // [subgroup % ROWS, dim]
var<workgroup> sums_l: array<f32, ROWS>;
var<workgroup> head_out: array<vec4<f32>, ROW / 4u>;
$if QUANT:
  var<workgroup> partial: array<f32, WG>;                // (every invocation writes its entry)
  var<workgroup> chunk_sums: array<i32, WG + 3u>;

  $include int8_quant.wgsli

  $include int8_head_quant.wgsli

$include f16_words.wgsli

$include kv_step_words.wgsli

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) index: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(subgroup_invocation_id) lane: u32, @builtin(subgroup_size) width: u32) {
  let h = wid.x;
  let kv = h / (params.heads / params.kv_heads);
  let ctx = params.ctx + offset[0];
  let steps = (ctx + SLOTS * U - 1u) / (SLOTS * U);
  let words = params.head_dim / 8u;
  let part = lane % LANES;
  let order = subgroup_order(index, lane);
  let slot = order * (width / LANES) + lane / LANES;

  $if PF:
    var next = load_step(0u, slot, part, 0u, ctx, kv);
  // qs[2 i + half]: the query's dims of word part + LANES * i (zero past the row, so the clamped load
  // there adds nothing)
  var qs: array<vec4<f32>, 2u * W>;
  for (var i = 0u; i < W; i++) {
    let word = part + LANES * i;
    let at = 2u * (h * words + min(word, words - 1u));
    let inside = word < words;
    qs[2u * i] = select(vec4<f32>(0.0), q[at] * params.scale, inside);
    qs[2u * i + 1u] = select(vec4<f32>(0.0), q[at + 1u] * params.scale, inside);
  }

  var m = NEG;
  var l = 0.0;
  var acc: array<vec4<f32>, 2u * W>;
  for (var step = 0u; step < steps; step++) {
    $if PF:
      let now = next;
      next = load_step(min(step + 1u, steps - 1u), slot, part, 0u, ctx, kv);
    $else:
      let now = load_step(step, slot, part, 0u, ctx, kv);
    var scores: array<f32, U>;
    var m_new = m;
    for (var u = 0u; u < U; u++) {
      var dot_ = 0.0;
      for (var i = 0u; i < W; i++) {
        dot_ += dot(qs[2u * i], low_half(now.k[u * W + i])) + dot(qs[2u * i + 1u], high_half(now.k[u * W + i]));
      }
      dot_ += subgroupShuffleXor(dot_, 1u);
      dot_ += subgroupShuffleXor(dot_, 2u);
      let key = (step * U + u) * SLOTS + slot;
      scores[u] = select(NEG, dot_, key < ctx);
      m_new = max(m_new, scores[u]);
    }
    let alpha = exp2(m - m_new);
    l *= alpha;
    for (var j = 0u; j < 2u * W; j++) {
      acc[j] *= alpha;
    }
    for (var u = 0u; u < U; u++) {
      let key = (step * U + u) * SLOTS + slot;
      let p = select(0.0, exp2(scores[u] - m_new), key < ctx);
      l += p;
      for (var i = 0u; i < W; i++) {
        acc[2u * i] += p * low_half(now.v[u * W + i]);
        acc[2u * i + 1u] += p * high_half(now.v[u * W + i]);
      }
    }
    m = m_new;
  }

  // The workgroup's maximum: the subgroup's, then over the subgroups.
  let subgroups = WG / width;
  let mine = subgroupMax(m);
  if (lane == 0u) {
    subgroup_max[order] = mine;
  }
  workgroupBarrier();
  var top = NEG;
  for (var r = 0u; r < subgroups; r++) {
    top = max(top, subgroup_max[r]);
  }
  let rescale = exp2(m - top);
  l *= rescale;
  for (var j = 0u; j < 2u * W; j++) {
    acc[j] *= rescale;
  }
  // Sum the subgroup's slots (lanes LANES apart hold the same dims): afterwards every slot holds them.
  for (var mask = LANES; mask < width; mask <<= 1u) {
    l += subgroupShuffleXor(l, mask);
    for (var j = 0u; j < 2u * W; j++) {
      acc[j] += subgroupShuffleXor(acc[j], mask);
    }
  }
  // Into workgroup memory by the subgroup's first slot, ROWS subgroups at a time (one round at 32-wide
  // subgroups and 256 invocations): round 0 sets a row, later rounds add to it.
  let rounds = (subgroups + ROWS - 1u) / ROWS;
  for (var r = 0u; r < rounds; r++) {
    if (order / ROWS == r && lane < LANES) {
      let at = (order % ROWS) * ROW;
      for (var i = 0u; i < W; i++) {
        let word = part + LANES * i;
        if (word < words) {
          for (var e = 0u; e < 4u; e++) {
            let lo = at + 8u * word + e;
            sums[lo] = select(sums[lo], 0.0, r == 0u) + acc[2u * i][e];
            sums[lo + 4u] = select(sums[lo + 4u], 0.0, r == 0u) + acc[2u * i + 1u][e];
          }
        }
      }
      if (part == 0u) {
        sums_l[order % ROWS] = select(sums_l[order % ROWS], 0.0, r == 0u) + l;
      }
    }
    workgroupBarrier();
  }
  let used = min(subgroups, ROWS);
  let quads = params.head_dim / 4u;
  if (index < quads) {
    var total = vec4<f32>(0.0);
    var total_l = 0.0;
    for (var r = 0u; r < used; r++) {
      let at = r * ROW + 4u * index;
      total += vec4<f32>(sums[at], sums[at + 1u], sums[at + 2u], sums[at + 3u]);
      total_l += sums_l[r];
    }
    out[h * quads + index] = total / total_l;
    head_out[index] = total / total_l;
  }
  $if QUANT:
    workgroupBarrier();
    let o = min(index, params.head_dim / 8u - 1u);
    quantize_head(h, index, head_out[2u * o], head_out[2u * o + 1u]);
}
