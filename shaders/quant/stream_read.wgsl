// Streaming read: folds every u32 of a range of a buffer (vec4 loads, grid-stride) and writes one
// value per workgroup, so nothing is optimised away. The bandwidth yardstick for every kernel
// benchmark; a range lets one big buffer serve as many distinct regions (no cache reuse between them).
$if STORE:
  // This variant stores every workgroup's fold (the plain one stores only a value it never meets): a
  // read followed by a kernel's write-back, as a GEMV ends, the second yardstick of a decode chain.
const WG: u32 = 256u;

struct Params {
  words4: u32,        // vec4s to read
  first4: u32,        // from this vec4 on
}

@group(0) @binding(0) var<storage, read> data: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> sink: array<u32>;
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
  let stride = groups.x * WG;
  var acc = vec4<u32>(0u);
  for (var i = gid.x; i < params.words4; i += stride) {
    acc ^= data[params.first4 + i];
  }
  let folded = acc.x ^ acc.y ^ acc.z ^ acc.w;
  $if STORE:
    if (lane == 0u) {
      sink[wid.x] = folded;
    }
  $else:
    if (folded == 0xFFFFFFFFu && lane == 0u) {
      sink[wid.x] = folded;
    }
}
