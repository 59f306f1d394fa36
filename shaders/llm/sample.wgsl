$if PASS == 1:
  // Sampling from f32 logits, pass 1 of 2: workgroup b keeps the top k of logits [b * BLOCK, (b + 1) * BLOCK)
  // of the first n as candidates: (key, index) pairs in slots [b * k, (b + 1) * k), in no particular order,
  // unfilled slots (a block of fewer than k logits) marked NO_KEY.
$else:
  // Sampling from f32 logits, pass 2 of 2: one workgroup keeps the top k of pass 1's blocks * k candidates
  // (the top k of all n logits, since each block kept its own top k), ranks them, and draws one:
  //   greedy (temperature 0, k == 1, or the top logit NaN or infinite): the first ranked, argmax's answer;
  //   else weights w_i = exp((l_i - l_0) / temperature) over the ranked candidates (f32), the nucleus is
  //   the shortest prefix whose cumulative weight reaches top_p * the total (every candidate at top_p 1),
  //   and the pick is the first candidate whose cumulative weight exceeds u * the nucleus' weight, where
  //   u = uniform(seed, position) is counter-based: the same (seed, position) always draws the same u.
  // The position is the sampled token's place in the sequence, at + offset[0] (the token history's), so a
  // decode whose position lives on the GPU needs no host write per step. The pick goes to result[0].
$if HISTORY:
  // It also stores the pick in the sequence's token history at at + offset[0] (capacity permitting), and
  // offset[0] then advances by params.advance: no dispatch of its own for that.
$if EMBED:
  // And the pick's embedding row goes to next_input: the next decode step's input, read by its first
  // layer, so that step starts without an embedding dispatch of its own (sample(embed=), NextInput).
  // The pass reads no logits: a candidate's logit is its key's (key_value), which leaves it 8 storage
  // buffers, WebGPU's default limit, with the embedding's three.
// Order: argmax's (argmax.wgsl). Values compare through order-preserving u32 keys (NaN above +inf, -0 equal
// to +0) and equal keys go to the LOWEST index, so candidates are ranked by the composite (key, reversed
// index), a total order. Top k is an exact radix select on that composite, 8 bits per round: the four
// bytes of the key, then the three bytes of the reversed index (indices below 2^24), so ties at the
// k-th place are broken by index too and the selection does not depend on the reduction's shape.
const WG: u32 = 256u;           // also the radix: one histogram bin per invocation
const ITEMS: u32 = ${ITEMS}u;    // ops/sample.py reads it
const BLOCK: u32 = WG * ITEMS;  // pass 1: 2048 logits per workgroup
const MAX_K: u32 = 64u;         // the largest top_k (ops/sample.py TOP_K_CAP)
const ROUNDS: u32 = 7u;         // radix rounds: 4 key bytes, 3 reversed-index bytes
const NO_KEY: u32 = 0u;         // below every value's key (the smallest, -inf's, is 0x007FFFFF): an empty slot
const INDEX_MASK: u32 = 0xFFFFFFu;

struct Params {
  n: u32,
  blocks: u32,
  k: u32,
  at: u32,
  seed: u32,
  temperature: f32,
  top_p: f32,
  $if HISTORY:
    capacity: u32,
    advance: u32,
  $if EMBED:
    $include next_input_params.wgsli
}

$if PASS == 1:
  @group(0) @binding(0) var<storage, read> values: array<f32>;
  @group(0) @binding(1) var<storage, read_write> candidate_keys: array<u32>;
  @group(0) @binding(2) var<storage, read_write> candidate_index: array<u32>;
  @group(0) @binding(3) var<uniform> params: Params;
$else:
  @group(0) @binding(1) var<storage, read> candidate_keys: array<u32>;
  @group(0) @binding(2) var<storage, read> candidate_index: array<u32>;
  @group(0) @binding(3) var<storage, ${"read_write" if HISTORY else "read"}> offset: array<u32>;
  @group(0) @binding(4) var<storage, read_write> result: array<u32>;
  @group(0) @binding(5) var<uniform> params: Params;
  $if HISTORY:
    @group(0) @binding(6) var<storage, read_write> history: array<u32>;
  $if EMBED:
    @group(0) @binding(7) var<storage, read> packed: array<u32>;
    @group(0) @binding(8) var<storage, read> scales: array<f32>;
    @group(0) @binding(9) var<storage, read_write> next_input: array<f32>;

