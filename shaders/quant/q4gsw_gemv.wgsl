// Q4 GEMV (one activation row): out[n] = sum_k x[k] * (q[n, k] * scale[k / gs, n]) (+ bias[n]).
// Weights in the reference layout (see q4gsw_quantize.wgsl), rows n_offset.. of a packed matrix of
// n_total rows, so one packed QKV weight serves three projections.
//
// Workgroup = KL lanes x RG warps. The RG warps form RG / KSPLIT row groups of KSPLIT warps each;
// the KSPLIT warps of a group split K between them (more warps per row for short, wide matrices).
// A thread owns R rows and walks its share of K in chunks of 32 values (one vec4<u32> per row):
// per step it first issues every weight and scale load of its R rows and U chunks (no branch in
// between: rows past N and chunks past K are clamped and their products discarded), then loads the
// 32 x values of each chunk once for all R rows. Bytes in flight per thread: R x U x 16. The rows and
// chunks are unrolled by the template into scalar variables, so nothing is indexed dynamically and
// every value can live in a register.
$if WORD:
  // This variant's chunk is one u32 word (8 values) instead of a vec4: a warp's weight load covers
  // 128 contiguous bytes of a row, and its activation loads span 1 KB instead of 4 KB (a quarter of
  // the L1 wavefronts per weight byte); U words per step keep the bytes in flight.
$if I8:
  // This variant quantizes the activation row to int8 in workgroup memory first (per group of GS
  // values: scale = max|x| / 127, q = round(x * 127 / max|x|); 8 values as (even, odd) words, the order
  // of a weight word's low and high nibbles), then a lane owns whole groups: per weight word two masks
  // and two dot4I8Packed (4 exact multiply-adds each), and one conversion to float per group:
  // s_w * s_x * (dot(n, q) - 8 * sum(q)). K is limited to MAXK by the workgroup memory.
// Partial sums are reduced across the KL lanes
$if SUBGROUP:
  // with subgroupAdd (route guard: subgroups at most KL wide, so none spans two rows),
$else:
  // through workgroup memory,
// then across the KSPLIT warps of the row group through workgroup memory.
$if SUBGROUP:
  enable subgroups;
const KL: u32 = ${KL}u;
const RG: u32 = ${RG}u;
const R: u32 = ${R}u;
const U: u32 = ${U}u;
const KSPLIT: u32 = ${KSPLIT}u;
const ROWS: u32 = (RG / KSPLIT) * R;

struct Params {
  k: u32,
  n: u32,
  n_total: u32,
  n_offset: u32,
  group_size: u32,
  has_bias: u32,
  accumulate: u32,      // out += the product (a residual add folded in)
}

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> weights: array<${"u32" if WORD else "vec4<u32>"}>;
@group(0) @binding(2) var<storage, read> scales: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<uniform> params: Params;
var<workgroup> partial: array<f32, ${KL * RG * R}>;
$if I8:
  const GS: u32 = ${GS}u;
  // 16 KB of workgroup memory in all (the portable limit); the int8 route's guard reads MAXK from here.
  const MAXK: u32 = ${4096 if R > 4 else 8192}u;
  var<workgroup> xq: array<vec4<u32>, MAXK / 16u>;        // 16 int8 values per vec4
  var<workgroup> xstats: array<vec2<f32>, MAXK / GS>;      // per group: (scale, 8 * sum of q)

// sum over 32 values of (nibble - 8) * x; nibble i of word j is value 8j + i. A nibble n becomes a
// float without an int-to-float conversion (a quarter-rate instruction on NVIDIA, and the limit of
// this kernel when it used one): the bits 0x4B000000 | n are the f32 2^23 + n, and subtracting
// 2^23 + 8 leaves n - 8 exactly.
fn centered(word: u32, shifts: vec4<u32>) -> vec4<f32> {
  return bitcast<vec4<f32>>(((vec4<u32>(word) >> shifts) & vec4<u32>(15u)) | vec4<u32>(0x4B000000u)) - 8388616.0;
}

fn dot_word(w: u32, x0: vec4<f32>, x1: vec4<f32>) -> f32 {
  return dot(centered(w, vec4<u32>(0u, 4u, 8u, 12u)), x0) + dot(centered(w, vec4<u32>(16u, 20u, 24u, 28u)), x1);
}

