$if INPLACE:
  // Residual add in place on f32: acc[i] = acc[i] + b[i] for i < length (one correctly rounded add).
$else:
  // Residual add on f32: out[i] = a[i] + b[i] for i < length (one correctly rounded add).
// WebGPU forbids binding one buffer both read-only and writable in a dispatch, so the in-place form
// is its own kernel with a single read_write binding.
const WG: u32 = 256u;

struct Params {
  length: u32,
}

$if INPLACE:
  @group(0) @binding(0) var<storage, read_write> acc: array<f32>;
  @group(0) @binding(1) var<storage, read> b: array<f32>;
  @group(0) @binding(2) var<uniform> params: Params;
$else:
  @group(0) @binding(0) var<storage, read> a: array<f32>;
  @group(0) @binding(1) var<storage, read> b: array<f32>;
  @group(0) @binding(2) var<storage, read_write> out: array<f32>;
  @group(0) @binding(3) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.y * (groups.x * WG) + gid.x;
  if (i >= params.length) {
    return;
  }
  $if INPLACE:
    acc[i] = acc[i] + b[i];
  $else:
    out[i] = a[i] + b[i];
}
