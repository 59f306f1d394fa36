// Q4 GEMV on pre-quantized int8 activations (the q4_gemv_int8x route):
//   out[n] = sum over chunks c of  s_w[c, n] * s_x[c] * (dot(nibbles[n, c], q[c]) - 8 * sum(q[c]))  (+ bias[n])
// x comes from int8_activations.wgsl (quantized once per activation, shared by every GEMV reading it),
// so this kernel has no prologue, no workgroup memory and, with subgroups, no barrier: a workgroup's
// life is its loads, the integer dots and one subgroupAdd per row.
//
// Every load a warp issues is contiguous: lane l of a warp takes the chunks (32 values, one vec4<u32>
// of a row) l, l + W, l + 2W, ... (W = the warp's width), so one weight load covers W x 16 consecutive
// bytes of a row, and the int8 activations, stored in two planes of 16 bytes per chunk, likewise. The
// scales, [K/gs, N], are the one strided read: a lane's R rows are consecutive, so its R scales share
// a 16-byte run. Per step a lane has R x U weight vec4s in flight, all issued before any is used
// (rows past N and chunks past K are clamped and their products discarded), R x U x 16 bytes.
//
// Per weight word: two masks, one shift and two dot4I8Packed (exact); per chunk and row one conversion
// to float and two products. The sums are exact integers below 2^24 until the per-chunk product.
$if SROWS:
  // This variant reads the weight's row-major copy of its scales, [N, K/gs] (q4gsw_scales_rows.wgsl):
  // a warp's scale loads for one row fall in one line, where the reference layout spreads them over
  // one line per group (the largest cost left in this kernel after the weights, measured on the H200).
$if SV4:
  // This variant loads a lane's 4 consecutive rows' scales as one vec4 (one 16-byte load instead of
  // four): route guard n_total and n_offset multiples of 4, so the vec4 never straddles a row of groups.
$if GLU:
  // This variant is the fused gate/up + SwiGLU: the weight packs gate rows [0, n) then up rows [n, 2n);
  // each output row reads both with the same activations, out[i] = g / (1 + exp(-g)) * u, as
  // shaders/llm/swiglu.wgsl evaluates it. One dispatch for two projections and their activation.
$if Q8:
  // It also writes its output quantized to int8 for the next int8x linear (the down projection), in
  // place of a quantize_activations dispatch: int8_activations.wgsl's layout and arithmetic, groups of
  // out_group_size within the workgroup's RG x R consecutive rows. A group's peak needs all of its rows,
  // so the route guard asks for RG x R a multiple of that group size (the workgroup holds whole groups,
  // and nothing crosses workgroups); the rows meet in workgroup memory after the last store, and one
  // barrier later each group is quantized by the invocations that hold its octets.
$if QKV:
  // This variant is the fused decode QKV: rows [0, n_q) of a packed [n_q + 2 n_kv, K] weight go to out
  // (q), the next n_kv to out_k, the last n_kv to out_v: one dispatch for three projections of one x.
$if ROPE:
  // It also applies RoPE (${ROPE} pairs) to q and k and writes the KV cache, in place of a decode step's
  // rope_kv_cache_write: that kernel's arithmetic for one token, from the workgroup's rows, which meet in
  // workgroup memory after the last store. A workgroup holds both elements of every rotation pair it
  // touches, so nothing crosses workgroups: whole heads (RG x R a multiple of head_dim), or, without a q/k
  // norm, an equal part of one head (head_dim a multiple of RG x R, itself a multiple of 4; the route guard
  // says so): with interleaved pairs its consecutive rows, with rotate-half pairs the same span of each
  // half (rows_of maps the workgroup's rows to the weight's). More, smaller workgroups for a QKV whose
  // whole heads would leave most of the GPU idle (Llama's 3,072 rows are 48 heads of 64). It writes the
  // rotated q to out and K and V (f16 pairs) into the caches at the position pos + offset[0], not the f32
  // q, k and v.
$if QKNORM:
  // It also normalizes each q and k head before RoPE (Qwen3's per-head RMSNorm, in place of the norm in
  // rope_kv_cache_write_norm): that kernel's arithmetic, 32 lanes per head summing dot(x, x) of its
  // quarters lane, lane + 32, ..., the same 32-wide tree, x * scale * w with the q or k weight [head_dim].