var<workgroup> histogram: array<atomic<u32>, WG>;
var<workgroup> suffix: array<u32, 257>;        // suffix[b]: candidates in the round's bins b..255; suffix[256] = 0
var<workgroup> threshold: array<u32, 3>;        // the k-th candidate's (key, reversed index) so far; still needed
var<workgroup> taken: atomic<u32>;
var<workgroup> selected: u32;                   // 1 once the threshold's bytes so far take exactly `need`
$if PASS == 2:
  var<workgroup> kept_keys: array<u32, MAX_K>;
  var<workgroup> kept_reversed: array<u32, MAX_K>;
  var<workgroup> ranked: array<u32, MAX_K>;      // the kept candidates' indices, best first
  var<workgroup> ranked_keys: array<u32, MAX_K>; // and their keys
  var<workgroup> chosen: u32;                    // the pick
  var<workgroup> cumulative: array<f32, MAX_K>;  // weights, then their running sums

$include order_key.wgsli
$if EMBED:
  $include q4_embed_word.wgsli
  $include next_input_row.wgsli

$if PASS == 1:
  // Candidate i of this workgroup's: (key, reversed index) of logit base + i.
  fn candidate(base: u32, i: u32) -> vec2<u32> {
    let index = base + i;
    return vec2<u32>(order_key(values[index]), INDEX_MASK - index);
  }
$else:
  fn candidate(base: u32, i: u32) -> vec2<u32> {
    return vec2<u32>(candidate_keys[i], INDEX_MASK - (candidate_index[i] & INDEX_MASK));
  }

  // lowbias32 (Chris Wellons' integer hash): a bijection on u32 with low bias, chained over (seed, position).
  fn lowbias32(x_in: u32) -> u32 {
    var x = x_in;
    x ^= x >> 16u;
    x *= 0x7feb352du;
    x ^= x >> 15u;
    x *= 0x846ca68bu;
    x ^= x >> 16u;
    return x;
  }

  // u in [0, 1): the hash's top 24 bits times 2^-24, exact in f32.
  fn uniform_draw(seed: u32, position: u32) -> f32 {
    return f32(lowbias32(lowbias32(seed) ^ position) >> 8u) * (1.0 / 16777216.0);
  }

  // The drawn id to result[0] (and the history); once, after the draw has read the position.
  fn store(id: u32) {
    result[0] = id;
    $if EMBED:
      chosen = id;
    $if HISTORY:
      let at = params.at + offset[0];
      if (at < params.capacity) {
        history[at] = id;
      }
      offset[0] += params.advance;
  }

// The round's byte of a composite: key bytes high to low, then reversed-index bytes high to low.
fn digit(c: vec2<u32>, round: u32) -> u32 {
  if (round < 4u) {
    return (c.x >> (24u - 8u * round)) & 0xFFu;
  }
  return (c.y >> (16u - 8u * (round - 4u))) & 0xFFu;
}

// Whether the bytes before `round` equal the threshold's (high: key, low: reversed index) decided so far.
fn matches(c: vec2<u32>, high: u32, low: u32, round: u32) -> bool {
  if (round < 4u) {
    let kept = 8u * round;
    return kept == 0u || (c.x >> (32u - kept)) == (high >> (32u - kept));
  }
  let kept = 8u * (round - 4u);
  return c.x == high && (kept == 0u || (c.y >> (24u - kept)) == (low >> (24u - kept)));
}

fn at_or_above(c: vec2<u32>, t: vec2<u32>) -> bool {
  return c.x != NO_KEY && (c.x > t.x || (c.x == t.x && c.y >= t.y));
}

