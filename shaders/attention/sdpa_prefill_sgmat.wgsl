// Causal attention for a prefill on f16 subgroup matrices (tensor cores; route sdpa_prefill_sgmat_f16, where
// the device has shader-f16 and an f16 x f16 -> f32 16x16x16 config), online softmax in base 2, for any
// G = Hq / Hkv up to the workgroup's rows and head_dim D = ${D} exactly.
//
// A workgroup of SG = ${SG} subgroups of 32 (the guard: subgroups exactly 32 wide) owns ROWS = ${16 * FM * SG} query
// rows: T = ROWS / G consecutive tokens x the G heads of one KV head; subgroup s holds rows 16 FM s.. as
// ${FM} x ${D // 16} left matrices of its queries (pre-scaled, rounded to f16) for the whole walk. The keys are
// walked in tiles of KT = ${KT} up to the workgroup's last token's causal bound; per tile:
//   staging  every invocation loads its share of the tile's K and V rows (f16 pairs packed in u32) and
//            stores them as f16 to workgroup memory; the next tile's share loads during this tile's work;
//   scores   each subgroup S = Q K^T (K's rows read column-major), stored to its own workgroup memory;
//   softmax  LPR = 32 / (16 FM) invocations per row take its scores (masked past the row's causal bound),
//            p = exp2(s - m) rounded to f16 into the subgroup's memory, l summed in f32;
//   values   O += P V, O kept in result matrices.
// O is rescaled only when some row's running maximum m grows by more than LAZY = ${LAZY} (base 2) over the one
// its probabilities were taken against (through workgroup memory, 16 columns at a time: a result matrix
// cannot be scaled per row), so p stays below 2^LAZY, which f16 holds at its usual relative precision.
// Keys past the workgroup's last read that last key's row (they are masked). The token tiles run from the
// last (the longest walks) to the first. Grid: (ceil(tokens / T), Hkv).
// The cache is f16 pairs packed in u32, [capacity, Hkv, D / 2]; q and out are [tokens, Hq, D], f32.
// A q beyond f16's range (after the scale) becomes an infinity (the output says so, it is not clamped).
enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;
diagnostic(off, chromium_experimental.subgroup_matrix_uniformity);    // offsets from subgroup_id

const D: u32 = ${D}u;
const KT: u32 = ${KT}u;                  // keys per tile
const SG: u32 = ${SG}u;                  // subgroups per workgroup
const WG: u32 = ${32 * SG}u;
const SROWS: u32 = ${16 * FM}u;           // query rows per subgroup
const ROWS: u32 = SROWS * SG;
const LPR: u32 = 32u / SROWS;           // invocations per row in the softmax
const CPL: u32 = KT / LPR;              // a tile's scores per invocation
const WORDS: u32 = D / 8u;              // vec4<u32> words per cache row
const TS: u32 = D + 8u;                 // f16 between rows of the staged K and V (and queries)
const SS: u32 = KT + 4u;                // f32 between rows of a subgroup's scores (and O's 16 columns)
const PS: u32 = KT + 8u;                // f16 between rows of a subgroup's probabilities
const NEG: f32 = -0x1.fffffep+127f;     // an empty running max: exp2(NEG - m) is 0 for any real m
const LAZY: f32 = ${LAZY}.0;              // how far m may grow before O is rescaled (p < 2^LAZY)

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
@group(0) @binding(1) var<storage, read> k_cache: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> v_cache: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(4) var<uniform> params: Params;

var<workgroup> kv_tile: array<f16, 2u * KT * TS>;        // K rows then V rows; the queries at the start
var<workgroup> scores: array<f32, SG * SROWS * SS>;      // [subgroup][row][key of the tile]; O's 16 columns
var<workgroup> probs: array<f16, SG * SROWS * PS>;       // [subgroup][row][key of the tile]
// [0]: some row's m grew past LAZY this tile. Every workgroup variable here is a multiple of 16 bytes: a
// subgroup-matrix load whose base is not 16-byte aligned reads from the aligned address below it (a lone
// u32 placed before the tiles shifted every load by two halves in Chromium on the H200).
var<workgroup> grew: array<atomic<u32>, 4>;