$if NORM:
  // It also makes its own activations (a NORM prologue, in place of the rms_norm_int8x dispatch before
  // it): each workgroup reads the f32 residual row `hidden` and computes its RMSNorm with rms_norm_int8x's
  // arithmetic (256 per-invocation sums of whole octets in the same order, the same tree, the same
  // y = x * scale * w) and quantizes y per group into workgroup memory, in the layout and with the
  // rounding of int8_activations.wgsl (held bit-equal by a test). Every workgroup repeats the norm: a row
  // of K floats, cheap beside a dispatch. K is limited to MAXK by that memory (the route guard says so).
$if KS > 1:
  // This variant splits each row's chunks over KS warps (lane l of slice j takes chunks j W + l,
  // (KS + j) W + l, ...): a long row is read in fewer dependent steps, and a short one by more lanes
  // with fewer loads each (less work after the loads return, which is what a small decode GEMV waits on).
  // With subgroups the slices' row totals meet in workgroup memory, after one barrier.
$if SUBGROUP:
  // Warps are subgroups: the workgroup's subgroups take its RG row groups in turn (one pass where the
  // subgroup is 32 wide, the NVIDIA case), and a row's lanes reduce with one subgroupAdd. The native
  // backend drops the directive (Naga does not support it yet).
  enable subgroups;
$else:
  // Warps are 32 invocations; a row's lanes reduce through a workgroup-memory tree.
const R: u32 = ${R}u;
const U: u32 = ${U}u;
const RG: u32 = ${RG}u;
$if KS > 1:
  const KS: u32 = ${KS}u;
const WG: u32 = ${32 * RG * KS}u;

struct Params {
  k: u32,
  n: u32,
  n_total: u32,
  n_offset: u32,
  group_size: u32,
  has_bias: u32,
  accumulate: u32,      // out += the product (a residual add folded in; not QKV or GLU)
  $if QKV:
    n_q: u32,
    n_kv: u32,
  $if ROPE:
    half: u32,            // head_dim / 2
    pos: u32,             // the token's position, less the cache's offset
    capacity: u32,        // cache rows
    table_rows: u32,
  $if Q8:
    out_group_size: u32,  // the quantized output's group size (the next linear's)
  $if NORM:
    eps: f32,             // the RMSNorm's, rounded to f32
  $if QKNORM:
    qk_eps: f32,          // the q/k norm's, rounded to f32
}

$if NORM:
  @group(0) @binding(0) var<storage, read> hidden: array<vec4<f32>>;    // the residual row, f32 [K]
  @group(0) @binding(1) var<storage, read> norm_weight: array<vec4<f32>>;
  const MAXK: u32 = ${MAXK}u;
  const NORM_LANES: u32 = 256u;                 // rms_norm_int8x's workgroup: its partial sums and tree
  var<workgroup> xq: array<vec4<u32>, MAXK / 16u>;      // the row's int8 words, int8_activations' layout
  var<workgroup> xstats: array<vec2<f32>, MAXK / 32u>;  // per chunk: (scale, 8 * sum of q)
  var<workgroup> octet_peaks: array<f32, MAXK / 8u>;
  var<workgroup> squares: array<f32, NORM_LANES>;
$else:
  @group(0) @binding(0) var<storage, read> xq: array<vec4<u32>>;
  @group(0) @binding(1) var<storage, read> xstats: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read> weights: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> scales: array<${"vec4<f32>" if SV4 else "f32"}>;
$if not GLU and not ROPE:
  @group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<uniform> params: Params;
$if QKV and not ROPE:
  @group(0) @binding(7) var<storage, read_write> out_k: array<f32>;
  @group(0) @binding(8) var<storage, read_write> out_v: array<f32>;
$if Q8:
  @group(0) @binding(7) var<storage, read_write> act_words: array<u32>;
  @group(0) @binding(8) var<storage, read_write> act_stats: array<vec2<f32>>;
  const ROWS: u32 = ${RG * R}u;                 // the workgroup's output rows: whole groups
  const OCTETS: u32 = ROWS / 8u;
  var<workgroup> rows_out: array<f32, ROWS>;
$if ROPE:
  @group(0) @binding(7) var<storage, read_write> k_cache: array<u32>;
  @group(0) @binding(8) var<storage, read_write> v_cache: array<u32>;
  @group(0) @binding(9) var<storage, read> table: array<vec2<f32>>;
  @group(0) @binding(10) var<storage, read> offset: array<u32>;   // the cache's GPU-side position offset
  const ROWS: u32 = ${RG * R}u;                 // the workgroup's rows: whole heads
  var<workgroup> rows_out: array<f32, ROWS>;