$if MASK:
  // The MASK variants spend fewer integer instructions (the scarcer ALU on NVIDIA): nibble i of a half
  // word is masked in place, no shift, so 0x4B000000 | (w & 0xF << 4i) is the f32 2^23 + n * 16^i and
  // subtracting 2^23 leaves n * 16^i exactly; the activations come pre-scaled by 16^-i (exact, shared by
  // every row of the thread). The -8 offset is applied once per word as -8 * sum(x), also shared.
  // Rounding then acts on sum |x| (n + 8) instead of sum |x| |n - 8|: the oracle's bound covers both.
  const NIBBLE_MASKS = vec4<u32>(0xFu, 0xF0u, 0xF00u, 0xF000u);
  const NIBBLE_WEIGHTS = vec4<f32>(1.0, 0.0625, 0.00390625, 0.000244140625);

  fn masked_half(half: u32) -> vec4<f32> {
    return bitcast<vec4<f32>>((vec4<u32>(half) & NIBBLE_MASKS) | vec4<u32>(0x4B000000u)) - 8388608.0;
  }

  // sum over 8 values of nibble * x, with x0, x1 pre-scaled by NIBBLE_WEIGHTS.
  fn dot_word_masked(w: u32, x0: vec4<f32>, x1: vec4<f32>) -> f32 {
    return dot(masked_half(w), x0) + dot(masked_half(w >> 16u), x1);
  }

$if I8:
  // The row's 8-value chunks in passes of one chunk per invocation (256 a pass: a whole number of
  // groups). `partial` is free until the epilogue: it carries each chunk's max, then its sum.
  $include int8_quant.wgsli

  fn quantize_row(lane: u32, k: u32) {
    let per_group = GS / 8u;
    let first = lane - lane % per_group;
    for (var start = 0u; start < k / 8u; start += 256u) {
      let chunk = start + lane;
      let live = chunk < k / 8u;
      let c = min(chunk, k / 8u - 1u);
      let a = x[2u * c];
      let b = x[2u * c + 1u];
      partial[lane] = select(0.0, octet_peak(a, b), live);
      workgroupBarrier();
      var largest = 0.0;
      for (var i = 0u; i < per_group; i++) {
        largest = max(largest, partial[first + i]);
      }
      let inverse = inverse_of(largest);
      let qa = quantized(a, inverse);
      let qb = quantized(b, inverse);
      if (live) {
        let word = chunk * 2u;        // words 4j..4j+3 are vec4 j
        let pair = octet_words(qa, qb);
        xq[word / 4u][word % 4u] = pair.x;
        xq[word / 4u][word % 4u + 1u] = pair.y;
      }
      partial[256u + lane] = f32(qa.x + qa.y + qa.z + qa.w + qb.x + qb.y + qb.z + qb.w);
      workgroupBarrier();
      if (live && lane == first) {
        var total = 0.0;
        for (var i = 0u; i < per_group; i++) {
          total += partial[256u + first + i];
        }
        xstats[chunk / per_group] = vec2<f32>(group_scale(largest), 8.0 * total);
      }
      workgroupBarrier();
    }
  }

  // 32 nibbles . 32 int8 activations, exactly. A weight word's low nibbles are its even values, the high
  // nibbles its odd ones; the activation words come in the same (even, odd) pairs: a = words 0-1, b = 2-3.
  fn dot_i8(w: vec4<u32>, a: vec4<u32>, b: vec4<u32>) -> i32 {
    let lo = w & vec4<u32>(0x0F0F0F0Fu);
    let hi = (w >> vec4<u32>(4u)) & vec4<u32>(0x0F0F0F0Fu);
    return dot4I8Packed(lo.x, a.x) + dot4I8Packed(hi.x, a.y) + dot4I8Packed(lo.y, a.z) + dot4I8Packed(hi.y, a.w)
         + dot4I8Packed(lo.z, b.x) + dot4I8Packed(hi.z, b.y) + dot4I8Packed(lo.w, b.z) + dot4I8Packed(hi.w, b.w);
  }

