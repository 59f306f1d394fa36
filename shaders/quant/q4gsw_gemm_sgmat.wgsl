// Q4 GEMM on int8 activations with int8 subgroup matrices (tensor cores; the prefill's q4_gemm_sgmat_i8
// route, M > 1): the q4_gemm_dp4a GEMM's arithmetic,
//   out[m, n] = sum over groups g of  s_x[m, g] * s_w[g, n] * sum_{k in g} q_x[m, k] * (nib[n, k] - 8)  (+ bias[n])
// with each group's exact i32 sums made by 16 x 16 x 32 i8 x i8 -> i32 matrix products.
//
// A workgroup of ${SGM} x ${SGN} subgroups of 32 invocations owns a ${16 * SGM * FM} x ${16 * SGN * FN} output tile;
// subgroup (i, j) owns its ${16 * FM} x ${16 * FN} block as ${FM} x ${FN} i32 result matrices. K is walked in
// tiles of 64 (two 32-value chunks): the int8 activations (int8_activations.wgsl's layout) and the
// weights expanded to signed int8 (nib - 8) are staged row-major in workgroup memory, each row of a
// tile holding its chunks' bytes in the activations' order (a weight word's low nibbles, then its high
// ones), the same permutation of k on both sides, so a chunk is one left (x rows) and one right
// (weight rows read column-major) operand. Rows are XS = 80 bytes apart (64 + 16: consecutive rows
// start in different banks).
//
// Scales differ per row and per column, and a matrix takes only one uniform scalar, so at a group's
// last chunk each subgroup stores its i32 results to its own scratch, and every invocation folds 8
// elements per matrix into f32 accumulators: acc += f32(sum) * s_x[m] * s_w[n]. Rows past M read zeros
// with scale 0, columns past N the zero weight with scale 0; nothing past M x N is stored. A NaN
// activation scale (a non-finite group) makes its row's outputs NaN. K is a multiple of the group size,
// itself a multiple of 32. Needs subgroups of exactly 32 (the route's guard).
enable subgroups;
enable chromium_experimental_subgroup_matrix;
// The operands' offsets depend on subgroup_id: uniform within a subgroup, which the analysis (workgroup
// uniformity) cannot see.
diagnostic(off, chromium_experimental.subgroup_matrix_uniformity);

const TM: u32 = ${16 * SGM * FM}u;
const TN: u32 = ${16 * SGN * FN}u;
const SGN: u32 = ${SGN}u;
const XS: u32 = 80u;                    // bytes between rows of a staged tile
const WG: u32 = ${32 * SGM * SGN}u;

struct Params {
  m: u32,
  k: u32,
  n: u32,
  n_total: u32,
  n_offset: u32,
  group_size: u32,
  has_bias: u32,
  accumulate: u32,      // out += the product (a residual add folded in)
}

@group(0) @binding(0) var<storage, read> xq: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> xstats: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read> weights: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> scales: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<uniform> params: Params;

var<workgroup> x_tile: array<i32, ${16 * SGM * FM * 20}>;             // [m][80 bytes], int8 in i32 words
var<workgroup> w_tile: array<i32, ${16 * SGN * FN * 20}>;             // [n][80 bytes]
var<workgroup> x_scale: array<f32, ${32 * SGM * FM}>;             // [chunk][m]
var<workgroup> w_scale: array<f32, ${32 * SGN * FN}>;             // [chunk][n]
var<workgroup> sums: array<i32, ${256 * SGM * FM * SGN * FN}>;               // [subgroup][matrix][16 x 16]

// Nibbles 0..15 in the low half of each byte -> the signed bytes nib - 8 (q4gsw_gemm_dp4a.wgsl).
fn signed_bytes(nibbles: u32) -> i32 {
  let v = nibbles ^ 0x08080808u;
  return bitcast<i32>(v | ((v & 0x08080808u) * 30u));
}