$if QKNORM:
  @group(0) @binding(11) var<storage, read> q_norm: array<f32>;
  @group(0) @binding(12) var<storage, read> k_norm: array<f32>;
  const NORM_TREE: u32 = 32u;                   // rope_kv_cache_write_norm's workgroup: its lanes and tree
  var<workgroup> head_squares: array<f32, NORM_TREE * ROWS / 4u>;   // per head (at least 4 rows) its lanes
$if SUBGROUP and KS > 1:
  var<workgroup> slices: array<f32, ${KS * RG * R * (2 if GLU else 1)}>;
$if not SUBGROUP:
  var<workgroup> partial: array<f32, ${32 * KS * RG * R * (2 if GLU else 1)}>;

// 32 nibbles . 32 int8 activations, exactly: a weight word's low nibbles are its even values and the
// high nibbles its odd ones; the activation words come in the same (even, odd) pairs, a then b.
fn dot_chunk(w: vec4<u32>, a: vec4<u32>, b: vec4<u32>) -> i32 {
  let lo = w & vec4<u32>(0x0F0F0F0Fu);
  let hi = (w >> vec4<u32>(4u)) & vec4<u32>(0x0F0F0F0Fu);
  return dot4I8Packed(lo.x, a.x) + dot4I8Packed(hi.x, a.y) + dot4I8Packed(lo.y, a.z) + dot4I8Packed(hi.y, a.w)
       + dot4I8Packed(lo.z, b.x) + dot4I8Packed(hi.z, b.y) + dot4I8Packed(lo.w, b.z) + dot4I8Packed(hi.w, b.w);
}

$if GLU:
  // exp(-g) = inf for a very negative g gives -0, not NaN.
  fn store_glu(row: u32, g: f32, u: f32) {
    if (row < params.n) {
      $if Q8:
        let value = g / (1.0 + exp(-g)) * u;
        out[row] = value;
        rows_out[row % ROWS] = value;
      $else:
        out[row] = g / (1.0 + exp(-g)) * u;
    }
  }

$else:
  fn store(row: u32, total: f32) {
    if (row < params.n) {
      $if ROPE:
        rows_out[row % ROWS] = total;
      $else:
        let value = total + select(0.0, bias[row], params.has_bias != 0u);
      $if QKV and not ROPE:
        if (row < params.n_q) {
          out[row] = value;
        } else if (row < params.n_q + params.n_kv) {
          out_k[row - params.n_q] = value;
        } else {
          out_v[row - params.n_q - params.n_kv] = value;
        }
      $elif not ROPE:
        out[row] = value + select(0.0, out[row], params.accumulate != 0u);
    }
  }

$if Q8 or NORM:
  $include int8_quant.wgsli