fn dot_chunk(w: vec4<u32>, x0: vec4<f32>, x1: vec4<f32>, x2: vec4<f32>, x3: vec4<f32>,
             x4: vec4<f32>, x5: vec4<f32>, x6: vec4<f32>, x7: vec4<f32>) -> f32 {
  let lo = vec4<u32>(0u, 4u, 8u, 12u);
  let hi = vec4<u32>(16u, 20u, 24u, 28u);
  var s = dot(centered(w.x, lo), x0) + dot(centered(w.x, hi), x1);
  s += dot(centered(w.y, lo), x2) + dot(centered(w.y, hi), x3);
  s += dot(centered(w.z, lo), x4) + dot(centered(w.z, hi), x5);
  s += dot(centered(w.w, lo), x6) + dot(centered(w.w, hi), x7);
  return s;
}

// The epilogue: each row's partial sums reduced across the KL lanes of its warp (subgroupAdd, or a
// workgroup-memory tree) and across the KSPLIT warps of its row group, then stored (with the bias)
// by lane 0 of the group's first warp: out[first_row + r] for r < R, rows past N skipped.
fn store_rows(lid: vec3<u32>, first_row: u32, sums: array<f32, R>${", sg_size: u32" if SUBGROUP else ""}) {
  // Unrolled by the template: constant indices keep `sums` in registers.
  $if SUBGROUP:
    $for r in range(R):
      let total${r} = subgroupAdd(sums[${r}]);
      if (lid.x % sg_size == 0u) {
        partial[(lid.y * R + ${r}u) * KL + lid.x] = total${r};
      }
    workgroupBarrier();
    let lane_step = sg_size;
  $else:
    $for r in range(R):
      partial[(lid.y * R + ${r}u) * KL + lid.x] = sums[${r}];
    workgroupBarrier();
    for (var stride = KL / 2u; stride > 0u; stride >>= 1u) {
      if (lid.x < stride) {
        for (var r = 0u; r < R; r++) {
          let i = (lid.y * R + r) * KL + lid.x;
          partial[i] += partial[i + stride];
        }
      }
      workgroupBarrier();
    }
    let lane_step = KL;
  if (lid.x == 0u && lid.y % KSPLIT == 0u) {
    for (var r = 0u; r < R; r++) {
      let n = first_row + r;
      var total = 0.0;
      for (var sp = 0u; sp < KSPLIT; sp++) {
        for (var lane = 0u; lane < KL; lane += lane_step) {
          total += partial[((lid.y + sp) * R + r) * KL + lane];
        }
      }
      if (n < params.n) {
        out[n] = total + select(0.0, bias[n], params.has_bias != 0u) + select(0.0, out[n], params.accumulate != 0u);
      }
    }
  }
}

