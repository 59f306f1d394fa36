// FlashDecoding's split pass on subgroups, for one live token at position ctx - 1, exactly G = ${G}
// query heads per KV head and head_dim at most ${8 * 4 * W} (a multiple of 8). One workgroup per
// (split, KV head), its keys [split * chunk, min(ctx, (split + 1) * chunk)). Nothing is staged and the
// key loop has no barrier: a key belongs to LANES = 4 invocations of one subgroup (WebGPU's narrowest),
// each holding W vec4 words (8 f16 values each) of the K row and of the V row, loaded together, and the
// queries of its heads for those dims in registers; HS = ${HS} such groups (slots, side by side) share a
// key, each for G / HS of the heads (fewer registers; their loads are the same addresses). The four
// partial dot products meet in two subgroup shuffles; each slot keeps its own online softmax in base 2
// (the queries carry scale * log2(e)) over its keys, U = ${U} keys per step.
// ${"The next step's words load while this step's are used. " if PF else ""}After the loop the slots rescale to the
// workgroup's maximum, sum by shuffles within a subgroup, then subgroup by subgroup in workgroup memory.
$if not ONE:
  // The partial (m, l) and unnormalized output o go to scratch [q head, split] for sdpa_flash_reduce, as
  // the workgroup-memory split pass writes them.
$else:
  // One dispatch (sdpa_flash_one): the last workgroup of each KV head to finish also reduces its splits,
  // out = sum_s o_s 2^(m_s - M) / L with M = max m_s and L = sum_s l_s 2^(m_s - M) (the reduce pass's
  // arithmetic)${", and writes its heads' output quantized to int8 for the int8x o-proj (sdpa_flash_reduce_i8x's layout and arithmetic)" if QUANT else ""}.
  //
  // The handoff, with WGSL's relaxed atomics only (no release/acquire between workgroups):
  // - `partials` (u32, zeroed when created) holds arrivals[kv] for each KV head, a failure count at
  //   [kv_heads], then each KV head's block of partial words: every (m, l) of its G heads and splits,
  //   then every unnormalized output value. A workgroup stores each partial f32 sealed, its bits with
  //   the sign flipped after -0 becomes +0, so no stored word is 0: 0 means "not written yet".
  // - Then the workgroup takes a ticket: after a storage barrier (all its invocations' stores issued),
  //   one invocation atomicAdds arrivals[kv]. The workgroup that draws splits - 1 is the last of its KV
  //   head and reduces; the ticket reaches every invocation through workgroupUniformLoad, so the others
  //   return in uniform control flow.
  // - The reducer takes every partial word of its block with atomicExchange(word, 0): each location
  //   validates itself, since its only values are 0 and the one sealed word stored since it was last
  //   reset, so a nonzero word is the value, whatever order the stores became visible in. A word still
  //   0 is not visible yet and is exchanged again; a batch's words are all issued before any is
  //   checked, so the common path costs one memory round trip per batch. The reducer waits only on
  //   workgroups that already drew their tickets, i.e. that already issued their stores: never on a
  //   workgroup that is not yet scheduled. The wait is bounded (SPIN exchanges again per invocation,
  //   in all): past it the head's output is NaN and the failure count grows, a loud failure, not a
  //   hang; the words that never came may then land late, so after a failure the scratch is no longer
  //   trusted (the count stays for the host to read).
  // - The exchange leaves every word it read 0 and the reducer sets arrivals[kv] back to 0 (every other
  //   workgroup of the KV head has drawn its ticket by then), so the next dispatch (the API orders
  //   dispatches that write one buffer) starts clean. Splits past the live context (the grid is sized
  //   for the whole cache where the position lives on the GPU) return at once: they neither store nor
  //   draw a ticket, and the live splits are the ones the reducer waits for.
enable subgroups;

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
  $if QUANT:
    row: u32,           // heads * head_dim: the quantized row's length
    group_size: u32,
}

@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> k_cache: array<vec4<u32>>;   // four f16 pairs a word
@group(0) @binding(2) var<storage, read> v_cache: array<vec4<u32>>;
$if ONE:
  @group(0) @binding(3) var<storage, read_write> partials: array<atomic<u32>>;
  @group(0) @binding(4) var<storage, read_write> out: array<f32>;
  @group(0) @binding(5) var<storage, read> offset: array<u32>;
  @group(0) @binding(6) var<uniform> params: Params;
  $if QUANT:
    @group(0) @binding(7) var<storage, read_write> act_words: array<u32>;
    @group(0) @binding(8) var<storage, read_write> act_stats: array<vec2<f32>>;
