// Q4 GEMM on f16 subgroup matrices (tensor cores; the prefill's q4_gemm_sgmat_f16 route, M > 1, where the
// device has shader-f16 and an f16 x f16 -> f32 16x16x16 config: Chromium on NVIDIA with
// --enable-dawn-features=vulkan_enable_f16_on_nvidia):
//   out[m, n] = sum_k f16(x[m, k]) * f16((nib[n, k] - 8) * s_w[g(k), n])  (+ bias[n]), f32 products summed
// The group scale is folded into each weight as it is rounded to f16, so one f32 result matrix
// accumulates the whole of K (no per-group step, unlike the int8 routes); x is read as f32 and rounded
// to f16 as it is staged (no quantization pass).
//
// A workgroup of ${SGM} x ${SGN} subgroups of 32 owns a ${16 * SGM * FM} x ${16 * SGN * FN} output tile;
// subgroup (i, j) its ${16 * FM} x ${16 * FN} block as ${FM} x ${FN} f32 result matrices. K is walked in
// tiles of 64: x rows and weight rows (k-contiguous, XS = 72 halves apart: 144 bytes, rows start in
// different banks) are staged as f16; each 16-wide K step is one left (x rows) and one right (weight rows
// read column-major) operand per matrix. The next tile's loads are issued before the current tile's
// products. At the end each subgroup stores its results to workgroup memory and every invocation adds
// the bias (and what out holds, when accumulating) to its elements and stores those inside M x N.
// Rows past M read zeros, columns past N the scale 0; K is a multiple of the group size, itself a
// multiple of 32. An x beyond f16's range becomes an infinity (the output says so, it is not clamped).
// Needs subgroups of exactly 32 (the route's guard).
$if KM:
  // This variant stages the weights k-major (WS = TN + 8 halves a row of k, read row-major): an invocation
  // takes one column's 32 values of the K tile as one vec4 load and one scale, and consecutive invocations
  // consecutive columns, so each of its f16 stores lands in a bank of its own.
enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;
diagnostic(off, chromium_experimental.subgroup_matrix_uniformity);    // offsets from subgroup_id

const TM: u32 = ${16 * SGM * FM}u;
const TN: u32 = ${16 * SGN * FN}u;
const SGN: u32 = ${SGN}u;
const XS: u32 = 72u;                    // halves between rows of a staged tile
$if KM:
  const WS: u32 = TN + 8u;              // halves between the weight tile's rows of k
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

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> weights: array<${"vec4<u32>" if KM else "u32"}>;
@group(0) @binding(2) var<storage, read> scales: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<uniform> params: Params;

var<workgroup> x_tile: array<f16, ${16 * SGM * FM * 72}>;      // [m][72]
$if KM:
  var<workgroup> w_tile: array<f16, ${64 * (16 * SGN * FN + 8)}>;      // [k][WS]
$else:
  var<workgroup> w_tile: array<f16, ${16 * SGN * FN * 72}>;      // [n][72]
var<workgroup> results: array<f32, ${256 * SGM * SGN}>;   // [subgroup][16 x 16]: one result matrix at a time

