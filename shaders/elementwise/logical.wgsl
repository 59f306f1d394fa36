// Logical ${OP} on bool tensors stored one byte per element (0 or 1), four elements to a u32 word
// (element 4w + k in byte k of word w). One invocation per word: out = ${EXPR}.
// Any nonzero input byte counts as true; outputs are 0 or 1. In a partial last word the bytes past
// the length keep what they held (they may belong to nothing, or to whoever owns the buffer's tail).
const WG: u32 = ${WG}u;

struct Params {
  length: u32,              // elements (bytes), not words
}

@group(0) @binding(0) var<storage, read> lhs: array<u32>;
$if ARITY == 2:
  @group(0) @binding(1) var<storage, read> rhs: array<u32>;
@group(0) @binding(${ARITY}) var<storage, read_write> out: array<u32>;
@group(0) @binding(${ARITY + 1}) var<uniform> params: Params;

// Per byte: 1 if any of its bits is set, else 0. The shifts stay inside each byte for bit 0.
fn truth(v: u32) -> u32 {
  var t = v | (v >> 4u);
  t = t | (t >> 2u);
  t = t | (t >> 1u);
  return t & 0x01010101u;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let w = gid.y * (groups.x * WG) + gid.x;
  let first = w * 4u;
  if (first >= params.length) {
    return;
  }
  let a = truth(lhs[w]);
  let value = ${EXPR};
  let count = min(4u, params.length - first);
  if (count == 4u) {
    out[w] = value;
  } else {
    let mask = (1u << (8u * count)) - 1u;
    out[w] = (out[w] & ~mask) | (value & mask);
  }
}