$if NORM:
  // Values 8 o .. 8 o + 7 of the normalized row, as rms_norm_int8x computes them.
  fn normalized(o: u32, scale: f32) -> array<vec4<f32>, 2> {
    return array<vec4<f32>, 2>(hidden[2u * o] * scale * norm_weight[2u * o],
                               hidden[2u * o + 1u] * scale * norm_weight[2u * o + 1u]);
  }

  $if SUBGROUP:
    // normalize_row's subgroup path: invocation `index` < K / 8 quantizes octet `index` (x, w: its values
    // and weights); lanes 8 g .. are a group's octets, lanes 4 c .. a chunk's, the first of them storing.
    fn quantize_own(index: u32, scale: f32, x: array<vec4<f32>, 2>, w: array<vec4<f32>, 2>) {
      let a = x[0] * scale * w[0];
      let b = x[1] * scale * w[1];
      var largest = max(0.0, octet_peak(a, b));
      for (var mask = 1u; mask < params.group_size / 8u; mask <<= 1u) {
        largest = max(largest, subgroupShuffleXor(largest, mask));
      }
      let inverse = inverse_of(largest);
      let qa = quantized(a, inverse);
      let qb = quantized(b, inverse);
      let pair = octet_words(qa, qb);
      let even = pair.x;
      let odd = pair.y;
      var total = qa.x + qa.y + qa.z + qa.w + qb.x + qb.y + qb.z + qb.w;
      total += subgroupShuffleDown(total, 1u);
      total += subgroupShuffleDown(total, 2u);      // lane 4 c: the chunk's four octets
      let words = vec4<u32>(even, odd, subgroupShuffleDown(even, 1u), subgroupShuffleDown(odd, 1u));
      let later = vec4<u32>(subgroupShuffleDown(even, 2u), subgroupShuffleDown(odd, 2u),
                            subgroupShuffleDown(even, 3u), subgroupShuffleDown(odd, 3u));
      let chunks = params.k / 32u;
      if (index % 4u != 0u || index >= params.k / 8u) {
        return;
      }
      // Octets 0, 1 of the chunk in plane 0 (values 0-15), octets 2, 3 in plane 1.
      let c = index / 4u;
      xq[c] = words;
      xq[chunks + c] = later;
      xstats[c] = vec2<f32>(group_scale(largest), 8.0 * f32(total));
    }

  // The prologue: the RMSNorm of `hidden` times norm_weight, quantized per group into xq and xstats.
  // Invocations stand in for rms_norm_int8x's NORM_LANES in turn (any WG), then take octets for the peaks
  // and whole chunks for the words (a chunk's two vec4s and its stats by one invocation: no write to
  // another's vec4). Called first, in uniform control flow; ends on a barrier.
  $if SUBGROUP:
    // With subgroups of 32 or more (lane = index % width, as the rows' sums already assume) and an octet
    // per invocation, the same values take fewer barriers: the tree's last five levels (strides 16 to 1)
    // are shuffles, each subgroup repeating them on the 32 sums left; each invocation keeps its octet of
    // the row and the norm's weights from the start, and a group's peak and a chunk's words and sum meet by
    // shuffles, not through octet_peaks and a barrier. Max and integer sums are exact in any order, so
    // the words and stats are rms_norm_int8x's bit for bit.
  fn normalize_row(index: u32${", subgroup_lane: u32, width: u32" if SUBGROUP else ""}) {
    let octets = params.k / 8u;
    $if SUBGROUP:
      let fast = width >= 32u && octets <= WG;
      let own = min(index, octets - 1u);
      let own_x = array<vec4<f32>, 2>(hidden[2u * own], hidden[2u * own + 1u]);
      let own_w = array<vec4<f32>, 2>(norm_weight[2u * own], norm_weight[2u * own + 1u]);
    for (var lane = index; lane < NORM_LANES; lane += WG) {
      var acc = 0.0;
      for (var o = lane; o < octets; o += NORM_LANES) {
        let a = hidden[2u * o];
        let b = hidden[2u * o + 1u];
        acc += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w + b.x * b.x + b.y * b.y + b.z * b.z + b.w * b.w;
      }
      squares[lane] = acc;
    }
    workgroupBarrier();
    $if SUBGROUP:
      let last = select(1u, 32u, fast);       // the tree's levels in workgroup memory stop at this stride
    $else:
      let last = 1u;
    for (var stride = NORM_LANES / 2u; stride >= last; stride >>= 1u) {
      for (var lane = index; lane < stride; lane += WG) {
        squares[lane] += squares[lane + stride];
      }
      workgroupBarrier();
    }
    $if SUBGROUP:
      if (fast) {
        var total = squares[subgroup_lane % 32u];
        for (var stride = 16u; stride > 0u; stride >>= 1u) {
          total += subgroupShuffleDown(total, stride);    // lanes below the stride: the tree's sums
        }
        let scale = inverseSqrt(subgroupShuffle(total, 0u) / f32(params.k) + params.eps);
        quantize_own(index, scale, own_x, own_w);
        workgroupBarrier();
        return;
      }
    let scale = inverseSqrt(squares[0] / f32(params.k) + params.eps);
    for (var o = index; o < octets; o += WG) {
      let y = normalized(o, scale);
      octet_peaks[o] = octet_peak(y[0], y[1]);
    }
    workgroupBarrier();
    let chunks = params.k / 32u;
    let per_group = params.group_size / 8u;
    for (var c = index; c < chunks; c += WG) {
      let first = (4u * c) - (4u * c) % per_group;     // the group's first octet
      var largest = 0.0;
      for (var i = 0u; i < per_group; i++) {
        largest = max(largest, octet_peaks[first + i]);
      }
      let inverse = inverse_of(largest);
      var words: array<vec2<u32>, 4>;
      var total = vec4<i32>(0);
      for (var j = 0u; j < 4u; j++) {
        let y = normalized(4u * c + j, scale);
        let qa = quantized(y[0], inverse);
        let qb = quantized(y[1], inverse);
        words[j] = octet_words(qa, qb);
        total += qa + qb;
      }
      // Octets 0, 1 of the chunk in plane 0 (values 0-15), octets 2, 3 in plane 1.
      xq[c] = vec4<u32>(words[0], words[1]);
      xq[chunks + c] = vec4<u32>(words[2], words[3]);
      xstats[c] = vec2<f32>(group_scale(largest), 8.0 * f32(total.x + total.y + total.z + total.w));
    }
    workgroupBarrier();
  }