// An invocation's share of a K tile (64 values of rows m0.. and columns n0.. from k0), as read from
// memory: x vec4s t, t + WG, ... of the tile's TM x 16, and weight words (8 nibbles) with their
// group's scale of TN x 8 (k-major: vec4s of 32 nibbles, a column's first 32 k for t < TN, then its last).
struct Share {
  x: array<vec4<f32>, ${-(-16 * FM // (2 * SGN))}>,
  w: array<${"vec4<u32>" if KM else "u32"}, ${-(-32 * SGN * FN // (32 * SGM * SGN)) if KM else -(-4 * FN // SGM)}>,
  w_scale: array<f32, ${-(-32 * SGN * FN // (32 * SGM * SGN)) if KM else -(-4 * FN // SGM)}>,
}

fn fetch(t: u32, m0: u32, n0: u32, k0: u32) -> Share {
  var share: Share;
  $for j in range(-(-16 * FM // (2 * SGN))):
    {
      let i = t + ${j}u * WG;
      let m = m0 + i / 16u;
      let k = k0 + (i % 16u) * 4u;
      share.x[${j}] = vec4<f32>(0.0);
      if (i < TM * 16u && m < params.m && k < params.k) {
        share.x[${j}] = x[(m * params.k + k) / 4u];
      }
    }
  $if KM:
    $for j in range(-(-32 * SGN * FN // (32 * SGM * SGN))):
      {
        let i = t + ${j}u * WG;
        let n = n0 + i % TN;
        let k = k0 + (i / TN) * 32u;
        share.w[${j}] = vec4<u32>(0x88888888u);
        share.w_scale[${j}] = 0.0;
        if (i < 2u * TN && n < params.n && k < params.k) {
          let row = n + params.n_offset;
          share.w[${j}] = weights[(row * params.k + k) / 32u];
          share.w_scale[${j}] = scales[(k / params.group_size) * params.n_total + row];
        }
      }
  $else:
    $for j in range(-(-4 * FN // SGM)):
      {
        let i = t + ${j}u * WG;
        let n = n0 + i / 8u;
        let k = k0 + (i % 8u) * 8u;
        share.w[${j}] = 0x88888888u;
        share.w_scale[${j}] = 0.0;
        if (i < TN * 8u && n < params.n && k < params.k) {
          let row = n + params.n_offset;
          share.w[${j}] = weights[(row * params.k + k) / 8u];
          share.w_scale[${j}] = scales[(k / params.group_size) * params.n_total + row];
        }
      }
  return share;
}

// A weight word's low nibbles are its even k, its high nibbles its odd k (the reference layout).
fn put(t: u32, share: Share) {
  $for j in range(-(-16 * FM // (2 * SGN))):
    {
      let i = t + ${j}u * WG;
      if (i < TM * 16u) {
        let at = (i / 16u) * XS + (i % 16u) * 4u;
        $for c in range(4):
          x_tile[at + ${c}u] = f16(share.x[${j}][${c}]);
      }
    }
  $if KM:
    $for j in range(-(-32 * SGN * FN // (32 * SGM * SGN))):
      {
        let i = t + ${j}u * WG;
        if (i < 2u * TN) {
          let at = (i / TN) * 32u * WS + i % TN;     // row k of the tile: the column's first or last 32
          let s = share.w_scale[${j}];
          $for q in range(4):
            $for b in range(4):
              w_tile[at + ${8 * q + 2 * b}u * WS] =
                  f16(f32(i32((share.w[${j}][${q}] >> ${8 * b}u) & 0xFu) - 8) * s);
              w_tile[at + ${8 * q + 2 * b + 1}u * WS] =
                  f16(f32(i32((share.w[${j}][${q}] >> ${8 * b + 4}u) & 0xFu) - 8) * s);
        }
      }
  $else:
    $for j in range(-(-4 * FN // SGM)):
      {
        let i = t + ${j}u * WG;
        if (i < TN * 8u) {
          let at = (i / 8u) * XS + (i % 8u) * 8u;
          let s = share.w_scale[${j}];
          $for b in range(4):
            w_tile[at + ${2 * b}u] = f16(f32(i32((share.w[${j}] >> ${8 * b}u) & 0xFu) - 8) * s);
            w_tile[at + ${2 * b + 1}u] = f16(f32(i32((share.w[${j}] >> ${8 * b + 4}u) & 0xFu) - 8) * s);
        }
      }
}

@compute @workgroup_size(${32 * SGM * SGN}, 1, 1)
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
  let m0 = wid.y * TM;
  let n0 = wid.x * TN;
  let sm = (sg / SGN) * ${FM * 16}u;       // the subgroup's first row and column in the tile
  let sn = (sg % SGN) * ${FN * 16}u;
  $for i in range(FM):
    $for j in range(FN):
      var sum${i}${j} = subgroup_matrix_result<f32, 16, 16>();
  var next_share = fetch(t, m0, n0, 0u);
  for (var k0 = 0u; k0 < params.k; k0 += 64u) {
    put(t, next_share);
    workgroupBarrier();
    if (k0 + 64u < params.k) {
      next_share = fetch(t, m0, n0, k0 + 64u);
    }
    $for kk in range(4):
      {
        $for i in range(FM):
          let left${i} = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(
              &x_tile, (sm + ${16 * i}u) * XS + ${16 * kk}u, false, XS);
        $for j in range(FN):
          $if KM:
            let right${j} = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(
                &w_tile, ${16 * kk}u * WS + sn + ${16 * j}u, false, WS);
          $else:
            let right${j} = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(
                &w_tile, (sn + ${16 * j}u) * XS + ${16 * kk}u, true, XS);
        $for i in range(FM):
          $for j in range(FN):
            sum${i}${j} = subgroupMatrixMultiplyAccumulate(left${i}, right${j}, sum${i}${j});
      }
    workgroupBarrier();
  }
  // Each result matrix in turn through the subgroup's 16 x 16 of workgroup memory (FM x FN of them would
  // not leave room for larger tiles); element e = lane + 32 v: row e / 16, column e % 16 (lane % 16).
  $for i in range(FM):
    $for j in range(FN):
      subgroupMatrixStore(&results, sg * 256u, sum${i}${j}, false, 16u);
      workgroupBarrier();
      $for v in range(8):
        {
          let m = m0 + sm + ${16 * i + 2 * v}u + lane / 16u;
          let n = n0 + sn + ${16 * j}u + lane % 16u;
          if (m < params.m && n < params.n) {
            out[m * params.n + n] = results[sg * 256u + lane + ${32 * v}u]
                                    + select(0.0, bias[n], params.has_bias != 0u)
                                    + select(0.0, out[m * params.n + n], params.accumulate != 0u);
          }
        }
      workgroupBarrier();
}
