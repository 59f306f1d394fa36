// Q4 GEMM (prefill, M > 1): out[m, n] = sum_k x[m, k] * q[n, k] * scale[k / gs, n] (+ bias[n]).
// Register tiling: a workgroup of 16 x 16 invocations computes a 64 x 64 output tile, 4 x 4 per
// invocation, walking K in tiles of BK = ${BK}: the x tile and the dequantized weight tile are staged
// in workgroup memory (2 x 64 x BK f32 = ${2 * 64 * BK * 4} bytes), k-major, so that for each k an
// invocation reads its 4 rows and its 4 columns as one vec4 each and neighbouring invocations read
// neighbouring vec4s (no bank conflicts on the reads of the inner loop). K may be any multiple of 8: the
// last K tile is zero-padded. Weights in the reference layout (q4gsw_quantize.wgsl), rows
// n_offset.. of a packed matrix with n_total rows.
$if QKV:
  // Fused QKV: one packed weight of Nq + Nk + Nv rows; output columns scatter into three tensors.
const TM: u32 = 64u;
const TN: u32 = 64u;
const BK: u32 = ${BK}u;
const WORDS_PER_ROW_TILE: u32 = BK / 8u;

struct Params {
  m: u32,
  k: u32,
  n: u32,
  n_total: u32,
  n_offset: u32,
  group_size: u32,
  has_bias: u32,
  accumulate: u32,      // out += the product (a residual add folded in; not the fused QKV)
  n_q: u32,
  n_kv: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> weights: array<u32>;
@group(0) @binding(2) var<storage, read> scales: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<uniform> params: Params;
$if QKV:
  @group(0) @binding(6) var<storage, read_write> out_k: array<f32>;
  @group(0) @binding(7) var<storage, read_write> out_v: array<f32>;

var<workgroup> x_tile: array<vec4<f32>, ${16 * BK}>;    // [k][m / 4]
var<workgroup> w_tile: array<vec4<f32>, ${16 * BK}>;    // [k][n / 4]

fn store(m: u32, n: u32, value: f32) {
  $if QKV:
    if (n < params.n_q) {
      out[m * params.n_q + n] = value;
    } else if (n < params.n_q + params.n_kv) {
      out_k[m * params.n_kv + n - params.n_q] = value;
    } else {
      out_v[m * params.n_kv + n - params.n_q - params.n_kv] = value;
    }
  $else:
    out[m * params.n + n] = value + select(0.0, out[m * params.n + n], params.accumulate != 0u);
}

@compute @workgroup_size(16, 16, 1)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let m0 = wid.y * TM;
  let n0 = wid.x * TN;
  let t = lid.y * 16u + lid.x;
  let words_per_row = params.k / 8u;
  var acc0 = vec4<f32>(0.0);
  var acc1 = vec4<f32>(0.0);
  var acc2 = vec4<f32>(0.0);
  var acc3 = vec4<f32>(0.0);
  for (var k0 = 0u; k0 < params.k; k0 += BK) {
    // x tile: 64 rows x BK, 4 consecutive rows of one k per invocation step; zero outside [M, K).
    for (var i = t; i < 16u * BK; i += 256u) {
      let k = k0 + i / 16u;
      let m = m0 + (i % 16u) * 4u;
      var v = vec4<f32>(0.0);
      for (var j = 0u; j < 4u; j++) {
        v[j] = select(0.0, x[(m + j) * params.k + k], m + j < params.m && k < params.k);
      }
      x_tile[i] = v;
    }
    // weight tile: 64 rows x BK/8 words; a word holds 8 consecutive k of one row.
    for (var i = t; i < TN * WORDS_PER_ROW_TILE; i += 256u) {
      let r = i % TN;
      let word_in_tile = i / TN;
      let n = n0 + r;
      let k = k0 + word_in_tile * 8u;
      var word = 0x88888888u;     // eight zeros (q = 0) outside the matrix
      var scale = 0.0;
      if (n < params.n && k < params.k) {
        let row = n + params.n_offset;
        word = weights[row * words_per_row + k / 8u];
        scale = scales[(k / params.group_size) * params.n_total + row];
      }
      for (var j = 0u; j < 8u; j++) {
        let kk = word_in_tile * 8u + j;
        w_tile[kk * 16u + r / 4u][r % 4u] = (f32((word >> (4u * j)) & 15u) - 8.0) * scale;
      }
    }
    workgroupBarrier();
    for (var kk = 0u; kk < BK; kk++) {
      let a = x_tile[kk * 16u + lid.y];
      let b = w_tile[kk * 16u + lid.x];
      acc0 += a.x * b;
      acc1 += a.y * b;
      acc2 += a.z * b;
      acc3 += a.w * b;
    }
    workgroupBarrier();
  }
  let rows_acc = array<vec4<f32>, 4>(acc0, acc1, acc2, acc3);
  for (var i = 0u; i < 4u; i++) {
    let m = m0 + lid.y * 4u + i;
    for (var j = 0u; j < 4u; j++) {
      let n = n0 + lid.x * 4u + j;
      if (m < params.m && n < params.n) {
        store(m, n, rows_acc[i][j] + select(0.0, bias[n], params.has_bias != 0u));
      }
    }
  }
}