$if Q8:
  // The workgroup's rows (rows_out, block `block` of ROWS) to int8: invocation o < OCTETS takes octet o,
  // octet block OCTETS + o of the output row, with int8_activations.wgsl's arithmetic (held bit-equal by
  // a test). Each reads its whole group for the peak, and an octet starting a chunk quantizes the
  // chunk's other three again for its sum (max and integer sums are exact in any order): one barrier,
  // where quantize_octet takes three. Rows past n are whole groups (n is a multiple of the group size):
  // not live, nothing stored. Called in uniform control flow.
  fn quantize_rows(block: u32, index: u32) {
    workgroupBarrier();                         // every row of the block is in rows_out
    let o = min(index, OCTETS - 1u);
    let at = block * OCTETS + o;
    let first = (o - o % (params.out_group_size / 8u)) * 8u;
    var largest = 0.0;
    for (var i = 0u; i < params.out_group_size; i++) {
      largest = max(largest, peak_of(rows_out[first + i]));
    }
    let inverse = inverse_of(largest);
    let a = vec4<f32>(rows_out[8u * o], rows_out[8u * o + 1u], rows_out[8u * o + 2u], rows_out[8u * o + 3u]);
    let b = vec4<f32>(rows_out[8u * o + 4u], rows_out[8u * o + 5u], rows_out[8u * o + 6u], rows_out[8u * o + 7u]);
    let qa = quantized(a, inverse);
    let qb = quantized(b, inverse);
    if (index >= OCTETS || at >= params.n / 8u) {
      return;
    }
    // Octet j of chunk c: words 2j, 2j + 1 of the chunk's 8, in plane j / 2 (16 values per plane).
    let chunk = at / 4u;
    let j = at % 4u;
    let word = select(0u, params.n / 8u, j >= 2u) + 4u * chunk + 2u * (j % 2u);
    let pair = octet_words(qa, qb);
    act_words[word] = pair.x;
    act_words[word + 1u] = pair.y;
    if (j == 0u) {
      var total = qa + qb;
      for (var p = 1u; p < 4u; p++) {
        let base = 8u * (o + p);
        total += quantized(vec4<f32>(rows_out[base], rows_out[base + 1u], rows_out[base + 2u], rows_out[base + 3u]), inverse)
               + quantized(vec4<f32>(rows_out[base + 4u], rows_out[base + 5u], rows_out[base + 6u], rows_out[base + 7u]), inverse);
      }
      act_stats[chunk] = vec2<f32>(group_scale(largest), 8.0 * f32(total.x + total.y + total.z + total.w));
    }
  }

