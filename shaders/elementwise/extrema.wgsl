// ${OP} over one dim of an f32 tensor viewed as [outer, reduce, inner] (the dims before, at and
// after the reduced one): dst[o * inner + j] = ${COMBINE} over r of src[(o * reduce + r) * inner + j].
// One invocation per output element, sequential over r; min/max of representable values is exact.
// keepdim only changes the output's shape metadata, never this kernel.
const WG: u32 = ${WG}u;

struct Params {
  outer: u32,
  reduce: u32,              // >= 1 (the op rejects an empty reduced dim)
  inner: u32,
  length: u32,              // outer * inner
}

@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.y * (groups.x * WG) + gid.x;
  if (i >= params.length) {
    return;
  }
  let o = i / params.inner;
  let j = i % params.inner;
  let base = o * params.reduce * params.inner + j;
  var acc = src[base];
  for (var r = 1u; r < params.reduce; r++) {
    acc = ${COMBINE}(acc, src[base + r * params.inner]);
  }
  dst[i] = acc;
}