$else:
  @group(0) @binding(3) var<storage, read_write> part_ml: array<vec2<f32>>;
  @group(0) @binding(4) var<storage, read_write> part_o: array<f32>;
  @group(0) @binding(5) var<storage, read> offset: array<u32>;
  @group(0) @binding(6) var<uniform> params: Params;

var<workgroup> tickets: atomic<u32>;                       // WGSL has no subgroup index: subgroups take one
var<workgroup> subgroup_max: array<Heads, MAX_SUBGROUPS * HS>;   // [subgroup, head set]
var<workgroup> total_o: array<f32, G * ROW>;               // [head, dim]${"; the reducer's output" if ONE else ""}
var<workgroup> total_l: array<f32, G>;

$if ONE:
  // The reducer's (the KV head's last workgroup)
  $if QUANT:
    const TOO_LARGE: f32 = 1.0e38;
    var<workgroup> peaks: array<f32, WG>;
    var<workgroup> chunk_sums: array<i32, WG>;
  const MAXS: u32 = 256u;               // splits per KV head at most: ops/attention.py MAX_SPLITS
  const PAIRS: u32 = (G * MAXS + WG - 1u) / WG;   // (m, l) pairs an invocation takes at most
  const OUTS: u32 = (G * ROW + WG - 1u) / WG;     // output values it sums at most
  const BATCH: u32 = 32u;               // splits of each of its outputs taken at once (one round trip)
  const SPIN: u32 = 65536u;             // exchanges again of words not yet visible, per invocation in all
  const FLIP: u32 = 0x80000000u;        // a sealed word is the f32's bits with the sign flipped
  var<workgroup> arrival: u32;          // the ticket this workgroup drew
  var<workgroup> head_top: array<atomic<u32>, G>;          // M per head, as an order key
  var<workgroup> failed: array<atomic<u32>, G>;            // a head with a word that never came
  var<workgroup> weights: array<vec2<f32>, G * MAXS>;      // [head, split]: (2^(m - M), l 2^(m - M))
  var<private> patience: u32 = SPIN;

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

fn low_half(word: vec4<u32>) -> vec4<f32> {
  return vec4<f32>(unpack2x16float(word.x), unpack2x16float(word.y));
}

fn high_half(word: vec4<u32>) -> vec4<f32> {
  return vec4<f32>(unpack2x16float(word.z), unpack2x16float(word.w));
}

struct Words {
  k: array<vec4<u32>, U * W>,
  v: array<vec4<u32>, U * W>,
}

// This lane's words of the step's keys (a key past the split reads the split's last; it is masked).
fn load_step(step: u32, key_slot: u32, part: u32, first: u32, end: u32, kv: u32) -> Words {
  let words = params.head_dim / 8u;
  var loaded: Words;
  for (var u = 0u; u < U; u++) {
    let key = first + (step * U + u) * KEYS + key_slot;
    let row = min(key, end - 1u) * params.kv_heads * words + kv * words;
    for (var i = 0u; i < W; i++) {
      let word = min(part + LANES * i, words - 1u);
      loaded.k[u * W + i] = k_cache[row + word];
      loaded.v[u * W + i] = v_cache[row + word];
    }
  }
  return loaded;
}

