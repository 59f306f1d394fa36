// Q4 GEMM on int8 activations (the prefill's q4_gemm_dp4a route, M > 1):
//   out[m, n] = sum over groups g of  s_x[m, g] * s_w[g, n] * sum_{k in g} q_x[m, k] * (nib[n, k] - 8)  (+ bias[n])
// x comes quantized per row and group from int8_activations.wgsl (its layout: per row, chunks of 32
// values in two planes of 16 bytes; each u32 the (even, odd) quadruple of a weight word's nibbles).
//
// A workgroup of 16 x 16 invocations computes a ${TM} x 64 output tile, ${TM // 16} rows x 4 columns per
// invocation, walking K in tiles of BK = ${BK} (${BK // 32} chunk(s) of 32). Per tile the int8 activations and
// the weights, expanded once to signed int8 (nib - 8), are staged k-major in workgroup memory
// (${BK * TM + BK * 64} bytes): for each packed word of k an invocation reads its rows and its columns as
// vec4s, the rows' read shared by the 16 invocations of its row of the workgroup, the columns' by
// neighbours (no bank conflicts), and does ${TM // 16} x 4 dot4I8Packed. A weight word's low nibbles are
// its even k and its high nibbles its odd k, the activations' (even, odd) order: expanding is a mask, an
// xor and a sign fill. A group's dot products are exact i32 (|sum| <= 128 x 127 x 8 < 2^17); at the
// group's last chunk they go into f32, acc += f32(dot) * (s_x * s_w), one term per group.
//
$if PF:
  // This variant fetches the next K tile before computing on the current one (software pipelining):
  // each invocation's share of a tile (at most ${(TM * BK + 4095) // 4096} activation vec4(s), one activation scale,
  // one weight vec4 and its scale) is read into registers by `fetch` and written into workgroup memory
  // by `stage`, so its loads are in flight during the dot products, not after the barrier.
// The scales of each chunk's group are staged beside the tile (${BK // 32} x (${TM} + 64) f32). Rows past M
// read zeros with scale 0, columns past N the zero weight; nothing past M x N is stored. A non-finite
// activation group has a NaN scale (int8_activations.wgsl): its row's outputs are NaN. Weights in the
// reference layout (q4gsw_quantize.wgsl), rows n_offset.. of a packed matrix with n_total rows; K is a
// multiple of the group size, itself a multiple of 32.
//
$if GLU:
  // The GLU form: the weight is [gate; up] (2N rows), each workgroup stages 32 gate rows and the 32 up rows of
  // the same outputs as its 64 columns, and stores out = silu(g) * u for its 64 x 32 outputs (swiglu.wgsl's
  // arithmetic): the up halves reach their gate halves through the staging tiles, free after the last K tile
  // (their ${TM} x 8 vec4s fill x_tile, then w_tile: the m64k64 tile's 256 + 256). No bias, no residual.
  //
$if QKV:
  // The fused QKV form: the weight is a decoder layer's stacked [q; k; v] rows and each output column goes
  // to its own tensor (columns [0, n_q) to out, the next n_kv to out_k, the last n_kv to out_v), so one
  // grid of N = n_q + 2 n_kv replaces three (no bias, no residual).
  //
