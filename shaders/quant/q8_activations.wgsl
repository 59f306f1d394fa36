// Dynamic int8 quantization of activations, per group of group_size consecutive values (the weight's
// group size, so a group of the int8 GEMV meets exactly one activation scale):
//   scale = max|x| / 127 over the group, q = round(x * 127 / max|x|), clamped to [-127, 127].
// Outputs, for the q4_gemv_int8 route (q4gsw_gemv's I8 variants):
//   xq:    per 8 values two words of 4 int8: the even-indexed values, then the odd ones (the order of
//          a Q4 weight word's low and high nibbles);
//   stats: per group (scale, 8 * sum of its q): the -8 nibble offset folded into one subtraction.
// A group holding a NaN, an infinity or a value of magnitude >= 1e38 gets a NaN scale, so every
// output that uses it is NaN rather than silently wrong. Each invocation owns 8 values; a group's
// gs / 8 invocations are adjacent and share one workgroup (64 * 8 = 512 is a multiple of every gs).
const WG: u32 = 64u;

struct Params {
  values: u32,        // total values, a multiple of group_size
  group_size: u32,    // 32, 64 or 128
}

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> xq: array<u32>;
@group(0) @binding(2) var<storage, read_write> stats: array<vec2<f32>>;
@group(0) @binding(3) var<uniform> params: Params;

var<workgroup> shared_max: array<f32, WG>;
var<workgroup> shared_sum: array<i32, WG>;

const TOO_LARGE: f32 = 1.0e38;

fn max4(v: vec4<f32>) -> f32 {
  return max(max(v.x, v.y), max(v.z, v.w));
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
  let chunk = (wid.y * groups.x + wid.x) * WG + lane;
  let live = chunk < params.values / 8u;
  let c = min(chunk, params.values / 8u - 1u);
  let a = x[2u * c];
  let b = x[2u * c + 1u];
  // abs(NaN) < TOO_LARGE is false: a non-finite value reads as TOO_LARGE.
  let finite = all(abs(a) < vec4<f32>(TOO_LARGE)) && all(abs(b) < vec4<f32>(TOO_LARGE));
  shared_max[lane] = select(0.0, select(TOO_LARGE, max(max4(abs(a)), max4(abs(b))), finite), live);
  workgroupBarrier();

  let per_group = params.group_size / 8u;
  let first = lane - lane % per_group;
  var largest = 0.0;
  for (var i = 0u; i < per_group; i++) {
    largest = max(largest, shared_max[first + i]);
  }
  let inverse = select(0.0, 127.0 / largest, largest > 0.0 && largest < TOO_LARGE);
  let qa = vec4<i32>(clamp(round(a * inverse), vec4<f32>(-127.0), vec4<f32>(127.0)));
  let qb = vec4<i32>(clamp(round(b * inverse), vec4<f32>(-127.0), vec4<f32>(127.0)));
  if (live) {
    xq[2u * c] = pack4xI8(vec4<i32>(qa.x, qa.z, qb.x, qb.z));
    xq[2u * c + 1u] = pack4xI8(vec4<i32>(qa.y, qa.w, qb.y, qb.w));
  }
  shared_sum[lane] = qa.x + qa.y + qa.z + qa.w + qb.x + qb.y + qb.z + qb.w;
  workgroupBarrier();

  if (live && lane == first) {
    var total = 0;
    for (var i = 0u; i < per_group; i++) {
      total += shared_sum[first + i];
    }
    let nan = bitcast<f32>(0x7FC00000u | (lane & 0u));     // built at run time: a constant NaN is an error
    let scale = select(largest / 127.0, nan, largest >= TOO_LARGE);
    stats[c * 8u / params.group_size] = vec2<f32>(scale, 8.0 * f32(total));
  }
}
