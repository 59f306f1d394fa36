// Causal attention for a prefill on f16 subgroup matrices (tensor cores; route sdpa_prefill_sgmat_f16, where
// the device has shader-f16 and an f16 x f16 -> f32 16x16x16 config), online softmax in base 2, for any
// G = Hq / Hkv up to ${16 * FM} and head_dim D = ${D} exactly.
//
// A workgroup is one subgroup of 32 (the guard: subgroups exactly 32 wide) owning ROWS = ${16 * FM} query rows:
// T = ROWS / G consecutive tokens x the G heads of one KV head. Its queries, pre-scaled and rounded to f16,
// stay in registers as ${FM} x ${D // 16} left matrices. The keys are walked in tiles of KT = ${KT} up to the
// workgroup's last token's causal bound; per tile:
//   scores   S = Q K^T, the keys' right matrices read straight from the cache (f16, column-major: a key's
//            dims are contiguous), stored to workgroup memory;
//   softmax  LPR = 32 / ROWS invocations per row take its scores (masked past the row's causal bound),
//            p = exp2(s - m) rounded to f16 into workgroup memory, l summed in f32;
//   values   O += P V, V's right matrices read from the cache row-major, O kept in result matrices.
// O is rescaled only when a row's running maximum m grows by more than LAZY (base 2) over the one its
// probabilities were taken against (then through workgroup memory: a result matrix cannot be scaled
// per row), so p stays below 2^LAZY: f16 holds it with its usual relative precision. A 16-key block
// whose keys would run past the cache's capacity is read from capacity - 16 instead (a subgroup-matrix
// load past the buffer's end reads nothing), its keys already counted masked. The token tiles run from
// the last (the longest walks) to the first. Grid: (ceil(tokens / T), Hkv).
// The cache is f16 [capacity, Hkv, D] (the packed cache's bytes); q and out are [tokens, Hq, D], f32.
// A q beyond f16's range (after the scale) becomes an infinity (the output says so, it is not clamped).
enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;

const D: u32 = ${D}u;
const KT: u32 = ${KT}u;                 // keys per tile
const ROWS: u32 = ${16 * FM}u;           // query rows per workgroup
const LPR: u32 = 32u / ROWS;            // invocations per row in the softmax
const CPL: u32 = KT / LPR;              // a tile's scores per invocation
const DPL: u32 = D / LPR;               // a row's output dims per invocation
const SS: u32 = ${max(KT, D) + 4}u;       // f32 between rows of the scores (and of O, when it goes through memory)
const PS: u32 = ${max(KT, D) + 8}u;       // f16 between rows of the probabilities (and of the staged queries)
const NEG: f32 = -0x1.fffffep+127f;     // an empty running max: exp2(NEG - m) is 0 for any real m
const LAZY: f32 = 8.0;                  // how far m may grow before O is rescaled (p < 2^LAZY)

struct Params {
  tokens: u32,
  heads: u32,
  kv_heads: u32,
  head_dim: u32,
  pos: u32,             // the first token's position
  ctx: u32,             // pos + tokens
  scale: f32,           // scale * log2(e)
  capacity: u32,        // the cache's positions (at least 16: the guard)
}

@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> k_cache: array<f16>;
@group(0) @binding(2) var<storage, read> v_cache: array<f16>;
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(4) var<uniform> params: Params;

var<workgroup> scores: array<f32, ROWS * SS>;     // [row][key of the tile]; O's rescale and the output
var<workgroup> probs: array<f16, ROWS * PS>;      // [row][key of the tile]; the queries at the start
var<workgroup> grew: u32;                         // some row's m grew past LAZY this tile

// The tile's column c: its key (read from the block's first key, or capacity - 16 near the end) and
// whether it is a key this row attends that no other column counts.
fn attends(j0: u32, c: u32, bound: u32) -> bool {
  let first = j0 + c / 16u * 16u;
  let key = min(first, params.capacity - 16u) + c % 16u;
  return key >= first && key <= bound;
}