// The tile of chunks c0, c0 + 1 of rows m0.. and columns n0.. into workgroup memory.
fn stage(t: u32, m0: u32, n0: u32, c0: u32, chunks: u32) {
  // Activations: a row's 4 vec4s (chunk c0 plane 0, chunk c0 + 1 plane 0, then both planes 1).
  for (var i = t; i < TM * 4u; i += WG) {
    let r = i / 4u;
    let chunk = i % 2u;
    let plane = (i / 2u) % 2u;
    let m = m0 + r;
    var v = vec4<u32>(0u);
    if (m < params.m && c0 + chunk < chunks) {
      v = xq[m * (params.k / 16u) + plane * chunks + c0 + chunk];
    }
    let word = (r * XS + chunk * 32u + plane * 16u) / 4u;
    for (var j = 0u; j < 4u; j++) {
      x_tile[word + j] = bitcast<i32>(v[j]);
    }
  }
  for (var i = t; i < TM * 2u; i += WG) {
    let m = m0 + i / 2u;
    let chunk = i % 2u;
    var scale = 0.0;
    if (m < params.m && c0 + chunk < chunks) {
      scale = xstats[m * chunks + c0 + chunk].x;
    }
    x_scale[chunk * TM + i / 2u] = scale;
  }
  // Weights: a row's 2 vec4s (32 nibbles each), expanded to 8 words of signed int8 per chunk.
  for (var i = t; i < TN * 2u; i += WG) {
    let r = i / 2u;
    let chunk = i % 2u;
    let n = n0 + r;
    var w = vec4<u32>(0x88888888u);   // the nibble 8 is the value 0: columns past N add nothing
    var scale = 0.0;
    if (n < params.n && c0 + chunk < chunks) {
      let row = n + params.n_offset;
      w = weights[row * chunks + c0 + chunk];
      scale = scales[((c0 + chunk) * 32u / params.group_size) * params.n_total + row];
    }
    let word = (r * XS + chunk * 32u) / 4u;
    for (var j = 0u; j < 4u; j++) {
      w_tile[word + 2u * j] = signed_bytes(w[j] & 0x0F0F0F0Fu);
      w_tile[word + 2u * j + 1u] = signed_bytes((w[j] >> 4u) & 0x0F0F0F0Fu);
    }
    w_scale[chunk * TN + r] = scale;
  }
}

fn store(m: u32, n: u32, value: f32) {
  if (m < params.m && n < params.n) {
    out[m * params.n + n] = value + select(0.0, bias[n], params.has_bias != 0u)
                            + select(0.0, out[m * params.n + n], params.accumulate != 0u);
  }
}

@compute @workgroup_size(${32 * SGM * SGN}, 1, 1)
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
  let m0 = wid.y * TM;
  let n0 = wid.x * TN;
  let chunks = params.k / 32u;
  let sm = (sg / SGN) * ${FM * 16}u;       // the subgroup's first row and column in the tile
  let sn = (sg % SGN) * ${FN * 16}u;
  $for i in range(FM):
    $for j in range(FN):
      var sum${i}${j} = subgroup_matrix_result<i32, 16, 16>();
      var acc${i}${j}: array<f32, 8>;
  for (var c0 = 0u; c0 < chunks; c0 += 2u) {
    stage(t, m0, n0, c0, chunks);
    workgroupBarrier();
    for (var chunk = 0u; chunk < 2u; chunk++) {
      if (c0 + chunk < chunks) {
        $for i in range(FM):
          let left${i} = subgroupMatrixLoad<subgroup_matrix_left<i8, 32, 16>>(
              &x_tile, (sm + ${16 * i}u) * XS + chunk * 32u, false, XS);
        $for j in range(FN):
          let right${j} = subgroupMatrixLoad<subgroup_matrix_right<i8, 16, 32>>(
              &w_tile, (sn + ${16 * j}u) * XS + chunk * 32u, true, XS);
        $for i in range(FM):
          $for j in range(FN):
            sum${i}${j} = subgroupMatrixMultiplyAccumulate(left${i}, right${j}, sum${i}${j});
        // At the last chunk of a group (or of K), the group's exact sums go into the f32 accumulators.
        let next = c0 + chunk + 1u;
        if ((next * 32u) % params.group_size == 0u || next == chunks) {
          $for i in range(FM):
            $for j in range(FN):
              subgroupMatrixStore(&sums, (sg * ${FM * FN}u + ${i * FN + j}u) * 256u, sum${i}${j}, false, 16u);
              sum${i}${j} = subgroup_matrix_result<i32, 16, 16>();
          workgroupBarrier();
          // Element e = lane + 32 v of a 16 x 16 matrix: row e / 16, column e % 16 (lane % 16).
          $for i in range(FM):
            $for j in range(FN):
              {
                let base = (sg * ${FM * FN}u + ${i * FN + j}u) * 256u;
                let sw = w_scale[chunk * TN + sn + ${16 * j}u + lane % 16u];
                for (var v = 0u; v < 8u; v++) {
                  let row = sm + ${16 * i}u + lane / 16u + 2u * v;
                  acc${i}${j}[v] += f32(sums[base + lane + 32u * v]) * (x_scale[chunk * TM + row] * sw);
                }
              }
          workgroupBarrier();
        }
      }
    }
    workgroupBarrier();
  }
  $for i in range(FM):
    $for j in range(FN):
      for (var v = 0u; v < 8u; v++) {
        store(m0 + sm + ${16 * i}u + lane / 16u + 2u * v, n0 + sn + ${16 * j}u + lane % 16u, acc${i}${j}[v]);
      }
}
