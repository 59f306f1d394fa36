$if DTYPE == "f32":
  // Counter-based synthetic data: dst[i] = offset + u * 2^scale_log2, u = hash(seed, stream, i) >> 8.
  // u < 2^24 is exact in f32, ldexp is exact, and offset is a multiple of 2^scale_log2 small enough that
  // the sum is representable: every step is exact, so a host twin reproduces the values bit for bit
  // (whether or not the compiler fuses the multiply-add).
$elif DTYPE == "i32":
  // Counter-based synthetic i32 (same hash as fill_uniform): dst[i] = low + (h % span), h = hash(seed,
  // stream, i), wrapping in u32; span 0 stands for 2^32 (every i32). Integer arithmetic only, so the
  // host twin reproduces the values bit for bit.
$elif DTYPE == "bool":
  // Counter-based synthetic bool (same hash as fill_uniform): element i is the top bit of
  // hash(seed, stream, i), stored one byte (0 or 1) per element, four to a u32 word. One invocation
  // per word; a partial last word keeps the bytes past the length as they were.
$else:
  // Counter-based synthetic f16 (same hash as fill_uniform), stored two per u32 word (element 2w in
  // the low half): sign = h bit 31, exponent field = exponent_min + (h >> 10 & 0xFFFF) % exponent_span,
  // mantissa = h & 0x3FF, h = hash(seed, stream, i): normal finite values when the exponent field stays
  // in [1, 30]. One invocation per word; a partial last word keeps the high half as it was.
const WG: u32 = 256u;

$if DTYPE == "f32":
  struct Params {
    length: u32,
    seed: u32,
    stream: u32,
    scale_log2: i32,
    offset: f32,
  }

  @group(0) @binding(0) var<storage, read_write> dst: array<f32>;
$elif DTYPE == "i32":
  struct Params {
    length: u32,
    seed: u32,
    stream: u32,
    low: i32,
    span: u32,
  }

  @group(0) @binding(0) var<storage, read_write> dst: array<i32>;
$else:
  struct Params {
    length: u32,              // elements, not words
    seed: u32,
    stream: u32,
    exponent_min: u32,        // f16 only
    exponent_span: u32,       // f16 only
  }

  @group(0) @binding(0) var<storage, read_write> dst: array<u32>;
@group(0) @binding(1) var<uniform> params: Params;

// PCG output permutation of one LCG step (Jarzynski and Olano, 2020): a bijection on u32.
fn pcg(v: u32) -> u32 {
  let state = v * 747796405u + 2891336453u;
  let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
  return (word >> 22u) ^ word;
}

fn hash(seed: u32, stream: u32, index: u32) -> u32 {
  let key = pcg(seed ^ pcg(stream));
  return pcg(pcg(index + key) ^ key);
}

$if DTYPE == "bool":
  fn element(i: u32) -> u32 {
    return hash(params.seed, params.stream, i) >> 31u;
  }

$elif DTYPE == "f16":
  fn element(i: u32) -> u32 {
    let h = hash(params.seed, params.stream, i);
    let exponent = params.exponent_min + ((h >> 10u) & 0xFFFFu) % params.exponent_span;
    return ((h >> 31u) << 15u) | (exponent << 10u) | (h & 0x3FFu);
  }

$if DTYPE == "i32":
  @compute @workgroup_size(WG)
  fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.y * (groups.x * WG) + gid.x;
    if (i >= params.length) {
      return;
    }
    let h = hash(params.seed, params.stream, i);
    var step = h;
    if (params.span != 0u) {
      step = h % params.span;
    }
    dst[i] = bitcast<i32>(bitcast<u32>(params.low) + step);
  }
$elif PER_WORD > 1:
  @compute @workgroup_size(WG)
  fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let w = gid.y * (groups.x * WG) + gid.x;
    let first = w * ${PER_WORD}u;
    if (first >= params.length) {
      return;
    }
    let count = min(${PER_WORD}u, params.length - first);
    var word = 0u;
    for (var k = 0u; k < count; k++) {
      word |= element(first + k) << (${32 // PER_WORD}u * k);
    }
    if (count == ${PER_WORD}u) {
      dst[w] = word;
    } else {
      let mask = (1u << (${32 // PER_WORD}u * count)) - 1u;
      dst[w] = (dst[w] & ~mask) | word;
    }
  }
$else:
  @compute @workgroup_size(WG)
  fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.y * (groups.x * WG) + gid.x;
    if (i >= params.length) {
      return;
    }
    let u = f32(hash(params.seed, params.stream, i) >> 8u);
    dst[i] = ldexp(u, params.scale_log2) + params.offset;
  }
