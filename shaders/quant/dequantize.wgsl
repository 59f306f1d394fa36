// A checkpoint's stored tensor (${FORMAT}) to f32: out[e] = the value of element e, exactly.
// src holds the raw bytes as little-endian u32 words, starting at a block boundary (element 0); blocks
// of 18, 20 and 34 bytes straddle words, so bytes are read one at a time.
//   f16    IEEE half; subnormals are decoded by hand (m * 2^-24), so none is flushed
//   bf16   the upper half of an f32 (f32 subnormals may still be flushed by the device)
//   q4_0   ggml blocks of 32: f16 d, 16 bytes of nibbles; element j < 16 is the low nibble of byte j,
//          j >= 16 the high nibble of byte j - 16; value (q - 8) * d
//   q4_1   the same after f16 d and f16 m; value q * d + m
//   q8_0   f16 d, 32 signed bytes; value q * d
// Every product is of an 11-bit and an at most 8-bit integer significand, so it is exact in f32, and
// q4_1's one rounding (the sum) is the same whether or not it is fused: the gguf package's numpy
// dequantization gives the same bits.
const WG: u32 = 64u;

struct Params {
  count: u32,               // elements written
}

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

fn byte_at(i: u32) -> u32 {
  return (src[i >> 2u] >> ((i & 3u) * 8u)) & 0xFFu;
}

fn half_bits_at(i: u32) -> u32 {
  return byte_at(i) | (byte_at(i + 1u) << 8u);
}

fn f16_value(h: u32) -> f32 {
  let sign = (h >> 15u) << 31u;
  let exponent = (h >> 10u) & 0x1Fu;
  let mantissa = h & 0x3FFu;
  if (exponent == 0u) {
    let magnitude = f32(mantissa) * 5.9604645e-8;     // 2^-24, exact
    return select(magnitude, -magnitude, sign != 0u);
  }
  if (exponent == 31u) {
    return bitcast<f32>(sign | 0x7F800000u | (mantissa << 13u));
  }
  return bitcast<f32>(sign | ((exponent + 112u) << 23u) | (mantissa << 13u));
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
  let e = gid.y * (groups.x * WG) + gid.x;
  if (e >= params.count) {
    return;
  }
  $if FORMAT == "f16":
    out[e] = f16_value(half_bits_at(2u * e));
  $elif FORMAT == "bf16":
    out[e] = bitcast<f32>(half_bits_at(2u * e) << 16u);
  $elif FORMAT == "q4_0":
    let base = (e / 32u) * 18u;
    let j = e % 32u;
    let q = (byte_at(base + 2u + j % 16u) >> (4u * (j / 16u))) & 0xFu;
    out[e] = (f32(q) - 8.0) * f16_value(half_bits_at(base));
  $elif FORMAT == "q4_1":
    let base = (e / 32u) * 20u;
    let j = e % 32u;
    let q = (byte_at(base + 4u + j % 16u) >> (4u * (j / 16u))) & 0xFu;
    out[e] = f32(q) * f16_value(half_bits_at(base)) + f16_value(half_bits_at(base + 2u));
  $else:
    let base = (e / 32u) * 34u;
    let q = i32(byte_at(base + 2u + e % 32u) << 24u) >> 24u;
    out[e] = f32(q) * f16_value(half_bits_at(base));
}
