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
// One invocation per group.
const WG: u32 = 64u;
const TOO_LARGE: f32 = 1.0e38;

struct Params {
  k: u32,
  group_size: u32,
}

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> words: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> stats: array<vec2<f32>>;
@group(0) @binding(3) var<uniform> params: Params;

// 8 values -> the (even, odd) word pair.
fn pack_pair(a: vec4<i32>, b: vec4<i32>) -> vec2<u32> {
  return vec2<u32>(pack4xI8(vec4<i32>(a.x, a.z, b.x, b.z)), pack4xI8(vec4<i32>(a.y, a.w, b.y, b.w)));
}

fn quantized(v: vec4<f32>, inverse: f32) -> vec4<i32> {
  return vec4<i32>(clamp(round(v * inverse), vec4<f32>(-127.0), vec4<f32>(127.0)));
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let group = gid.x;
  let chunks = params.k / 32u;
  let per_group = params.group_size / 4u;          // vec4s of x in a group
  if (group >= params.k / params.group_size) {
    return;
  }
  let first = group * per_group;
  var largest = 0.0;
  var finite = true;
  for (var i = 0u; i < per_group; i++) {
    let v = abs(x[first + i]);
    largest = max(largest, max(max(v.x, v.y), max(v.z, v.w)));
    finite = finite && all(v < vec4<f32>(TOO_LARGE));     // false for NaN too
  }
  largest = select(TOO_LARGE, largest, finite);
  let inverse = select(0.0, 127.0 / largest, largest > 0.0 && largest < TOO_LARGE);
  let nan = bitcast<f32>(0x7FC00000u | (group & 0u));       // built at run time: a constant NaN is an error
  let scale = select(largest / 127.0, nan, largest >= TOO_LARGE);
  for (var c = first / 8u; c < (first + per_group) / 8u; c++) {
    let q0 = quantized(x[8u * c], inverse);
    let q1 = quantized(x[8u * c + 1u], inverse);
    let q2 = quantized(x[8u * c + 2u], inverse);
    let q3 = quantized(x[8u * c + 3u], inverse);
    let q4 = quantized(x[8u * c + 4u], inverse);
    let q5 = quantized(x[8u * c + 5u], inverse);
    let q6 = quantized(x[8u * c + 6u], inverse);
    let q7 = quantized(x[8u * c + 7u], inverse);
    words[c] = vec4<u32>(pack_pair(q0, q1), pack_pair(q2, q3));
    words[chunks + c] = vec4<u32>(pack_pair(q4, q5), pack_pair(q6, q7));
    let total = q0 + q1 + q2 + q3 + q4 + q5 + q6 + q7;
    stats[c] = vec2<f32>(scale, 8.0 * f32(total.x + total.y + total.z + total.w));
  }
}