// Split K: workgroup z walks chunks [z * split_chunks, ...) only (whole groups and whole K tiles), so a
// grid too small to fill the GPU runs `splits` times as many workgroups, each with a share of the
// latency-bound K walk. With splits > 1 each writes its f32 sums to partials [split][m][n]${" and" if SK else ""}
${"// q4gsw_gemm_split_reduce adds them up in order (with the bias and the residual)." if SK else "// (only the _sk variants have that buffer: the others take splits = 1)."}
const TM: u32 = ${TM}u;
const TN: u32 = 64u;
const BK: u32 = ${BK}u;
const CHUNKS: u32 = ${BK // 32}u;       // 32-value chunks per K tile

$include int8_gemm_interface.wgsli

var<workgroup> x_tile: array<vec4<u32>, ${BK // 4 * TM // 4}>;     // [word of k][m / 4]
var<workgroup> w_tile: array<vec4<u32>, ${BK // 4 * 16}>;         // [word of k][n / 4]
var<workgroup> x_scale: array<f32, ${BK // 32 * TM}>;             // [chunk][m]
var<workgroup> w_scale: array<f32, ${BK // 32 * 64}>;             // [chunk][n]

// Nibbles 0..15 in the low half of each byte -> the signed bytes nib - 8: xor 8 gives the 4-bit two's
// complement, and bytes whose bit 3 is then set (nib < 8) get their high half filled (8 x 30 = 0xF0,
// no carry between bytes).
fn signed_bytes(nibbles: u32) -> u32 {
  let v = nibbles ^ 0x08080808u;
  return v | ((v & 0x08080808u) * 30u);
}

fn dots(a: u32, b: vec4<u32>) -> vec4<i32> {
  return vec4<i32>(dot4I8Packed(a, b.x), dot4I8Packed(a, b.y), dot4I8Packed(a, b.z), dot4I8Packed(a, b.w));
}

$if PF:
  const XN: u32 = ${(TM * BK + 4095) // 4096}u;      // activation vec4s per invocation per K tile

  // One invocation's share of a K tile, as read from memory (rows past M and chunks past K: zeros;
  // columns past N: the zero weight, nibbles 8).
  struct Share {
    x: array<vec4<u32>, XN>,
    x_scale: f32,
    w: vec4<u32>,
    w_scale: f32,
  }

  // The share of invocation t for the tile of chunks c0.. of rows m0.. and columns n0..: activation vec4s
  // t, t + 256, ... of the tile's TM x CHUNKS x 2 (a row's vec4s, then the next row's), activation scale
  // t of TM x CHUNKS, weight vec4 and scale t of TN x CHUNKS (a column's chunks, then the next's).
  fn fetch(t: u32, m0: u32, n0: u32, c0: u32, chunks: u32) -> Share {
    var share: Share;
    for (var j = 0u; j < XN; j++) {
      let i = t + 256u * j;
      let m = m0 + i / (CHUNKS * 2u);
      let c = c0 + (i / 2u) % CHUNKS;
      share.x[j] = vec4<u32>(0u);
      if (i < TM * CHUNKS * 2u && m < params.m && c < chunks) {
        share.x[j] = xq[m * (params.k / 16u) + (i % 2u) * chunks + c];     // plane i % 2 of chunk c
      }
    }
    share.x_scale = 0.0;
    let xm = m0 + t / CHUNKS;
    if (t < TM * CHUNKS && xm < params.m && c0 + t % CHUNKS < chunks) {
      share.x_scale = xstats[xm * chunks + c0 + t % CHUNKS].x;
    }
    share.w = vec4<u32>(0x88888888u);
    share.w_scale = 0.0;
    $if GLU:
      let n = n0 / 2u + (t / CHUNKS) % 32u;     // staged columns 0..31: gate rows; 32..63: up rows, the same outputs
      let up = (t / CHUNKS) / 32u;
    $else:
      let n = n0 + t / CHUNKS;
    let c = c0 + t % CHUNKS;
    if (t < TN * CHUNKS && n < params.n && c < chunks) {
      let row = n + params.n_offset${" + up * params.n" if GLU else ""};
      share.w = weights[row * chunks + c];
      share.w_scale = scales[(c * 32u / params.group_size) * params.n_total + row];
    }
    return share;
  }

  // Invocation t's share into the tiles, k-major; the weights expanded to 8 words of signed int8.
  fn stage(t: u32, share: Share) {
    for (var j = 0u; j < XN; j++) {
      let i = t + 256u * j;
      if (i < TM * CHUNKS * 2u) {
        let r = i / (CHUNKS * 2u);
        let word = ((i / 2u) % CHUNKS) * 8u + (i % 2u) * 4u;      // its first word of k in the tile
        for (var w = 0u; w < 4u; w++) {
          x_tile[(word + w) * (TM / 4u) + r / 4u][r % 4u] = share.x[j][w];
        }
      }
    }
    if (t < TM * CHUNKS) {
      x_scale[(t % CHUNKS) * TM + t / CHUNKS] = share.x_scale;
    }
    if (t < TN * CHUNKS) {
      let r = t / CHUNKS;
      let c = t % CHUNKS;
      for (var j = 0u; j < 4u; j++) {
        let word = c * 8u + 2u * j;
        w_tile[word * 16u + r / 4u][r % 4u] = signed_bytes(share.w[j] & 0x0F0F0F0Fu);
        w_tile[(word + 1u) * 16u + r / 4u][r % 4u] = signed_bytes((share.w[j] >> 4u) & 0x0F0F0F0Fu);
      }
      w_scale[c * TN + r] = share.w_scale;
    }
  }

$if not GLU:
  fn store_row(m: u32, first: u32, split: u32, values: vec4<f32>) {
    for (var j = 0u; j < 4u; j++) {
      let n = first + j;
      $if SK:
        if (m < params.m && n < params.n && params.splits > 1u) {
          partials[(split * params.m + m) * params.n + n] = values[j];
          continue;
        }
      if (m < params.m && n < params.n) {
        $if QKV:
          if (n < params.n_q) {
            out[m * params.n_q + n] = values[j];
          } else if (n < params.n_q + params.n_kv) {
            out_k[m * params.n_kv + n - params.n_q] = values[j];
          } else {
            out_v[m * params.n_kv + n - params.n_q - params.n_kv] = values[j];
          }
        $else:
          out[m * params.n + n] = values[j] + select(0.0, bias[n], params.has_bias != 0u)
                                  + select(0.0, out[m * params.n + n], params.accumulate != 0u);
      }
    }
  }

$if GLU:
  // A GLU tile's up sums of row m, outputs 4 q .. 4 q + 3 (q < 8), kept in the staging tiles.
  fn park(m: u32, q: u32, sums: vec4<f32>) {
    let i = m * 8u + q;
    if (i < ${BK // 4 * TM // 4}u) {
      x_tile[i] = bitcast<vec4<u32>>(sums);
    } else {
      w_tile[i - ${BK // 4 * TM // 4}u] = bitcast<vec4<u32>>(sums);
    }
  }

  fn parked(m: u32, q: u32) -> vec4<f32> {
    let i = m * 8u + q;
    if (i < ${BK // 4 * TM // 4}u) {
      return bitcast<vec4<f32>>(x_tile[i]);
    }
    return bitcast<vec4<f32>>(w_tile[i - ${BK // 4 * TM // 4}u]);
  }

@compute @workgroup_size(16, 16, 1)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let m0 = wid.y * TM;
  let n0 = wid.x * TN;
  let t = lid.y * 16u + lid.x;
  let chunks = params.k / 32u;           // per row
  let first = wid.z * params.split_chunks;  // this split's chunks [first, end)
  let end = min(chunks, first + params.split_chunks);
  let row_vec4s = params.k / 16u;        // a row of xq: plane 0 (vec4 c: chunk c's first 16 values), then plane 1
  $for r in range(TM // 16):
    var dot${r} = vec4<i32>(0);
    var acc${r} = vec4<f32>(0.0);
  $if PF:
    var prefetched = fetch(t, m0, n0, first, chunks);
  for (var c0 = first; c0 < end; c0 += CHUNKS) {
    $if PF:
      stage(t, prefetched);
      workgroupBarrier();
      if (c0 + CHUNKS < end) {
        prefetched = fetch(t, m0, n0, c0 + CHUNKS, chunks);
      }
    $else:
      // Activations: TM rows x CHUNKS chunks x 2 planes, one vec4 (4 words of k) each; consecutive
      // invocations take one row's vec4s, then the next row's.
      for (var i = t; i < TM * CHUNKS * 2u; i += 256u) {
        let r = i / (CHUNKS * 2u);
        let plane = i % 2u;
        let c = (i / 2u) % CHUNKS;
        let m = m0 + r;
        var v = vec4<u32>(0u);
        if (m < params.m && c0 + c < chunks) {
          v = xq[m * row_vec4s + plane * chunks + c0 + c];
        }
        let word = c * 8u + plane * 4u;    // its first word of k in the tile
        for (var j = 0u; j < 4u; j++) {
          x_tile[(word + j) * (TM / 4u) + r / 4u][r % 4u] = v[j];
        }
      }
      for (var i = t; i < TM * CHUNKS; i += 256u) {
        let r = i / CHUNKS;
        let c = i % CHUNKS;
        let m = m0 + r;
        var scale = 0.0;
        if (m < params.m && c0 + c < chunks) {
          scale = xstats[m * chunks + c0 + c].x;
        }
        x_scale[c * TM + r] = scale;
      }
      // Weights: TN rows x CHUNKS chunks, one vec4 (32 nibbles) each, expanded to 8 words of signed int8.
      for (var i = t; i < TN * CHUNKS; i += 256u) {
        let r = i / CHUNKS;
        let c = i % CHUNKS;
        let n = n0 + r;
        var w = vec4<u32>(0x88888888u);   // the nibble 8 is the value 0: columns past N add nothing
        var scale = 0.0;
        if (n < params.n && c0 + c < chunks) {
          let row = n + params.n_offset;
          w = weights[row * chunks + c0 + c];
          scale = scales[((c0 + c) * 32u / params.group_size) * params.n_total + row];
        }
        for (var j = 0u; j < 4u; j++) {
          let word = c * 8u + 2u * j;
          w_tile[word * 16u + r / 4u][r % 4u] = signed_bytes(w[j] & 0x0F0F0F0Fu);
          w_tile[(word + 1u) * 16u + r / 4u][r % 4u] = signed_bytes((w[j] >> 4u) & 0x0F0F0F0Fu);
        }
        w_scale[c * TN + r] = scale;
      }
      workgroupBarrier();
    for (var c = 0u; c < CHUNKS; c++) {
      for (var j = 0u; j < 8u; j++) {         // a constant trip count, for the compiler to unroll
        let word = c * 8u + j;
        let b = w_tile[word * 16u + lid.x];
        $for v in range(TM // 64):
          let a${v} = x_tile[word * (TM / 4u) + lid.y * ${TM // 64}u + ${v}u];
        $for r in range(TM // 16):
          dot${r} += dots(a${r // 4}[${r % 4}], b);
      }
      // At the last chunk of a group (or of K), the group's exact sums go into the f32 accumulators.
      let next = c0 + c + 1u;
      if ((next * 32u) % params.group_size == 0u || next == end) {
        let sw = vec4<f32>(w_scale[c * TN + lid.x * 4u], w_scale[c * TN + lid.x * 4u + 1u],
                           w_scale[c * TN + lid.x * 4u + 2u], w_scale[c * TN + lid.x * 4u + 3u]);
        $for r in range(TM // 16):
          acc${r} += vec4<f32>(dot${r}) * (x_scale[c * TM + lid.y * ${TM // 16}u + ${r}u] * sw);
          dot${r} = vec4<i32>(0);
      }
    }
    workgroupBarrier();
  }
  $if GLU:
    // Lanes 8..15 of each row of invocations hold the up sums of the outputs whose gate sums lanes 0..7 hold.
    if (lid.x >= 8u) {
      $for r in range(TM // 16):
        park(lid.y * ${TM // 16}u + ${r}u, lid.x - 8u, acc${r});
    }
    workgroupBarrier();
    if (lid.x < 8u) {
      $for r in range(TM // 16):
        {
          let m = m0 + lid.y * ${TM // 16}u + ${r}u;
          let g = acc${r};
          let u = parked(lid.y * ${TM // 16}u + ${r}u, lid.x);
          let value = g / (1.0 + exp(-g)) * u;
          for (var j = 0u; j < 4u; j++) {
            let n = n0 / 2u + lid.x * 4u + j;
            if (m < params.m && n < params.n) {
              out[m * params.n + n] = value[j];
            }
          }
        }
    }
  $else:
    $for r in range(TM // 16):
      store_row(m0 + lid.y * ${TM // 16}u + ${r}u, n0 + lid.x * 4u, wid.z, acc${r});
}