@compute @workgroup_size(32)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) grid: vec3<u32>,
        @builtin(subgroup_invocation_id) lane: u32) {
  let kv = wid.y;
  let g = params.heads / params.kv_heads;
  let per_tile = ROWS / g;                          // tokens per workgroup
  let t0 = (grid.x - 1u - wid.x) * per_tile;        // the last token tile first
  let last = params.pos + min(t0 + per_tile, params.tokens) - 1u;   // the workgroup's last key
  let stride = params.kv_heads * D;                 // halves between a KV head's consecutive keys

  for (var e = lane; e < ROWS * D / 4u; e += 32u) {
    let r = e / (D / 4u);
    let token = t0 + r / g;
    var x = vec4<f32>(0.0);
    if (r < per_tile * g && token < params.tokens) {
      x = q[(token * params.heads + kv * g + r % g) * (D / 4u) + e % (D / 4u)] * params.scale;
    }
    let at = r * PS + 4u * (e % (D / 4u));
    probs[at] = f16(x.x);
    probs[at + 1u] = f16(x.y);
    probs[at + 2u] = f16(x.z);
    probs[at + 3u] = f16(x.w);
  }
  workgroupBarrier();
  $for i in range(FM):
    $for d in range(D // 16):
      let q${i}_${d} = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&probs, ${16 * i}u * PS + ${16 * d}u, false, PS);
  $for i in range(FM):
    $for d in range(D // 16):
      var o${i}_${d} = subgroup_matrix_result<f32, 16, 16>();
  // This invocation's row in the softmax and the output: LPR invocations a row, each a share of its columns.
  let r = lane / LPR;
  let part = lane % LPR;
  let token = t0 + r / g;
  let live = r < per_tile * g && token < params.tokens;
  let bound = min(params.pos + token, last);        // the row's last key
  var m = NEG;
  var l = 0.0;
  workgroupBarrier();                               // the queries are loaded: probs is free
  for (var j0 = 0u; j0 <= last; j0 += KT) {
    $for b in range(KT // 16):
      {
        let at = (min(j0 + ${16 * b}u, params.capacity - 16u) * params.kv_heads + kv) * D;
        $for i in range(FM):
          var s${i} = subgroup_matrix_result<f32, 16, 16>();
        $for d in range(D // 16):
          {
            let keys = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&k_cache, at + ${16 * d}u, true, stride);
            $for i in range(FM):
              s${i} = subgroupMatrixMultiplyAccumulate(q${i}_${d}, keys, s${i});
          }
        $for i in range(FM):
          subgroupMatrixStore(&scores, ${16 * i}u * SS + ${16 * b}u, s${i}, false, SS);
      }
    workgroupBarrier();
    // Columns in a rotated order (by lane) so the row's invocations meet different banks.
    var top = NEG;
    for (var i = 0u; i < CPL; i++) {
      let c = part * CPL + (i + lane) % CPL;
      top = max(top, select(NEG, scores[r * SS + c], attends(j0, c, bound)));
    }
    $if FM == 1:
      top = max(top, subgroupShuffleXor(top, 1u));
    var alpha = 1.0;
    var rescale = false;
    if (m == NEG) {                                 // the first tile: O is still zero
      m = top;
    } else if (top > m + LAZY) {
      alpha = exp2(m - top);
      m = top;
      rescale = true;
    }
    var sum = 0.0;
    for (var i = 0u; i < CPL; i++) {
      let c = part * CPL + (i + lane) % CPL;
      let p = select(0.0, exp2(scores[r * SS + c] - m), attends(j0, c, bound));
      sum += p;
      probs[r * PS + c] = f16(p);
    }
    $if FM == 1:
      sum += subgroupShuffleXor(sum, 1u);
    l = l * alpha + sum;
    let any_rescale = subgroupAny(rescale);
    if (lane == 0u) {
      grew = select(0u, 1u, any_rescale);
    }
    if (workgroupUniformLoad(&grew) != 0u) {       // (also the barrier before probs is read)
      $for i in range(FM):
        $for d in range(D // 16):
          subgroupMatrixStore(&scores, ${16 * i}u * SS + ${16 * d}u, o${i}_${d}, false, SS);
      workgroupBarrier();
      for (var e = 0u; e < DPL; e++) {
        scores[r * SS + part * DPL + e] *= alpha;
      }
      workgroupBarrier();
      $for i in range(FM):
        $for d in range(D // 16):
          o${i}_${d} = subgroupMatrixLoad<subgroup_matrix_result<f32, 16, 16>>(&scores, ${16 * i}u * SS + ${16 * d}u, false, SS);
      workgroupBarrier();
    }
    $for b in range(KT // 16):
      {
        let at = (min(j0 + ${16 * b}u, params.capacity - 16u) * params.kv_heads + kv) * D;
        $for i in range(FM):
          let p${i} = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&probs, ${16 * i}u * PS + ${16 * b}u, false, PS);
        $for d in range(D // 16):
          {
            let values = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&v_cache, at + ${16 * d}u, false, stride);
            $for i in range(FM):
              o${i}_${d} = subgroupMatrixMultiplyAccumulate(p${i}, values, o${i}_${d});
          }
      }
  }
  $for i in range(FM):
    $for d in range(D // 16):
      subgroupMatrixStore(&scores, ${16 * i}u * SS + ${16 * d}u, o${i}_${d}, false, SS);
  workgroupBarrier();
  if (live) {
    let at = (token * params.heads + kv * g + r % g) * (D / 4u) + part * (DPL / 4u);
    for (var e = 0u; e < DPL / 4u; e++) {
      let c = r * SS + part * DPL + 4u * e;
      out[at + e] = vec4<f32>(scores[c], scores[c + 1u], scores[c + 2u], scores[c + 3u]) / l;
    }
  }
}