// Radix select: leaves in threshold[0..1] the composite of the need-th largest of candidates 0..count-1
// (NO_KEY slots skipped), so exactly `need` candidates are at or above it (composites are distinct).
// need must be 1..(candidates present). Call from uniform control flow.
fn select_threshold(lid: u32, base: u32, count: u32, need: u32) {
  atomicStore(&histogram[lid], 0u);   // explicit: lavapipe keeps workgroup memory across workgroups
  if (lid == 0u) {
    threshold[0] = 0u;
    threshold[1] = 0u;
    threshold[2] = need;
    selected = 0u;
  }
  for (var round = 0u; round < ROUNDS; round++) {
    // Done when the last round's bin and those above it held exactly the candidates still needed: the
    // threshold's remaining bytes stay 0, which takes that bin whole. (Distinct logits settle in 2-3 rounds
    // of the 7; ties at the k-th place take the index rounds.)
    if (workgroupUniformLoad(&selected) != 0u) {
      break;
    }
    let high = threshold[0];
    let low = threshold[1];
    let still = threshold[2];
    for (var i = lid; i < count; i += WG) {
      let c = candidate(base, i);
      if (c.x != NO_KEY && matches(c, high, low, round)) {
        atomicAdd(&histogram[digit(c, round)], 1u);
      }
    }
    workgroupBarrier();
    suffix[lid] = atomicLoad(&histogram[lid]);
    atomicStore(&histogram[lid], 0u);
    if (lid == 0u) {
      suffix[WG] = 0u;
    }
    workgroupBarrier();
    for (var stride = 1u; stride < WG; stride <<= 1u) {
      let sum = suffix[lid] + suffix[min(lid + stride, WG)];
      workgroupBarrier();
      suffix[lid] = sum;
      workgroupBarrier();
    }
    // One bin holds the still-needed candidate: fewer than `still` above it, at least `still` from it up.
    if (suffix[lid + 1u] < still && still <= suffix[lid]) {
      if (round < 4u) {
        threshold[0] = high | (lid << (24u - 8u * round));
      } else {
        threshold[1] = low | (lid << (16u - 8u * (round - 4u)));
      }
      threshold[2] = still - suffix[lid + 1u];
      selected = select(0u, 1u, suffix[lid] == still);
    }
  }
  workgroupBarrier();
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  if (lid == 0u) {
    atomicStore(&taken, 0u);
  }
  $if PASS == 1:
    let block = wid.y * groups.x + wid.x;
    if (block >= params.blocks) {
      return;     // uniform: the whole workgroup leaves together
    }
    let base = block * BLOCK;
    let count = min(BLOCK, params.n - base);
    let need = min(params.k, count);
    select_threshold(lid, base, count, need);
    let t = vec2<u32>(threshold[0], threshold[1]);
    let first_slot = block * params.k;
    for (var i = lid; i < count; i += WG) {
      let c = candidate(base, i);
      if (at_or_above(c, t)) {
        let slot = first_slot + atomicAdd(&taken, 1u);
        candidate_keys[slot] = c.x;
        candidate_index[slot] = base + i;
      }
    }
    if (need <= lid && lid < params.k) {
      candidate_keys[first_slot + lid] = NO_KEY;
      candidate_index[first_slot + lid] = 0xFFFFFFFFu;
    }
  $else:
    let need = min(params.k, params.n);
    select_threshold(lid, 0u, params.blocks * params.k, need);
    let t = vec2<u32>(threshold[0], threshold[1]);
    for (var i = lid; i < params.blocks * params.k; i += WG) {
      let c = candidate(0u, i);
      if (at_or_above(c, t)) {
        let slot = atomicAdd(&taken, 1u);
        kept_keys[slot] = c.x;
        kept_reversed[slot] = c.y;
      }
    }
    workgroupBarrier();
    if (lid < need) {
      var rank = 0u;
      for (var j = 0u; j < need; j++) {
        rank += u32(kept_keys[j] > kept_keys[lid] || (kept_keys[j] == kept_keys[lid] && kept_reversed[j] > kept_reversed[lid]));
      }
      ranked[rank] = INDEX_MASK - kept_reversed[lid];
      ranked_keys[rank] = kept_keys[lid];
    }
    workgroupBarrier();
    let top = key_value(ranked_keys[0]);
    let top_finite = (bitcast<u32>(top) & 0x7F800000u) != 0x7F800000u;
    let greedy = !(params.temperature > 0.0) || need == 1u || !top_finite;
    if (!greedy && lid < need) {
      let value = key_value(ranked_keys[lid]);
      let d = (value - top) / params.temperature;
      // -inf logits and weights below e^-80 (under 2^-115 of the top's 1) count as 0
      let negligible = bitcast<u32>(value) == 0xFF800000u || d < -80.0;
      cumulative[lid] = select(exp(d), 0.0, negligible);
    }
    workgroupBarrier();
    if (lid == 0u && greedy) {
      store(ranked[0]);
    }
    if (lid == 0u && !greedy) {
      var total = 0.0;
      for (var i = 0u; i < need; i++) {
        total += cumulative[i];
        cumulative[i] = total;
      }
      var nucleus = need;
      if (params.top_p < 1.0) {
        let bar = params.top_p * total;
        for (var m = 1u; m <= need; m++) {
          if (cumulative[m - 1u] >= bar) {
            nucleus = m;
            break;
          }
        }
      }
      let drawn = uniform_draw(params.seed, params.at + offset[0]) * cumulative[nucleus - 1u];
      var pick = nucleus - 1u;      // where u * mass rounds up to the nucleus' whole mass
      for (var i = 0u; i < nucleus; i++) {
        if (cumulative[i] > drawn) {
          pick = i;
          break;
        }
      }
      store(ranked[pick]);
    }
    $if EMBED:
      workgroupBarrier();
      // (every invocation reads the pick: nothing writes `chosen` after this barrier)
      write_next_input(chosen, lid);
}
