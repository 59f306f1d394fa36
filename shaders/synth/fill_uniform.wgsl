// Counter-based synthetic data: dst[i] = offset + u * 2^scale_log2, u = hash(seed, stream, i) >> 8.
// u < 2^24 is exact in f32, ldexp is exact, and offset is a multiple of 2^scale_log2 small enough that
// the sum is representable: every step is exact, so a host twin reproduces the values bit for bit
// (whether or not the compiler fuses the multiply-add).
const WG: u32 = 256u;

struct Params {
  length: u32,
  seed: u32,
  stream: u32,
  scale_log2: i32,
  offset: f32,
}

@group(0) @binding(0) var<storage, read_write> dst: array<f32>;
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

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.y * (groups.x * WG) + gid.x;
  if (i >= params.length) {
    return;
  }
  let u = f32(hash(params.seed, params.stream, i) >> 8u);
  dst[i] = ldexp(u, params.scale_log2) + params.offset;
}
