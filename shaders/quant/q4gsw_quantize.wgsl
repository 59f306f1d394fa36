// Q4 group-wise symmetric quantization of rows [first_row, first_row + rows) of an f32 weight [N, K] into
// the reference layout; w holds those rows only (a checkpoint's tensor, or a chunk of it, lands in its
// rows of a packed weight):
$if SYNTH:
  // (w generated in place from the counter-based hash of fill_uniform.wgsl, w[n, k] = element
  // n * K + k, so model-sized weights never exist in f32: lm_head is 1 GB in f32, 131 MB packed.)
//   packed [N, K/2] bytes, read as u32 words: nibble i of word j of row n is k = 8j + i (even k in
//   the low nibble of each byte), stored as q + 8;  scales [K/gs, N] f32 (transposed), or [N, K/gs]
//   when scales_row_major is set (the Q4 embedding layout).
// scale = max|w| * (2/15) (clamped below); q = the number of thresholds (t - 7.5) * scale, t = 0..14,
// that w exceeds, minus 8: round to nearest with ties toward -inf. Only exact or correctly rounded
// operations (abs, max, *, comparisons) are used, so the numpy twin matches bit for bit; a division
// would not (WGSL allows 2.5 ULP).
// One invocation per (row, group); it writes whole words, so no two invocations share a word.
const WG: u32 = 64u;
const TWO_FIFTEENTHS: f32 = 0.13333334;   // f32(2/15)
const MIN_SCALE: f32 = 1e-10;

struct Params {
  n: u32,
  k: u32,
  group_size: u32,
  seed: u32,
  stream: u32,
  scale_log2: i32,
  offset: f32,
  scales_row_major: u32,
  first_row: u32,           // the first row of the packed weight this dispatch writes
  rows: u32,                // rows written (w's rows): n for a whole weight
}

$if SYNTH:
  @group(0) @binding(1) var<storage, read_write> packed: array<u32>;
  @group(0) @binding(2) var<storage, read_write> scales: array<f32>;
  @group(0) @binding(3) var<uniform> params: Params;

  fn pcg(v: u32) -> u32 {
    let state = v * 747796405u + 2891336453u;
    let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
  }

  // Same values as fill_uniform.wgsl writes for (seed, stream, index), index counted from row 0.
  fn weight(local: u32) -> f32 {
    let index = local + params.first_row * params.k;
    let key = pcg(params.seed ^ pcg(params.stream));
    let u = f32(pcg(pcg(index + key) ^ key) >> 8u);
    return ldexp(u, params.scale_log2) + params.offset;
  }
$else:
  @group(0) @binding(0) var<storage, read> w: array<f32>;
  @group(0) @binding(1) var<storage, read_write> packed: array<u32>;
  @group(0) @binding(2) var<storage, read_write> scales: array<f32>;
  @group(0) @binding(3) var<uniform> params: Params;

  fn weight(local: u32) -> f32 {
    return w[local];
  }

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let groups_per_row = params.k / params.group_size;
  let i = gid.y * (groups.x * WG) + gid.x;
  if (i >= params.rows * groups_per_row) {
    return;
  }
  let local_row = i / groups_per_row;
  let row = params.first_row + local_row;
  let group = i % groups_per_row;
  let first = local_row * params.k + group * params.group_size;
  var amax = 0.0;
  for (var j = 0u; j < params.group_size; j++) {
    amax = max(amax, abs(weight(first + j)));
  }
  let scale = max(amax * TWO_FIFTEENTHS, MIN_SCALE);
  scales[select(group * params.n + row, row * groups_per_row + group, params.scales_row_major != 0u)] = scale;
  let first_word = (row * params.k + group * params.group_size) / 8u;
  for (var word = 0u; word < params.group_size / 8u; word++) {
    var bits = 0u;
    for (var nib = 0u; nib < 8u; nib++) {
      let v = weight(first + word * 8u + nib);
      var level = 0u;
      for (var t = 0u; t < 15u; t++) {
        level += select(0u, 1u, v > (f32(t) - 7.5) * scale);
      }
      bits |= level << (4u * nib);
    }
    packed[first_word + word] = bits;
  }
}
