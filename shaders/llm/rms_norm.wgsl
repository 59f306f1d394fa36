$if REDUCE == "subgroup":
  // (The native backend drops this directive: Naga, wgpu-native 0.32, does not support it yet.)
  enable subgroups;

// RMSNorm over the last dim: y[r, :] = x[r, :] * inverseSqrt(mean(x[r, :]^2) + eps) * w for the
// live rows r < rows of a row-major [rows, d] f32 tensor (rows = tokens, or tokens * heads for the
// per-head q/k norm). One workgroup per row; each invocation sums the squares of elements
// lid, lid + WG, ... (any d, no multiple of WG needed), then
$if REDUCE == "subgroup":
  // subgroupAdd reduces each subgroup and its invocation 0 (subgroupElect is missing in Naga) appends its sum to
  // workgroup memory through an atomic slot counter (no assumption on how invocations map to
  // subgroups, nor on the subgroup size: at most WG / 4 subgroups, 4 being WebGPU's smallest).
  // The slot order varies between runs, so the last bits of the sum may too.
$else:
  // a tree over workgroup memory reduces the WG partial sums (deterministic order).
// Rows beyond 65535 workgroups spill into y: row = wid.y * num_workgroups.x + wid.x.
const WG: u32 = ${WG}u;

struct Params {
  rows: u32,
  d: u32,
  eps: f32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

$if REDUCE == "subgroup":
  var<workgroup> partials: array<f32, WG / 4u>;
  var<workgroup> filled: atomic<u32>;
$else:
  var<workgroup> partials: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32${", @builtin(subgroup_invocation_id) lane: u32" if REDUCE == "subgroup" else ""}) {
  let row = wid.y * groups.x + wid.x;
  if (row >= params.rows) {
    return;     // uniform: the whole workgroup leaves together
  }
  $if REDUCE == "subgroup":
    // Reset explicitly: on lavapipe (Mesa 22.3, wgpu-native 0.32) the counter keeps the previous
    // workgroup's value despite WGSL's zero-initialisation of workgroup memory.
    if (lid == 0u) {
      atomicStore(&filled, 0u);
    }
    workgroupBarrier();
  let base = row * params.d;
  var acc = 0.0;
  for (var i = lid; i < params.d; i += WG) {
    let v = x[base + i];
    acc += v * v;
  }
  $if REDUCE == "subgroup":
    let sum = subgroupAdd(acc);
    if (lane == 0u) {
      partials[atomicAdd(&filled, 1u)] = sum;
    }
    workgroupBarrier();
    let count = atomicLoad(&filled);
    var total = 0.0;
    for (var s = 0u; s < count; s++) {
      total += partials[s];
    }
  $else:
    partials[lid] = acc;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
      if (lid < stride) {
        partials[lid] += partials[lid + stride];
      }
      workgroupBarrier();
    }
    let total = partials[0];
  let scale = inverseSqrt(total / f32(params.d) + params.eps);
  for (var i = lid; i < params.d; i += WG) {
    y[base + i] = x[base + i] * scale * w[i];
  }
}
