// The step's keys and values into a layer's KV cache at the live start position, as f16 pairs (element
// 2i of a row in the low half, as pack2x16float orders them; ${"spelled vec2<f16>" if KV_F16 else "packed in u32"}, f16_pairs.wgsli):
// k_cache[(pos + t) * Hkv * half + h * half + i] holds k[t, h, 2i] and k[t, h, 2i + 1]. One invocation per
// pair of one token's K and V. A position at or past the capacity writes nothing (the op refuses such
// sizes before dispatch).
$if KV_F16:
  enable f16;

const WG: u32 = 256u;

struct Params {
  tokens: u32,
  kv_heads: u32,
  half: u32,            // head_dim / 2
  pos: u32,
  capacity: u32,        // cache rows
}

@group(0) @binding(0) var<storage, read> k: array<f32>;
@group(0) @binding(1) var<storage, read> v: array<f32>;
@group(0) @binding(2) var<storage, read_write> k_cache: array<KVPair>;
@group(0) @binding(3) var<storage, read_write> v_cache: array<KVPair>;
@group(0) @binding(4) var<uniform> params: Params;

$include f16_pairs.wgsli

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.y * (groups.x * WG) + gid.x;
  let row = params.kv_heads * params.half;
  if (i >= params.tokens * row || params.pos + i / row >= params.capacity) {
    return;
  }
  let at = params.pos * row + i;
  k_cache[at] = kv_pair(vec2<f32>(k[2u * i], k[2u * i + 1u]));
  v_cache[at] = kv_pair(vec2<f32>(v[2u * i], v[2u * i + 1u]));
}
