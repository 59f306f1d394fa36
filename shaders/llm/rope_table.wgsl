// The RoPE (cos, sin) table of positions 0..positions-1, built from two tables the host makes in
// float64 with about sqrt(positions) rows each (so no per-position loop runs on the host): position
// p = b * block + j has angle (b * block) f_i + j f_i, hence
//   cos = cos_b cos_j - sin_b sin_j,   sin = sin_b cos_j + cos_b sin_j
// with coarse[b, i] = (cos, sin)(b * block * f_i) and fine[j, i] = (cos, sin)(j * f_i), each rounded once
// to f32. An entry is within 4u of the exact value, absolutely (u = 2^-24): the four inputs' roundings
// and the two products (u each, relative), then the sum (u), all of terms whose sizes add up to at most 1.
// One invocation per (position, frequency): table[p * half + i].
const WG: u32 = 256u;

struct Params {
  positions: u32,
  half: u32,            // frequencies: head_dim / 2
  block: u32,
}

@group(0) @binding(0) var<storage, read> coarse: array<vec2<f32>>;
@group(0) @binding(1) var<storage, read> fine: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read_write> table: array<vec2<f32>>;
@group(0) @binding(3) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let i = gid.y * (groups.x * WG) + gid.x;
  if (i >= params.positions * params.half) {
    return;
  }
  let p = i / params.half;
  let f = i % params.half;
  let outer = coarse[(p / params.block) * params.half + f];
  let inner = fine[(p % params.block) * params.half + f];
  table[i] = vec2<f32>(outer.x * inner.x - outer.y * inner.y, outer.y * inner.x + outer.x * inner.y);
}