$if ROPE:
  // A workgroup's span of a head: all head_dim rows, or its part of them (ROWS < head_dim).
  fn head_span() -> u32 {
    return min(ROWS, 2u * params.half);
  }

  // Where element e of a head is among its part's `span` rows in rows_out (`part` 0 of whole heads: e).
  // Rotate-half pairs: a part is the same span of both halves, the first half's rows then the second's.
  fn local_of(e: u32, part: u32, span: u32) -> u32 {
    $if ROPE == "half":
      let pairs = span / 2u;
      return select(e - params.half + pairs - part * pairs, e - part * pairs, e < params.half);
    $else:
      return e - part * span;
  }

  // The weight's row of workgroup row `row` (block * ROWS + its row in rows_out): local_of's inverse.
  fn rows_of(row: u32) -> u32 {
    $if ROPE == "half":
      let span = head_span();
      let within = row % (2u * params.half);
      let part = within / span;
      let local = within % span;
      let pairs = span / 2u;
      let element = part * pairs + select(params.half + local - pairs, local, local < pairs);
      return row - within + element;
    $else:
      return row;
  }

  fn rotate(a: f32, b: f32, rotation: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(a * rotation.x - b * rotation.y, a * rotation.y + b * rotation.x);
  }

  // The elements (e0, e0 + 1) and (e1, e1 + 1) of a head's quarter j (rope_kv_cache_write.wgsl's).
  fn elements(j: u32) -> vec2<u32> {
    $if ROPE == "interleaved":
      return vec2<u32>(4u * j, 4u * j + 2u);
    $else:
      return vec2<u32>(2u * j, params.half + 2u * j);
  }

  // The workgroup's rows (rows_out, block `block` of ROWS: whole heads of q, k or v, or a part of one) rotated
  // and stored: invocation i < ROWS / 4 takes a quarter j of the block's head i / (span / 4), as one invocation of
  // rope_kv_cache_write.wgsl does for token 0 (held bit-equal by a test). A position at or past the
  // cache or the table writes nothing. Called in uniform control flow.
  $if QKNORM:
    // A head's partial sum of squares at tree slot `slot`: its quarters slot % 32, + 32, ...
    fn head_square_slot(slot: u32, dim: u32, quarter: u32) -> f32 {
      let at = slot / NORM_TREE * dim;
      var acc = 0.0;
      for (var j = slot % NORM_TREE; j < quarter; j += NORM_TREE) {
        let e = elements(j);
        let x = vec4<f32>(rows_out[at + e.x], rows_out[at + e.x + 1u], rows_out[at + e.y], rows_out[at + e.y + 1u]);
        acc += dot(x, x);
      }
      return acc;
    }

  fn rope_rows(block: u32, index: u32${", width: u32" if SUBGROUP else ""}) {
    workgroupBarrier();                         // every row of the block is in rows_out
    let dim = 2u * params.half;
    let span = head_span();
    let part = block * ROWS % dim / span;       // 0 for whole heads
    let quarter = span / 4u;                    // a head's quarters here: an invocation each
    $if QKNORM:
      // Each head's sum of squares (V heads' too, unused), as rope_kv_cache_write_norm's workgroup makes it.
      let lanes = NORM_TREE * (ROWS / dim);
      $if SUBGROUP:
        // With subgroups of 32 or more and a slot per invocation, a head's 32 slots are one subgroup's
        // lanes (lane = index % width) and the tree is shuffles (the same sums in the same order).
        let fast = width >= 32u && lanes <= WG;
        if (fast) {
          var acc = head_square_slot(min(index, lanes - 1u), dim, quarter);
          for (var stride = NORM_TREE / 2u; stride > 0u; stride >>= 1u) {
            acc += subgroupShuffleDown(acc, stride);
          }
          if (index < lanes) {
            head_squares[index] = acc;
          }
        } else {
          for (var slot = index; slot < lanes; slot += WG) {
            head_squares[slot] = head_square_slot(slot, dim, quarter);
          }
        }
      $else:
        for (var slot = index; slot < lanes; slot += WG) {
          head_squares[slot] = head_square_slot(slot, dim, quarter);
        }
      workgroupBarrier();
      $if SUBGROUP:
        let steps = select(NORM_TREE / 2u, 0u, fast);
      $else:
        let steps = NORM_TREE / 2u;
      for (var stride = steps; stride > 0u; stride >>= 1u) {
        for (var slot = index; slot < lanes; slot += WG) {
          if (slot % NORM_TREE < stride) {
            head_squares[slot] += head_squares[slot + stride];
          }
        }
        workgroupBarrier();
      }
    let head = index / quarter;
    let j = part * quarter + index % quarter;   // the quarter of the whole head
    let first = block * ROWS - part * span + head * dim;    // the head's first row of the packed q, k, v rows
    let position = params.pos + offset[0];
    if (head >= ROWS / span || first >= params.n || position >= params.capacity || position >= params.table_rows) {
      return;
    }
    let e = elements(j);
    let at = vec2<u32>(local_of(e.x, part, span), local_of(e.y, part, span)) + head * span;
    ${"var" if QKNORM else "let"} x = vec4<f32>(rows_out[at.x], rows_out[at.x + 1u], rows_out[at.y], rows_out[at.y + 1u]);
    let kv_heads = params.n_kv / dim;
    if (first >= params.n_q + params.n_kv) {    // a V head: its values as they are
      let row = (position * kv_heads + (first - params.n_q - params.n_kv) / dim) * params.half;
      v_cache[row + e.x / 2u] = pack2x16float(x.xy);
      v_cache[row + e.y / 2u] = pack2x16float(x.zw);
      return;
    }
    $if QKNORM:
      let scale = inverseSqrt(head_squares[head * NORM_TREE] / f32(dim) + params.qk_eps);
      var w: vec4<f32>;
      if (first < params.n_q) {
        w = vec4<f32>(q_norm[e.x], q_norm[e.x + 1u], q_norm[e.y], q_norm[e.y + 1u]);
      } else {
        w = vec4<f32>(k_norm[e.x], k_norm[e.x + 1u], k_norm[e.y], k_norm[e.y + 1u]);
      }
      x = x * scale * w;
    let rotation_x = table[position * params.half + 2u * j];
    let rotation_y = table[position * params.half + 2u * j + 1u];
    $if ROPE == "interleaved":
      let a = rotate(x.x, x.y, rotation_x);     // (e0, e0 + 1)
      let b = rotate(x.z, x.w, rotation_y);     // (e1, e1 + 1)
      let rotated = vec4<f32>(a, b);
    $else:
      let a = rotate(x.x, x.z, rotation_x);     // (e0, e1)
      let b = rotate(x.y, x.w, rotation_y);     // (e0 + 1, e1 + 1)
      let rotated = vec4<f32>(a.x, b.x, a.y, b.y);
    if (first < params.n_q) {                   // a q head: out is [heads, head_dim] for the token
      out[first + e.x] = rotated.x;
      out[first + e.x + 1u] = rotated.y;
      out[first + e.y] = rotated.z;
      out[first + e.y + 1u] = rotated.w;
      return;
    }
    let row = (position * kv_heads + (first - params.n_q) / dim) * params.half;
    k_cache[row + e.x / 2u] = pack2x16float(rotated.xy);
    k_cache[row + e.y / 2u] = pack2x16float(rotated.zw);
  }

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) index: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>${", @builtin(subgroup_invocation_id) lane: u32, @builtin(subgroup_size) subgroup_size: u32" if SUBGROUP else ""}) {
  $if NORM:
    normalize_row(index${", lane, subgroup_size" if SUBGROUP else ""});
  let block = wid.y * groups.x + wid.x;
  let chunks = params.k / 32u;
  let last_row = params.n - 1u;
  $if SUBGROUP:
    // A warp is a subgroup, or the whole workgroup where a subgroup is wider (adapters report up to
    // 128 lanes, WebGPU's cap: workgroups of 128 and more need no cap, and go without the min(), which
    // cost the r1u2w2k4 shape 84% -> 70% of the stream on the H200). A uniform trip count keeps
    // subgroupAdd in uniform control flow; a subgroup past the last row group computes clamped rows
    // and stores nothing.
    $if 32 * RG * KS < 128:
      let width = min(subgroup_size, WG);
    $else:
      let width = subgroup_size;
    $if KS > 1:
      let passes = (RG * KS + WG / width - 1u) / (WG / width);
      let span = width * KS;                                // chunks a row's slices cover per step
    $else:
      let passes = (RG + WG / width - 1u) / (WG / width);
  $else:
    let lane = index % ${32 * KS}u;
    let width = ${32 * KS}u;
    let passes = 1u;
  $if KS > 1 and SUBGROUP:
    let steps = (chunks + span * U - 1u) / (span * U);
  $else:
    let steps = (chunks + width * U - 1u) / (width * U);
  for (var turn = 0u; turn < passes; turn++) {
    $if KS > 1 and SUBGROUP:
      let warp = index / width + turn * (WG / width);
      let group = warp / KS;                                // this warp's row group
      let first = (warp % KS) * width + lane;               // and its slice's first chunk
    $else:
      let group = index / width + turn * (WG / width);      // this warp's row group
    let first_row = (block * RG + min(group, RG - 1u)) * R;
    // h: "" for the row, and "u" for its up row (row + n) in the GLU variants.
    $for r in range(R):
      $if ROPE:
        let row${r} = rows_of(min(first_row + ${r}u, last_row)) + params.n_offset;
      $else:
        let row${r} = min(first_row + ${r}u, last_row) + params.n_offset;
      $for h in (["", "u"] if GLU else [""]):
        var acc${h}${r} = 0.0;
    for (var step = 0u; step < steps; step++) {
      // Every load of the step first: weights, scales, activations.
      $for u in range(U):
        $if KS > 1 and SUBGROUP:
          let at${u} = (step * U + ${u}u) * span + first;
        $else:
          let at${u} = (step * U + ${u}u) * width + lane;
        let c${u} = min(at${u}, chunks - 1u);
        let g${u} = c${u} * 32u / params.group_size;
        $for h in (["", "u"] if GLU else [""]):
          $for r in range(R):
            let w${h}${u}_${r} = weights[(row${r}${" + params.n" if h else ""}) * chunks + c${u}];
            $if SROWS:
              let s${h}${u}_${r} = scales[(row${r}${" + params.n" if h else ""}) * (params.k / params.group_size) + g${u}];
            $elif not SV4:
              let s${h}${u}_${r} = scales[g${u} * params.n_total + row${r}${" + params.n" if h else ""}];
          $if SV4:
            // row0 is a multiple of 4 (clamped rows stay in its vec4: n_total is a multiple of 4 too).
            $for q in range(R // 4):
              let sv${h}${u}_${q} = scales[(g${u} * params.n_total + row${4 * q}${" + params.n" if h else ""}) / 4u];
            $for r in range(R):
              let s${h}${u}_${r} = sv${h}${u}_${r // 4}[${r % 4}];
        let a${u} = xq[c${u}];
        let b${u} = xq[chunks + c${u}];
        // A discarded (clamped) chunk gets zero stats, so its products vanish.
        let st${u} = select(vec2<f32>(0.0), xstats[c${u}], at${u} < chunks);
      $for u in range(U):
        $for h in (["", "u"] if GLU else [""]):
          $for r in range(R):
            acc${h}${r} += s${h}${u}_${r} * st${u}.x * (f32(dot_chunk(w${h}${u}_${r}, a${u}, b${u})) - st${u}.y);
    }
    $if SUBGROUP and KS > 1:
      // slices: [half][row group][row][slice]
      let live = group < RG && lane == 0u;
      $for r in range(R):
        $for i in range(2 if GLU else 1):
          let total${["", "u"][i]}${r} = subgroupAdd(acc${["", "u"][i]}${r});
          if (live) {
            slices[(${i * RG * R}u + group * R + ${r}u) * KS + warp % KS] = total${["", "u"][i]}${r};
          }
    $elif SUBGROUP:
      let live = group < RG && lane == 0u;
      $for r in range(R):
        $for h in (["", "u"] if GLU else [""]):
          let total${h}${r} = subgroupAdd(acc${h}${r});
        if (live) {
          $if GLU:
            store_glu(first_row + ${r}u, total${r}, totalu${r});
          $else:
            store(first_row + ${r}u, total${r});
        }
    $else:
      // partial: [half][row group][row][lane]
      $for i in range(2 if GLU else 1):
        $for r in range(R):
          partial[${i * 32 * KS * RG * R}u + (group * R + ${r}u) * ${32 * KS}u + lane] = acc${["", "u"][i]}${r};
      workgroupBarrier();
      for (var stride = ${16 * KS}u; stride > 0u; stride >>= 1u) {
        if (lane < stride) {
          for (var r = 0u; r < ${R * (2 if GLU else 1)}u; r++) {
            let i = (r / R * RG * R + group * R + r % R) * ${32 * KS}u + lane;
            partial[i] += partial[i + stride];
          }
        }
        workgroupBarrier();
      }
      if (lane == 0u) {
        for (var r = 0u; r < R; r++) {
          let total = partial[(group * R + r) * ${32 * KS}u];        // the row's (a GLU's gate row's)
          $if GLU:
            store_glu(first_row + r, total, partial[(RG * R + group * R + r) * ${32 * KS}u]);
          $else:
            store(first_row + r, total);
        }
      }
  }
  $if SUBGROUP and KS > 1:
    workgroupBarrier();
    // One invocation per row adds up its slices' totals.
    if (index < RG * R) {
      var total = 0.0;
      $if GLU:
        var totalu = 0.0;
      for (var j = 0u; j < KS; j++) {
        total += slices[index * KS + j];
        $if GLU:
          totalu += slices[(${RG * R}u + index) * KS + j];
      }
      $if GLU:
        store_glu(block * RG * R + index, total, totalu);
      $else:
        store(block * RG * R + index, total);
    }
  $if Q8:
    quantize_rows(block, index);
  $if ROPE:
    rope_rows(block, index${", subgroup_size" if SUBGROUP else ""});
}
