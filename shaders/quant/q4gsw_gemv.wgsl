// Q4 GEMV (one activation row): out[n] = sum_k x[k] * (q[n, k] * scale[k / gs, n]) (+ bias[n]).
// Weights in the reference layout (see q4gsw_quantize.wgsl), rows n_offset.. of a packed matrix of
// n_total rows, so one packed QKV weight serves three projections.
// Workgroup = KL lanes along K x RG row groups. Each thread owns R rows and walks K in chunks of 32
// values (one vec4<u32> of weights per row): it loads its 32 x values once for all R rows, which
// cuts activation traffic R-fold. Lanes of a row are then reduced
$if SUBGROUP:
  // with subgroupAdd, then across the row's subgroups through workgroup memory (route guard:
  // subgroups at most KL wide, so none spans two rows).
  enable subgroups;
$else:
  // through workgroup memory (any adapter).
const KL: u32 = ${KL}u;
const RG: u32 = ${RG}u;
const R: u32 = ${R}u;
const ROWS: u32 = RG * R;

struct Params {
  k: u32,
  n: u32,
  n_total: u32,
  n_offset: u32,
  group_size: u32,
  has_bias: u32,
}

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> weights: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> scales: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<uniform> params: Params;
var<workgroup> partial: array<f32, ${KL * RG * R}>;

// sum over 32 values of (nibble - 8) * x; nibble i of word j is value 8j + i.
fn dot_chunk(w: vec4<u32>, xs: ptr<function, array<vec4<f32>, 8>>) -> f32 {
  var s = 0.0;
  for (var j = 0u; j < 4u; j++) {
    let word = w[j];
    let lo = vec4<f32>((vec4<u32>(word) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u)) - 8.0;
    let hi = vec4<f32>((vec4<u32>(word) >> vec4<u32>(16u, 20u, 24u, 28u)) & vec4<u32>(15u)) - 8.0;
    s += dot(lo, (*xs)[2u * j]) + dot(hi, (*xs)[2u * j + 1u]);
  }
  return s;
}

@compute @workgroup_size(KL, RG, 1)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>${", @builtin(subgroup_size) sg_size: u32" if SUBGROUP else ""}) {
  let block = wid.y * groups.x + wid.x;
  let row0 = block * ROWS + lid.y * R;
  let chunks = params.k / 32u;
  var acc: array<f32, R>;
  for (var c = lid.x; c < chunks; c += KL) {
    var xs: array<vec4<f32>, 8>;
    for (var j = 0u; j < 8u; j++) {
      xs[j] = x[c * 8u + j];
    }
    let group = (c * 32u) / params.group_size;
    for (var r = 0u; r < R; r++) {
      let n = row0 + r;
      if (n < params.n) {
        let row = n + params.n_offset;
        acc[r] += scales[group * params.n_total + row] * dot_chunk(weights[row * chunks + c], &xs);
      }
    }
  }
  $if SUBGROUP:
    // Lane 0 of each subgroup holds its subgroup's sum; lane 0 of the row adds those up.
    for (var r = 0u; r < R; r++) {
      let total = subgroupAdd(acc[r]);
      if (lid.x % sg_size == 0u) {
        partial[(lid.y * R + r) * KL + lid.x] = total;
      }
    }
    workgroupBarrier();
    if (lid.x == 0u) {
      for (var r = 0u; r < R; r++) {
        let n = row0 + r;
        var total = 0.0;
        for (var lane = 0u; lane < KL; lane += sg_size) {
          total += partial[(lid.y * R + r) * KL + lane];
        }
        if (n < params.n) {
          out[n] = total + select(0.0, bias[n], params.has_bias != 0u);
        }
      }
    }
  $else:
    for (var r = 0u; r < R; r++) {
      partial[(lid.y * R + r) * KL + lid.x] = acc[r];
    }
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
    if (lid.x == 0u) {
      for (var r = 0u; r < R; r++) {
        let n = row0 + r;
        if (n < params.n) {
          out[n] = partial[(lid.y * R + r) * KL] + select(0.0, bias[n], params.has_bias != 0u);
        }
      }
    }
}
