// Quantize one f32 activation row to int8 per group of gs values, once for every Q4 GEMV that reads
// it (the q4_gemv_int8x route): scale = max|x| / 127, q = round_half_even(x * (127 / max|x|)), clamped
// to +-127, the arithmetic of the fused int8 GEMV (q4gsw_gemv.wgsl's quantize_row), so one numpy twin
// serves both. A group holding a NaN, an infinity or a magnitude >= 1e38 gets a NaN scale: its outputs
// are NaN, not wrong.
//
// Layout, made for the GEMV's loads: chunk c = values 32c..32c+31 (one vec4<u32> of a weight row)
// becomes two vec4<u32> of int8, words[c] (values 0-15) and words[K/32 + c] (values 16-31), so a warp
// whose lanes take consecutive chunks reads consecutive 16 bytes. Each u32 packs 4 values in the order
// of a weight word's nibbles: (v0, v2, v4, v6) then (v1, v3, v5, v7), i.e. its low then high nibbles.
// stats[c] = (the chunk's group scale, 8 * sum of the chunk's q): the GEMV's -8 offset per chunk.
//
// One invocation per 8 values (two vec4 loads, one word pair), WG of them per workgroup (a whole number
// of groups): the group's peak and each chunk's sum are combined through workgroup memory. The row is
// short (at most a few thousand values) and this is one dispatch on the decode's critical path, so it
// is spread as wide as it goes rather than looped.
const WG: u32 = 256u;
const TOO_LARGE: f32 = 1.0e38;

struct Params {
  k: u32,
  group_size: u32,
}

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> words: array<u32>;
@group(0) @binding(2) var<storage, read_write> stats: array<vec2<f32>>;
@group(0) @binding(3) var<uniform> params: Params;
var<workgroup> peaks: array<f32, WG>;
var<workgroup> sums: array<i32, WG>;

fn quantized(v: vec4<f32>, inverse: f32) -> vec4<i32> {
  return vec4<i32>(clamp(round(v * inverse), vec4<f32>(-127.0), vec4<f32>(127.0)));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
  let octets = params.k / 8u;
  let octet = wid.x * WG + lane;               // values 8 * octet .. 8 * octet + 7
  let live = octet < octets;
  let at = min(octet, octets - 1u);
  let a = x[2u * at];
  let b = x[2u * at + 1u];
  // abs(NaN) < TOO_LARGE is false, so a non-finite value reads as TOO_LARGE.
  let finite = all(abs(a) < vec4<f32>(TOO_LARGE)) && all(abs(b) < vec4<f32>(TOO_LARGE));
  let peak = max(max(max(abs(a.x), abs(a.y)), max(abs(a.z), abs(a.w))),
                 max(max(abs(b.x), abs(b.y)), max(abs(b.z), abs(b.w))));
  peaks[lane] = select(0.0, select(TOO_LARGE, peak, finite), live);
  workgroupBarrier();
  let per_group = params.group_size / 8u;
  let first = lane - lane % per_group;
  var largest = 0.0;
  for (var i = 0u; i < per_group; i++) {
    largest = max(largest, peaks[first + i]);
  }
  let inverse = select(0.0, 127.0 / largest, largest > 0.0 && largest < TOO_LARGE);
  let qa = quantized(a, inverse);
  let qb = quantized(b, inverse);
  // Octet j of chunk c: words 2j, 2j + 1 of the chunk's 8, in plane j / 2 (16 values per plane).
  let chunk = at / 4u;
  let j = at % 4u;
  let word = select(0u, params.k / 8u, j >= 2u) + 4u * chunk + 2u * (j % 2u);
  if (live) {
    words[word] = pack4xI8(vec4<i32>(qa.x, qa.z, qb.x, qb.z));
    words[word + 1u] = pack4xI8(vec4<i32>(qa.y, qa.w, qb.y, qb.w));
  }
  let total = qa + qb;
  sums[lane] = total.x + total.y + total.z + total.w;
  workgroupBarrier();
  if (live && j == 0u) {
    let nan = bitcast<f32>(0x7FC00000u | (lane & 0u));     // built at run time: a constant NaN is an error
    let scale = select(largest / 127.0, nan, largest >= TOO_LARGE);
    let chunk_sum = sums[lane] + sums[lane + 1u] + sums[lane + 2u] + sums[lane + 3u];
    stats[chunk] = vec2<f32>(scale, 8.0 * f32(chunk_sum));
  }
}
