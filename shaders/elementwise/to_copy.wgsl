// to_copy ${SRC} -> ${DST}: ${WHAT}
// f16 is stored two per u32 word (element 2w in the low half), bool one byte per element, four per word.
const WG: u32 = ${WG}u;

struct Params {
  length: u32,              // elements
}

@group(0) @binding(0) var<storage, read> src: array<${SRC_STORAGE}>;
@group(0) @binding(1) var<storage, read_write> dst: array<${DST_STORAGE}>;
@group(0) @binding(2) var<uniform> params: Params;

$if PACK_F16:
  // One invocation per output word (two elements). With an odd length the high half of the last
  // word is past the end: it keeps its bits.
  @compute @workgroup_size(WG)
  fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let w = gid.y * (groups.x * WG) + gid.x;
    let first = 2u * w;
    if (first >= params.length) {
      return;
    }
    if (first + 1u < params.length) {
      dst[w] = pack2x16float(vec2<f32>(src[first], src[first + 1u]));
    } else {
      dst[w] = (dst[w] & 0xFFFF0000u) | (pack2x16float(vec2<f32>(src[first], 0.0)) & 0xFFFFu);
    }
  }
$else:
  @compute @workgroup_size(WG)
  fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.y * (groups.x * WG) + gid.x;
    if (i >= params.length) {
      return;
    }
    dst[i] = ${EXPR};
  }
