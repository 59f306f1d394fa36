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
//
// Split K: workgroup z walks chunks [z * split_chunks, ...) only (whole groups and whole K tiles), so a
// grid too small to fill the GPU runs `splits` times as many workgroups, each with a share of the
// latency-bound K walk. With splits > 1 each writes its f32 sums to partials [split][m][n]${" and" if SK else ""}
${"// q4gsw_gemm_split_reduce adds them up in order (with the bias and the residual)." if SK else "// (only the _sk variants have that buffer: the others take splits = 1)."}
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

$include int8_gemm_interface.wgsli

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

// An invocation's share of a K tile (chunks c0, c0 + 1 of rows m0.. and columns n0..), as read from
// memory: activation vec4s t, t + WG, ... of the tile's TM x 4 (a row's chunk c0 plane 0, chunk c0 + 1
// plane 0, then both planes 1), activation scales of TM x 2, weight vec4s (32 nibbles) and scales of
// TN x 2. Rows past M and chunks past K read zeros, columns past N the zero weight (nibbles 8).
struct Share {
  x: array<vec4<u32>, ${-(-64 * FM // (32 * SGN))}>,
  x_scale: array<f32, ${-(-32 * FM // (32 * SGN))}>,
  w: array<vec4<u32>, ${-(-32 * FN // (32 * SGM))}>,
  w_scale: array<f32, ${-(-32 * FN // (32 * SGM))}>,
}

fn fetch(t: u32, m0: u32, n0: u32, c0: u32, chunks: u32) -> Share {
  var share: Share;
  $for j in range(-(-64 * FM // (32 * SGN))):
    {
      let i = t + ${j}u * WG;
      let m = m0 + i / 4u;
      let chunk = i % 2u;
      share.x[${j}] = vec4<u32>(0u);
      if (i < TM * 4u && m < params.m && c0 + chunk < chunks) {
        share.x[${j}] = xq[m * (params.k / 16u) + ((i / 2u) % 2u) * chunks + c0 + chunk];
      }
    }
  $for j in range(-(-32 * FM // (32 * SGN))):
    {
      let i = t + ${j}u * WG;
      let m = m0 + i / 2u;
      share.x_scale[${j}] = 0.0;
      if (i < TM * 2u && m < params.m && c0 + i % 2u < chunks) {
        share.x_scale[${j}] = xstats[m * chunks + c0 + i % 2u].x;
      }
    }
  $for j in range(-(-32 * FN // (32 * SGM))):
    {
      let i = t + ${j}u * WG;
      let n = n0 + i / 2u;
      let chunk = c0 + i % 2u;
      share.w[${j}] = vec4<u32>(0x88888888u);
      share.w_scale[${j}] = 0.0;
      if (i < TN * 2u && n < params.n && chunk < chunks) {
        let row = n + params.n_offset;
        share.w[${j}] = weights[row * chunks + chunk];
        share.w_scale[${j}] = scales[(chunk * 32u / params.group_size) * params.n_total + row];
      }
    }
  return share;
}

// An invocation's share into the tiles: activation bytes as they are, the weights expanded to 8 words
// of signed int8 per chunk.
fn put(t: u32, share: Share) {
  $for j in range(-(-64 * FM // (32 * SGN))):
    {
      let i = t + ${j}u * WG;
      if (i < TM * 4u) {
        let word = ((i / 4u) * XS + (i % 2u) * 32u + ((i / 2u) % 2u) * 16u) / 4u;
        $for c in range(4):
          x_tile[word + ${c}u] = bitcast<i32>(share.x[${j}][${c}]);
      }
    }
  $for j in range(-(-32 * FM // (32 * SGN))):
    {
      let i = t + ${j}u * WG;
      if (i < TM * 2u) {
        x_scale[(i % 2u) * TM + i / 2u] = share.x_scale[${j}];
      }
    }
  $for j in range(-(-32 * FN // (32 * SGM))):
    {
      let i = t + ${j}u * WG;
      if (i < TN * 2u) {
        let word = ((i / 2u) * XS + (i % 2u) * 32u) / 4u;
        $for c in range(4):
          w_tile[word + ${2 * c}u] = signed_bytes(share.w[${j}][${c}] & 0x0F0F0F0Fu);
          w_tile[word + ${2 * c + 1}u] = signed_bytes((share.w[${j}][${c}] >> 4u) & 0x0F0F0F0Fu);
        w_scale[(i % 2u) * TN + i / 2u] = share.w_scale[${j}];
      }
    }
}

fn store(m: u32, n: u32, split: u32, value: f32) {
  if (m < params.m && n < params.n) {
    $if SK:
      if (params.splits > 1u) {
        partials[(split * params.m + m) * params.n + n] = value;
        return;
      }
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
  let first = wid.z * params.split_chunks;  // this split's chunks [first, end)
  let end = min(chunks, first + params.split_chunks);
  let sm = (sg / SGN) * ${FM * 16}u;       // the subgroup's first row and column in the tile
  let sn = (sg % SGN) * ${FN * 16}u;
  $for i in range(FM):
    $for j in range(FN):
      var sum${i}${j} = subgroup_matrix_result<i32, 16, 16>();
      var acc${i}${j}: array<f32, 8>;
  $if PF:
    var next_share = fetch(t, m0, n0, first, chunks);
  for (var c0 = first; c0 < end; c0 += 2u) {
    $if PF:
      // the next tile's loads are issued here and land while this tile's products run
      put(t, next_share);
      workgroupBarrier();
      if (c0 + 2u < end) {
        next_share = fetch(t, m0, n0, c0 + 2u, chunks);
      }
    $else:
      put(t, fetch(t, m0, n0, c0, chunks));
      workgroupBarrier();
    $for ch in range(2):
      if (c0 + ${ch}u < end) {
        let chunk = ${ch}u;
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
        if ((next * 32u) % params.group_size == 0u || next == end) {
          $for i in range(FM):
            $for j in range(FN):
              subgroupMatrixStore(&sums, (sg * ${FM * FN}u + ${i * FN + j}u) * 256u, sum${i}${j}, false, 16u);
              sum${i}${j} = subgroup_matrix_result<i32, 16, 16>();
          workgroupBarrier();
          // Element e = lane + 32 v of a 16 x 16 matrix: row e / 16, column e % 16 (lane % 16). The loops
          // over v are unrolled here: an accumulator array indexed by a loop variable lives in local
          // memory on NVIDIA, not in registers.
          $for i in range(FM):
            $for j in range(FN):
              {
                let base = (sg * ${FM * FN}u + ${i * FN + j}u) * 256u + lane;
                let sw = w_scale[chunk * TN + sn + ${16 * j}u + lane % 16u];
                let rows = chunk * TM + sm + ${16 * i}u + lane / 16u;
                $for v in range(8):
                  acc${i}${j}[${v}] += f32(sums[base + ${32 * v}u]) * (x_scale[rows + ${2 * v}u] * sw);
              }
          $if ch == 0:
            workgroupBarrier();   // another group may end at chunk 1 (after it, the tile's closing
                                  // barrier orders the next store after these reads)
        }
      }
    workgroupBarrier();
  }
  $for i in range(FM):
    $for j in range(FN):
      $for v in range(8):
        store(m0 + sm + ${16 * i + 2 * v}u + lane / 16u, n0 + sn + ${16 * j}u + lane % 16u, wid.z, acc${i}${j}[${v}]);
}
