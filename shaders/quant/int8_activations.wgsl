// Quantize f32 activation rows to int8 per group of gs values, once for every Q4 linear that reads
// them (the decode's q4_gemv_int8x route: one row; the prefill's q4_gemm_dp4a: every row): scale = max|x| / 127, q = round_half_even(x * (127 / max|x|)), clamped
// to +-127, the arithmetic of the fused int8 GEMV (q4gsw_gemv.wgsl's quantize_row), so one numpy twin
// serves both. A group holding a NaN, an infinity or a magnitude >= 1e38 gets a NaN scale: its outputs
// are NaN, not wrong.
//
// Layout, made for the GEMV's loads: chunk c = values 32c..32c+31 (one vec4<u32> of a weight row)
// becomes two vec4<u32> of int8, words[c] (values 0-15) and words[K/32 + c] (values 16-31), so a warp
// whose lanes take consecutive chunks reads consecutive 16 bytes. Each u32 packs 4 values in the order
// of a weight word's nibbles: (v0, v2, v4, v6) then (v1, v3, v5, v7), i.e. its low then high nibbles.
// stats[c] = (the chunk's group scale, 8 * sum of the chunk's q): the GEMV's -8 offset per chunk.
// Row r of [M, K] activations is laid out so at words r K/4 and stats r K/32 (workgroup row wid.y).
//
// One invocation per 8 values (two vec4 loads, one word pair), WG of them per workgroup (a whole number
// of groups): the group's peak and each chunk's sum are combined through workgroup memory. The row is
// short (at most a few thousand values) and this is one dispatch on the decode's critical path, so it
// is spread as wide as it goes rather than looped.
$if NORM:
  // This variant is RMSNorm and the quantization in one dispatch (rms_norm_int8x): one workgroup per
  // row normalizes it, y = x * inverseSqrt(mean(x^2) + eps) * w (rms_norm.wgsl's arithmetic and its
  // workgroup tree; each invocation sums whole octets, the same number of squares per invocation),
  // writes y (f32: prefill-style consumers and the checks read it) and quantizes it, in passes of WG
  // octets: the producer of the decode's activations emits them already quantized.
const WG: u32 = 256u;

struct Params {
  k: u32,
  group_size: u32,
  $if NORM:
    eps: f32,
}

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> words: array<u32>;
@group(0) @binding(2) var<storage, read_write> stats: array<vec2<f32>>;
@group(0) @binding(3) var<uniform> params: Params;
$if NORM:
  @group(0) @binding(4) var<storage, read> w: array<vec4<f32>>;
  @group(0) @binding(5) var<storage, read_write> y: array<vec4<f32>>;
  var<workgroup> squares: array<f32, WG>;
var<workgroup> peaks: array<f32, WG>;
var<workgroup> sums: array<i32, WG>;

$include int8_quant.wgsli

// Octet `at` (values 8 at .. 8 at + 7, = a, b) of the row whose first octet is `row_octets` of all rows,
// held by invocation `lane` of a workgroup whose WG invocations hold consecutive octets; `live` is false
// past the row. Called in uniform control flow.
fn quantize_octet(lane: u32, at: u32, live: bool, row_octets: u32, a: vec4<f32>, b: vec4<f32>) {
  peaks[lane] = select(0.0, octet_peak(a, b), live);
  workgroupBarrier();
  let per_group = params.group_size / 8u;
  let first = lane - lane % per_group;
  var largest = 0.0;
  for (var i = 0u; i < per_group; i++) {
    largest = max(largest, peaks[first + i]);
  }
  let inverse = inverse_of(largest);
  let qa = quantized(a, inverse);
  let qb = quantized(b, inverse);
  // Octet j of chunk c: words 2j, 2j + 1 of the chunk's 8, in plane j / 2 (16 values per plane).
  let chunk = at / 4u;
  let j = at % 4u;
  let word = 2u * row_octets + select(0u, params.k / 8u, j >= 2u) + 4u * chunk + 2u * (j % 2u);
  if (live) {
    let pair = octet_words(qa, qb);
    words[word] = pair.x;
    words[word + 1u] = pair.y;
  }
  let total = qa + qb;
  sums[lane] = total.x + total.y + total.z + total.w;
  workgroupBarrier();
  if (live && j == 0u) {
    let scale = group_scale(largest);
    let chunk_sum = sums[lane] + sums[lane + 1u] + sums[lane + 2u] + sums[lane + 3u];
    stats[row_octets / 4u + chunk] = vec2<f32>(scale, 8.0 * f32(chunk_sum));
  }
  workgroupBarrier();       // peaks and sums are rewritten by the next pass
}

$if NORM:
  @compute @workgroup_size(WG)
  fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let octets = params.k / 8u;
    let row_octets = wid.y * octets;             // one workgroup per row
    var acc = 0.0;
    for (var o = lane; o < octets; o += WG) {
      let a = x[2u * (row_octets + o)];
      let b = x[2u * (row_octets + o) + 1u];
      acc += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w + b.x * b.x + b.y * b.y + b.z * b.z + b.w * b.w;
    }
    squares[lane] = acc;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
      if (lane < stride) {
        squares[lane] += squares[lane + stride];
      }
      workgroupBarrier();
    }
    let scale = inverseSqrt(squares[0] / f32(params.k) + params.eps);
    for (var start = 0u; start < octets; start += WG) {
      let octet = start + lane;
      let live = octet < octets;
      let at = min(octet, octets - 1u);
      let a = x[2u * (row_octets + at)] * scale * w[2u * at];
      let b = x[2u * (row_octets + at) + 1u] * scale * w[2u * at + 1u];
      if (live) {
        y[2u * (row_octets + at)] = a;
        y[2u * (row_octets + at) + 1u] = b;
      }
      quantize_octet(lane, at, live, row_octets, a, b);
    }
  }
$else:
  @compute @workgroup_size(WG)
  fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let octets = params.k / 8u;
    let octet = wid.x * WG + lane;               // values 8 * octet .. 8 * octet + 7 of row wid.y
    let at = min(octet, octets - 1u);
    let row_octets = wid.y * octets;
    quantize_octet(lane, at, octet < octets, row_octets, x[2u * (row_octets + at)], x[2u * (row_octets + at) + 1u]);
  }