@compute @workgroup_size(KL, RG, 1)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>${", @builtin(subgroup_size) sg_size: u32" if SUBGROUP else ""}) {
  let block = wid.y * groups.x + wid.x;
  let group_in_wg = lid.y / KSPLIT;
  let split = lid.y % KSPLIT;
  let first_row = block * ROWS + group_in_wg * R;
  $if not I8:
    let chunks = params.k / ${8 if WORD else 32}u;
  let last_row = params.n - 1u;
  $for r in range(R):
    let row${r} = min(first_row + ${r}u, last_row) + params.n_offset;
    var acc${r} = 0.0;
  $if I8:
    let groups_k = params.k / GS;
    let row_words4 = params.k / 32u;
    var base = split * KL + lid.x;
    // The first step's weights are requested before x is quantized, so their latency overlaps it; each
    // step then requests the next one's (clamped to the last group: harmless once past the end).
    $for u in range(U):
      var g${u} = min(base + ${u}u * KL * KSPLIT, groups_k - 1u);
      $for r in range(R):
        $for v in range(GS // 32):
          var w${u}_${r}_${v} = weights[row${r} * row_words4 + g${u} * ${GS // 32}u + ${v}u];
        var s${u}_${r} = scales[g${u} * params.n_total + row${r}];
    quantize_row(lid.y * KL + lid.x, params.k);
    loop {
      if (base >= groups_k) {
        break;
      }
      $for u in range(U):
        // A discarded (clamped) group gets zero stats, so its products vanish.
        let st${u} = select(vec2<f32>(0.0), xstats[g${u}], base + ${u}u * KL * KSPLIT < groups_k);
        $for v in range(GS // 32):
          let xa${u}_${v} = xq[g${u} * ${GS // 16}u + ${2 * v}u];
          let xb${u}_${v} = xq[g${u} * ${GS // 16}u + ${2 * v + 1}u];
        $for r in range(R):
          var d${u}_${r}: i32 = 0;
          $for v in range(GS // 32):
            d${u}_${r} += dot_i8(w${u}_${r}_${v}, xa${u}_${v}, xb${u}_${v});
          acc${r} += s${u}_${r} * st${u}.x * (f32(d${u}_${r}) - st${u}.y);
      base += KL * KSPLIT * U;
      $for u in range(U):
        g${u} = min(base + ${u}u * KL * KSPLIT, groups_k - 1u);
        $for r in range(R):
          $for v in range(GS // 32):
            w${u}_${r}_${v} = weights[row${r} * row_words4 + g${u} * ${GS // 32}u + ${v}u];
          s${u}_${r} = scales[g${u} * params.n_total + row${r}];
    }
  $else:
    for (var base = split * KL + lid.x; base < chunks; base += KL * KSPLIT * U) {
      $for u in range(U):
        let c${u} = min(base + ${u}u * KL * KSPLIT, chunks - 1u);
        let g${u} = (c${u} * ${8 if WORD else 32}u) / params.group_size;
        $for r in range(R):
          let w${u}_${r} = weights[row${r} * chunks + c${u}];
          let s${u}_${r} = scales[g${u} * params.n_total + row${r}];
      $for u in range(U):
        let keep${u} = select(0.0, 1.0, base + ${u}u * KL * KSPLIT < chunks);
        $if WORD and MASK:
          // keep folds into the shared activations: a discarded chunk's words all dot to zero.
          let x${u}_0 = keep${u} * x[c${u} * 2u];
          let x${u}_1 = keep${u} * x[c${u} * 2u + 1u];
          let xs${u}_0 = x${u}_0 * NIBBLE_WEIGHTS;
          let xs${u}_1 = x${u}_1 * NIBBLE_WEIGHTS;
          let offset${u} = 8.0 * (dot(x${u}_0, vec4<f32>(1.0)) + dot(x${u}_1, vec4<f32>(1.0)));
          $for r in range(R):
            acc${r} += s${u}_${r} * (dot_word_masked(w${u}_${r}, xs${u}_0, xs${u}_1) - offset${u});
        $elif WORD:
          let x${u}_0 = x[c${u} * 2u];
          let x${u}_1 = x[c${u} * 2u + 1u];
          $for r in range(R):
            acc${r} += keep${u} * s${u}_${r} * dot_word(w${u}_${r}, x${u}_0, x${u}_1);
        $elif MASK:
          $for j in range(8):
            let x${u}_${j} = keep${u} * x[c${u} * 8u + ${j}u];
            let xs${u}_${j} = x${u}_${j} * NIBBLE_WEIGHTS;
          let offset${u} = 8.0 * (dot(x${u}_0 + x${u}_1 + x${u}_2 + x${u}_3, vec4<f32>(1.0))
                           + dot(x${u}_4 + x${u}_5 + x${u}_6 + x${u}_7, vec4<f32>(1.0)));
          $for r in range(R):
            acc${r} += s${u}_${r} * (dot_word_masked(w${u}_${r}.x, xs${u}_0, xs${u}_1)
                                  + dot_word_masked(w${u}_${r}.y, xs${u}_2, xs${u}_3)
                                  + dot_word_masked(w${u}_${r}.z, xs${u}_4, xs${u}_5)
                                  + dot_word_masked(w${u}_${r}.w, xs${u}_6, xs${u}_7) - offset${u});
        $else:
          $for j in range(8):
            let x${u}_${j} = x[c${u} * 8u + ${j}u];
          $for r in range(R):
            acc${r} += keep${u} * s${u}_${r} * dot_chunk(w${u}_${r}, x${u}_0, x${u}_1, x${u}_2, x${u}_3, x${u}_4, x${u}_5,
                                                        x${u}_6, x${u}_7);
    }
  var sums: array<f32, R>;
  $for r in range(R):
    sums[${r}] = acc${r};
  store_rows(lid, first_row, sums${", sg_size" if SUBGROUP else ""});
}