// An invocation's share of a tile's K and V rows as loaded: words t, t + WG, ... of the tile's KT x WORDS
// K words, then as many V words.
struct Share {
  w: array<vec4<u32>, ${-(-2 * KT * D // 8 // (32 * SG))}>,
}

fn fetch(t: u32, j0: u32, last: u32, kv: u32) -> Share {
  var share: Share;
  $for j in range(-(-2 * KT * D // 8 // (32 * SG))):
    {
      let i = t + ${j}u * WG;
      let key = min(j0 + (i % (KT * WORDS)) / WORDS, last);
      let at = (key * params.kv_heads + kv) * WORDS + i % WORDS;
      if (i < KT * WORDS) {
        share.w[${j}] = k_cache[at];
      } else if (i < 2u * KT * WORDS) {
        share.w[${j}] = v_cache[at];
      }
    }
  return share;
}

fn put(t: u32, share: Share) {
  $for j in range(-(-2 * KT * D // 8 // (32 * SG))):
    {
      let i = t + ${j}u * WG;
      if (i < 2u * KT * WORDS) {
        let at = (i / WORDS) * TS + (i % WORDS) * 8u;        // (V's rows follow K's: row i / WORDS)
        $for c in range(4):
          {
            let pair = bitcast<vec2<f16>>(share.w[${j}][${c}]);
            kv_tile[at + ${2 * c}u] = pair.x;
            kv_tile[at + ${2 * c + 1}u] = pair.y;
          }
      }
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) grid: vec3<u32>, @builtin(subgroup_id) sg: u32,
        @builtin(subgroup_invocation_id) lane: u32) {
  let kv = wid.y;
  let g = params.heads / params.kv_heads;
  let per_tile = ROWS / g;                          // tokens per workgroup
  let t0 = (grid.x - 1u - wid.x) * per_tile;        // the last token tile first
  let last = params.pos + min(t0 + per_tile, params.tokens) - 1u;   // the workgroup's last key

  for (var e = t; e < ROWS * D / 4u; e += WG) {
    let r = e / (D / 4u);
    let token = t0 + r / g;
    var x = vec4<f32>(0.0);
    if (r < per_tile * g && token < params.tokens) {
      x = q[(token * params.heads + kv * g + r % g) * (D / 4u) + e % (D / 4u)] * params.scale;
    }
    let at = r * TS + 4u * (e % (D / 4u));
    kv_tile[at] = f16(x.x);
    kv_tile[at + 1u] = f16(x.y);
    kv_tile[at + 2u] = f16(x.z);
    kv_tile[at + 3u] = f16(x.w);
  }
  workgroupBarrier();
  $for i in range(FM):
    $for d in range(D // 16):
      let q${i}_${d} = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(
          &kv_tile, (sg * SROWS + ${16 * i}u) * TS + ${16 * d}u, false, TS);
  $for i in range(FM):
    $for d in range(D // 16):
      var o${i}_${d} = subgroup_matrix_result<f32, 16, 16>();
  // This invocation's row in the softmax and the output: LPR invocations a row, each a share of its columns.
  let r = lane / LPR;
  let part = lane % LPR;
  let row = sg * SROWS + r;                         // in the workgroup
  let token = t0 + row / g;
  let live = row < per_tile * g && token < params.tokens;
  let bound = min(params.pos + token, last);        // the row's last key
  let mine = sg * SROWS * SS;                       // this subgroup's scores
  var m = NEG;
  var l = 0.0;
  var next = fetch(t, 0u, last, kv);
  workgroupBarrier();                               // the queries are loaded: kv_tile is free
  for (var j0 = 0u; j0 <= last; j0 += KT) {
    if (t == 0u) {
      atomicStore(&grew[0], 0u);
    }
    put(t, next);
    workgroupBarrier();
    if (j0 + KT <= last) {
      next = fetch(t, j0 + KT, last, kv);
    }
    $for b in range(KT // 16):
      {
        $for i in range(FM):
          var s${i} = subgroup_matrix_result<f32, 16, 16>();
        $for d in range(D // 16):
          {
            let keys = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&kv_tile, ${16 * b}u * TS + ${16 * d}u, true, TS);
            $for i in range(FM):
              s${i} = subgroupMatrixMultiplyAccumulate(q${i}_${d}, keys, s${i});
          }
        $for i in range(FM):
          subgroupMatrixStore(&scores, mine + ${16 * i}u * SS + ${16 * b}u, s${i}, false, SS);
      }
    workgroupBarrier();
    // Columns in a rotated order (by lane) so the row's invocations meet different banks.
    var top = NEG;
    for (var i = 0u; i < CPL; i++) {
      let c = part * CPL + (i + lane) % CPL;
      top = max(top, select(NEG, scores[mine + r * SS + c], j0 + c <= bound));
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
      let p = select(0.0, exp2(scores[mine + r * SS + c] - m), j0 + c <= bound);
      sum += p;
      probs[(sg * SROWS + r) * PS + c] = f16(p);
    }
    $if FM == 1:
      sum += subgroupShuffleXor(sum, 1u);
    l = l * alpha + sum;
    if (subgroupAny(rescale) && lane == 0u) {
      atomicOr(&grew[0], 1u);
    }
    workgroupBarrier();                             // probs stored before any subgroup loads its matrices
    if (workgroupUniformLoad(&grew[0]) != 0u) {
      // O's 16 columns at a time through the subgroup's scores, each row scaled by its alpha
      $for d in range(D // 16):
        $for i in range(FM):
          subgroupMatrixStore(&scores, mine + ${16 * i}u * SS, o${i}_${d}, false, SS);
        workgroupBarrier();
        for (var e = 0u; e < 16u / LPR; e++) {
          scores[mine + r * SS + part * (16u / LPR) + e] *= alpha;
        }
        workgroupBarrier();
        $for i in range(FM):
          o${i}_${d} = subgroupMatrixLoad<subgroup_matrix_result<f32, 16, 16>>(&scores, mine + ${16 * i}u * SS, false, SS);
        workgroupBarrier();
    }
    $for b in range(KT // 16):
      {
        $for i in range(FM):
          let p${i} = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(
              &probs, (sg * SROWS + ${16 * i}u) * PS + ${16 * b}u, false, PS);
        $for d in range(D // 16):
          {
            let values = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(
                &kv_tile, (KT + ${16 * b}u) * TS + ${16 * d}u, false, TS);
            $for i in range(FM):
              o${i}_${d} = subgroupMatrixMultiplyAccumulate(p${i}, values, o${i}_${d});
          }
      }
    workgroupBarrier();                             // before the next tile's rows are stored
  }
  // O / l, 16 columns at a time through the subgroup's scores.
  let at = (token * params.heads + kv * g + row % g) * D;
  $for d in range(D // 16):
    $for i in range(FM):
      subgroupMatrixStore(&scores, mine + ${16 * i}u * SS, o${i}_${d}, false, SS);
    workgroupBarrier();
    if (live) {
      for (var e = 0u; e < 4u / LPR; e++) {
        let c = mine + r * SS + part * (16u / LPR) + 4u * e;
        out[(at + ${16 * d}u + part * (16u / LPR)) / 4u + e] =
            vec4<f32>(scores[c], scores[c + 1u], scores[c + 2u], scores[c + 3u]) / l;
      }
    }
    workgroupBarrier();
}