$if ONE:
  $include order_key.wgsli

  // order_key's inverse (a NaN's key gives a NaN).
  fn key_value(key: u32) -> f32 {
    return bitcast<f32>(select(~key, key & 0x7FFFFFFFu, (key & FLIP) != 0u));
  }

  // An f32 as a nonzero word: -0 becomes +0 (whose flipped bits would be 0), then the sign flips.
  fn sealed(value: f32) -> u32 {
    let bits = bitcast<u32>(value);
    return select(bits, 0u, bits == FLIP) ^ FLIP;
  }

  // Where KV head kv's partial words are at this step: (m, l) of head g and split s at ml + 2 (g splits
  // + s), output value d at o + (g splits + s) D + d.
  struct Block {
    ml: u32,
    o: u32,
    splits: u32,
  }

  fn block_of(kv: u32, splits: u32) -> Block {
    let first = params.kv_heads + 1u + kv * G * splits * (params.head_dim + 2u);
    return Block(first, first + 2u * G * splits, splits);
  }

  // The f32 sealed in partials[at], given `seen`, what the first exchange there returned: a 0 (not
  // visible yet) is exchanged again while this invocation's patience lasts; one that never comes
  // fails head g.
  fn settled(at: u32, seen: u32, g: u32) -> f32 {
    var word = seen;
    while (word == 0u && patience > 0u) {
      patience -= 1u;
      word = atomicExchange(&partials[at], 0u);
    }
    if (word == 0u) {
      atomicOr(&failed[g], 1u);
    }
    return bitcast<f32>(word ^ FLIP);
  }

  // The first exchange of the words of this invocation's outputs (value o of the KV head's G D: head
  // o / D, dim o % D) for splits [first, first + BATCH), all issued before any is looked at.
  fn take_batch(b: Block, first: u32, index: u32) -> array<u32, OUTS * BATCH> {
    let dim = params.head_dim;
    var words: array<u32, OUTS * BATCH>;
    for (var k = 0u; k < OUTS; k++) {
      let o = index + k * WG;
      for (var u = 0u; u < BATCH; u++) {
        let s = first + u;
        if (o < G * dim && s < b.splits) {
          words[k * BATCH + u] = atomicExchange(&partials[b.o + ((o / dim) * b.splits + s) * dim + o % dim], 0u);
        }
      }
    }
    return words;
  }

  // The last workgroup of KV head kv: every split's partials into its G heads' outputs. Called in
  // uniform control flow.
  fn reduce(kv: u32, splits: u32, index: u32) {
    let b = block_of(kv, splits);
    let dim = params.head_dim;
    let pairs = G * splits;                         // pair p: head p / splits, split p % splits
    if (index < G) {                                // (set here: lavapipe reuses workgroup memory)
      atomicStore(&head_top[index], order_key(NEG));
      atomicStore(&failed[index], 0u);
    }
    // Issue every (m, l) word of this invocation's pairs and the first batch of its output words,
    // then look at them.
    var ml: array<u32, 2u * PAIRS>;
    for (var j = 0u; j < PAIRS; j++) {
      let p = index + j * WG;
      if (p < pairs) {
        ml[2u * j] = atomicExchange(&partials[b.ml + 2u * p], 0u);
        ml[2u * j + 1u] = atomicExchange(&partials[b.ml + 2u * p + 1u], 0u);
      }
    }
    var words = take_batch(b, 0u, index);
    workgroupBarrier();
    var got: array<vec2<f32>, PAIRS>;
    for (var j = 0u; j < PAIRS; j++) {
      let p = index + j * WG;
      if (p < pairs) {
        let g = p / splits;
        got[j] = vec2<f32>(settled(b.ml + 2u * p, ml[2u * j], g), settled(b.ml + 2u * p + 1u, ml[2u * j + 1u], g));
        atomicMax(&head_top[g], order_key(got[j].x));
      }
    }
    workgroupBarrier();
    for (var j = 0u; j < PAIRS; j++) {
      let p = index + j * WG;
      if (p < pairs) {
        let w = exp2(got[j].x - key_value(atomicLoad(&head_top[p / splits])));
        weights[p] = vec2<f32>(w, got[j].y * w);
      }
    }
    workgroupBarrier();
    var acc: array<f32, OUTS>;
    var sum: array<f32, OUTS>;                      // L of the output's head
    for (var first = 0u; first < splits; first += BATCH) {
      if (first > 0u) {
        words = take_batch(b, first, index);
      }
      for (var k = 0u; k < OUTS; k++) {
        let o = index + k * WG;
        if (o < G * dim) {
          let g = o / dim;
          for (var u = 0u; u < BATCH; u++) {
            let s = first + u;
            if (s < splits) {
              let w = weights[g * splits + s];
              acc[k] += settled(b.o + (g * splits + s) * dim + o % dim, words[k * BATCH + u], g) * w.x;
              sum[k] += w.y;
            }
          }
        }
      }
    }
    workgroupBarrier();                             // every failure flagged
    let nan = bitcast<f32>(0x7FC00000u | (index & 0u));     // built at run time: a constant NaN is an error
    for (var k = 0u; k < OUTS; k++) {
      let o = index + k * WG;
      if (o < G * dim) {
        let g = o / dim;
        let value = select(acc[k] / sum[k], nan, atomicLoad(&failed[g]) != 0u);
        out[kv * G * dim + o] = value;
        $if QUANT:
          total_o[g * ROW + o % dim] = value;
      }
    }
    if (index == 0u) {
      atomicStore(&partials[kv], 0u);               // every other workgroup of the KV head drew its ticket
    }
    if (index < G && atomicLoad(&failed[index]) != 0u) {
      atomicAdd(&partials[params.kv_heads], 1u);
    }
    $if QUANT:
      workgroupBarrier();
      quantize_heads(kv, index);
  }
  $if QUANT:

    fn quantized(v: vec4<f32>, inverse: f32) -> vec4<i32> {
      return vec4<i32>(clamp(round(v * inverse), vec4<f32>(-127.0), vec4<f32>(127.0)));
    }

    // The KV head's G heads of output (total_o) to int8: invocation t < G D / 8 takes their octet t,
    // octet kv G D / 8 + t of the row; int8_activations.wgsl's quantize_octet for a row's one pass (held
    // bit-equal by a test). A group never spans two heads (sdpa() checks D % group_size == 0), and a
    // chunk's four octets are invocations 4c .. 4c + 3 (G D / 8 is a multiple of 4). Called in uniform
    // control flow.
    fn quantize_heads(kv: u32, tid: u32) {
      let per_head = params.head_dim / 8u;
      let octets = G * per_head;
      let live = tid < octets;
      let o = min(tid, octets - 1u);
      let at = (o / per_head) * ROW + 8u * (o % per_head);
      let a = vec4<f32>(total_o[at], total_o[at + 1u], total_o[at + 2u], total_o[at + 3u]);
      let b = vec4<f32>(total_o[at + 4u], total_o[at + 5u], total_o[at + 6u], total_o[at + 7u]);
      // abs(NaN) < TOO_LARGE is false, so a non-finite value reads as TOO_LARGE.
      let finite = all(abs(a) < vec4<f32>(TOO_LARGE)) && all(abs(b) < vec4<f32>(TOO_LARGE));
      let peak = max(max(max(abs(a.x), abs(a.y)), max(abs(a.z), abs(a.w))),
                     max(max(abs(b.x), abs(b.y)), max(abs(b.z), abs(b.w))));
      peaks[tid] = select(0.0, select(TOO_LARGE, peak, finite), live);
      workgroupBarrier();
      let per_group = params.group_size / 8u;
      let first = tid - tid % per_group;
      var largest = 0.0;
      for (var i = 0u; i < per_group; i++) {
        largest = max(largest, peaks[first + i]);
      }
      let inverse = select(0.0, 127.0 / largest, largest > 0.0 && largest < TOO_LARGE);
      let qa = quantized(a, inverse);
      let qb = quantized(b, inverse);
      let octet = kv * octets + o;
      let chunk = octet / 4u;
      let j = octet % 4u;
      let word = select(0u, params.row / 8u, j >= 2u) + 4u * chunk + 2u * (j % 2u);
      if (live) {
        act_words[word] = pack4xI8(vec4<i32>(qa.x, qa.z, qb.x, qb.z));
        act_words[word + 1u] = pack4xI8(vec4<i32>(qa.y, qa.w, qb.y, qb.w));
      }
      let total = qa + qb;
      chunk_sums[tid] = total.x + total.y + total.z + total.w;
      workgroupBarrier();
      if (live && j == 0u) {
        let nan = bitcast<f32>(0x7FC00000u | (tid & 0u));
        let scale = select(largest / 127.0, nan, largest >= TOO_LARGE);
        let chunk_sum = chunk_sums[tid] + chunk_sums[tid + 1u] + chunk_sums[tid + 2u] + chunk_sums[tid + 3u];
        act_stats[chunk] = vec2<f32>(scale, 8.0 * f32(chunk_sum));
      }
    }

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
  $if ONE:
    let b = block_of(kv, splits);
    for (var i = index; i < G * dim; i += WG) {
      let g = i / dim;
      atomicStore(&partials[b.o + (g * splits + split) * dim + i % dim], sealed(total_o[g * ROW + i % dim]));
    }
    if (slot < HS && part == 0u) {
      for (var c = 0u; c < GH; c++) {
        let at = b.ml + 2u * ((head_set * GH + c) * splits + split);
        atomicStore(&partials[at], sealed(head(top, c)));
        atomicStore(&partials[at + 1u], sealed(total_l[head_set * GH + c]));
      }
    }
    storageBarrier();                               // every invocation's stores issued before the ticket
    if (index == 0u) {
      arrival = atomicAdd(&partials[kv], 1u);
    }
    if (workgroupUniformLoad(&arrival) + 1u == splits) {
      reduce(kv, splits, index);
    }
  $else:
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
