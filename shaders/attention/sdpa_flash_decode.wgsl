// FlashDecoding over an f16 KV cache packed two per u32, for one live token (decode) at position
// ctx - 1, G = Hq / Hkv query heads per KV head, head_dim D a multiple of 8 (rows load as vec4 of
// pairs) up to 2 * MAXHALF, G <= MAXG and G * D <= MAXGD.
$if PASS == "split":
  // Split pass: one workgroup per (split s, KV head): keys [s * chunk, min(ctx, (s + 1) * chunk)) in tiles
  // of TILE keys. Each tile's K rows, then its V rows, are staged in workgroup memory with coalesced
  // loads (rows padded by one word, so reads down a column do not collide in banks) and shared by the
  // KV head's G query heads. Per tile: two invocations per key score it, each for half of the heads;
  // one invocation per head updates that head's online softmax (running max m, sum l, and the factor
  // alpha that rescales what came before) while the others stage V; then every invocation accumulates
  // its output dims for all heads. Writes each head's partial (m, l) and its unnormalized output o to
  // scratch, [q head, split].
$else:
  // Reduce pass (both split passes): one workgroup per query head combines its splits' partials, whose
  // maxima are in base 2: M = max m_s, L = sum l_s 2^(m_s - M), out = sum o_s 2^(m_s - M) / L. RWG / (D / 4)
  // invocations share an output word, each taking every so many splits with its own running maximum
  // (PER partials loaded at once: one memory latency for up to PER RWG / (D / 4) splits); those meet
  // once in workgroup memory, at the workgroup's maximum (one barrier).
  $if QUANT:
    // This variant also writes the head's output quantized to int8 for the int8x o-proj (the layout and
    // arithmetic of int8_activations.wgsl, groups of group_size within the head), in place of a
    // quantize_activations dispatch.
const WG: u32 = 64u;
const TILE: u32 = 32u;                // keys per tile: WG / 2
const MAXG: u32 = 8u;
const MAXGD: u32 = 512u;              // G * head_dim
const MAXHALF: u32 = 64u;             // head_dim / 2
const NEG: f32 = -0x1.fffffep+127f;   // an empty running max: exp2(NEG - m) is 0 for any real m
const BATCH: u32 = 8u;                // loads issued before any is used: one memory latency per batch,
                                      // not one per load (a loop that uses each load at once waits
                                      // for every one in turn)

struct Params {
  kv_heads: u32,
  group: u32,           // G
  head_dim: u32,
  ctx: u32,             // keys in the cache (the live position + 1), less the GPU-side offset
  max_splits: u32,      // splits wanted per KV head at long contexts
  step_keys: u32,       // keys the split pass covers per workgroup and step
  scale: f32,           // scale * log2(e): the softmax runs in base 2
  $if QUANT:
    row: u32,           // heads * head_dim: the quantized row's length
    group_size: u32,
}

// (ctx, keys per split, splits) at this step, as ops/attention.py flash_splits computes them: the
// position may live on the GPU (offset[0], advanced by the step before), so both passes derive them.
fn split_layout() -> vec3<u32> {
  let ctx = params.ctx + offset[0];
  let wanted = max(1u, min(params.max_splits, (ctx + params.step_keys - 1u) / params.step_keys));
  let chunk = (ctx + wanted - 1u) / wanted;
  return vec3<u32>(ctx, chunk, (ctx + chunk - 1u) / chunk);
}

$if PASS == "split":
  @group(0) @binding(0) var<storage, read> q: array<f32>;
  @group(0) @binding(1) var<storage, read> k_cache: array<vec4<u32>>;   // four f16 pairs a load
  @group(0) @binding(2) var<storage, read> v_cache: array<vec4<u32>>;
  @group(0) @binding(3) var<storage, read_write> part_ml: array<vec2<f32>>;
  @group(0) @binding(4) var<storage, read_write> part_o: array<f32>;
  @group(0) @binding(5) var<storage, read> offset: array<u32>;
  @group(0) @binding(6) var<uniform> params: Params;

  var<workgroup> q_tile: array<f32, MAXGD>;
  var<workgroup> acc: array<f32, MAXGD>;                     // [head, dim], unnormalized
  var<workgroup> rows: array<u32, TILE * (MAXHALF + 1u)>;   // the tile's K rows, then its V rows
  var<workgroup> probs: array<f32, MAXG * TILE>;             // [head, key in tile]: scores, then e^(s - m)
  var<workgroup> run_m: array<f32, MAXG>;
  var<workgroup> run_l: array<f32, MAXG>;
  var<workgroup> alpha: array<f32, MAXG>;
  var<private> wid_y: u32;                                   // this workgroup's KV head

  $for which in ["k", "v"]:
    // The ${"K" if which == "k" else "V"} rows [tile, tile + n) of this workgroup's KV head into `rows`, BATCH vec4 loads at a time.
    fn stage_${which}(tile: u32, n: u32, tid: u32) {
      let quads = params.head_dim / 8u;                  // vec4 words per row
      let stride = params.kv_heads * quads;
      let kv = wid_y;
      let total = n * quads;
      let pitch = params.head_dim / 2u + 1u;
      for (var base = tid; base < total; base += WG * BATCH) {
        var loaded: array<vec4<u32>, BATCH>;
        for (var u = 0u; u < BATCH; u++) {
          let i = min(base + u * WG, total - 1u);
          loaded[u] = ${which}_cache[(tile + i / quads) * stride + kv * quads + i % quads];
        }
        for (var u = 0u; u < BATCH; u++) {
          let i = base + u * WG;
          if (i < total) {
            let at = (i / quads) * pitch + (i % quads) * 4u;
            rows[at] = loaded[u].x;
            rows[at + 1u] = loaded[u].y;
            rows[at + 2u] = loaded[u].z;
            rows[at + 3u] = loaded[u].w;
          }
        }
      }
    }

  @compute @workgroup_size(WG)
  fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let s = wid.x;
    let kv = wid.y;
    let splitting = split_layout();
    let ctx = splitting.x;
    let chunk = splitting.y;
    let splits = splitting.z;
    if (s >= splits) {                       // sized for the longest context: this split is empty now
      return;
    }
    wid_y = kv;
    let g = params.group;
    let dim = params.head_dim;
    let half = dim / 2u;
    let pitch = half + 1u;                   // a staged row's words
    let tid = lid.x;
    var loaded: array<f32, MAXGD / WG>;     // the group's queries (heads kv * G .., consecutive) at once
    for (var u = 0u; u < MAXGD / WG; u++) {
      loaded[u] = q[kv * g * dim + min(tid + u * WG, g * dim - 1u)];
    }
    for (var u = 0u; u < MAXGD / WG; u++) {
      let i = tid + u * WG;
      if (i < g * dim) {
        q_tile[i] = loaded[u];
        acc[i] = 0.0;
      }
    }
    if (tid < g) {
      run_m[tid] = NEG;
      run_l[tid] = 0.0;
    }
    let first = s * chunk;
    let end = min(ctx, first + chunk);
    let key = tid % TILE;
    let heads_from = tid / TILE;             // this invocation scores heads heads_from, + 2, + 4, ...
    for (var tile = first; tile < end; tile += TILE) {
      let n = min(TILE, end - tile);
      stage_k(tile, n, tid);
      workgroupBarrier();
      // Loops over heads run a constant MAXG / 2 (or MAXG) times with a guard, so the per-head arrays
      // are indexed by constants and live in registers (a dynamic index puts them in local memory).
      var dots: array<f32, MAXG / 2u>;       // heads heads_from + 2 i
      if (key < n) {
        for (var p = 0u; p < half; p++) {
          let pair = unpack2x16float(rows[key * pitch + p]);
          for (var i = 0u; i < MAXG / 2u; i++) {
            let h = heads_from + 2u * i;
            if (h < g) {
              dots[i] += q_tile[h * dim + 2u * p] * pair.x + q_tile[h * dim + 2u * p + 1u] * pair.y;
            }
          }
        }
      }
      for (var i = 0u; i < MAXG / 2u; i++) {
        let h = heads_from + 2u * i;
        if (h < g) {
          probs[h * TILE + key] = select(NEG, dots[i] * params.scale, key < n);
        }
      }
      workgroupBarrier();
      if (tid < g) {
        var m = run_m[tid];
        for (var jj = 0u; jj < n; jj++) {
          m = max(m, probs[tid * TILE + jj]);
        }
        var sum = 0.0;
        for (var jj = 0u; jj < n; jj++) {
          let p = exp2(probs[tid * TILE + jj] - m);
          probs[tid * TILE + jj] = p;
          sum += p;
        }
        let a = exp2(run_m[tid] - m);
        alpha[tid] = a;
        run_l[tid] = run_l[tid] * a + sum;
        run_m[tid] = m;
      }
      stage_v(tile, n, tid);
      workgroupBarrier();
      for (var d = tid; d < dim; d += WG) {
        var out: array<f32, MAXG>;
        for (var h = 0u; h < MAXG; h++) {
          if (h < g) {
            out[h] = acc[h * dim + d] * alpha[h];
          }
        }
        let column = d / 2u;
        let odd = d % 2u == 1u;
        for (var jj = 0u; jj < n; jj++) {
          let pair = unpack2x16float(rows[jj * pitch + column]);
          let value = select(pair.x, pair.y, odd);
          for (var h = 0u; h < MAXG; h++) {
            if (h < g) {
              out[h] += probs[h * TILE + jj] * value;
            }
          }
        }
        for (var h = 0u; h < MAXG; h++) {
          if (h < g) {
            acc[h * dim + d] = out[h];
          }
        }
      }
      workgroupBarrier();
    }
    for (var i = tid; i < g * dim; i += WG) {
      let part = (kv * g + i / dim) * splits + s;
      part_o[part * dim + i % dim] = acc[i];
    }
    if (tid < g) {
      part_ml[(kv * g + tid) * splits + s] = vec2<f32>(run_m[tid], run_l[tid]);
    }
  }
$else:
  @group(0) @binding(0) var<storage, read> part_ml: array<vec2<f32>>;
  @group(0) @binding(1) var<storage, read> part_o: array<vec4<f32>>;
  @group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;
  @group(0) @binding(3) var<storage, read> offset: array<u32>;
  @group(0) @binding(4) var<uniform> params: Params;
  $if QUANT:
    @group(0) @binding(5) var<storage, read_write> act_words: array<u32>;
    @group(0) @binding(6) var<storage, read_write> act_stats: array<vec2<f32>>;
    var<workgroup> partial: array<f32, RWG>;
    var<workgroup> chunk_sums: array<i32, RWG>;

    $include int8_quant.wgsli

    $include int8_head_quant.wgsli

  const RWG: u32 = 128u;                        // the reduce's invocations
  const PER: u32 = 8u;                          // splits an invocation loads at once
  var<workgroup> group_o: array<vec4<f32>, RWG>;    // [group, quad]: a group's sum at its own maximum
  var<workgroup> group_ml: array<vec2<f32>, RWG>;   // [group]: that maximum and the group's l

  @compute @workgroup_size(RWG)
  fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let h = wid.x;
    let tid = lid.x;
    let splits = split_layout().z;
    let quads = params.head_dim / 4u;
    let groups = RWG / quads;                   // invocations per output word: this one adds up the
    let quad = tid % quads;                     // splits group, group + groups, ... of word `quad`
    let group = min(tid / quads, groups - 1u);  // (past groups * quads: a duplicate, never read)
    // Its own maximum and sum as batches of PER splits arrive, every load of a batch before any is
    // used (one memory latency a batch; one batch up to PER * groups splits).
    var m = NEG;
    var l = 0.0;
    var acc = vec4<f32>(0.0);
    for (var base = 0u; base < splits; base += groups * PER) {
      var words: array<vec4<f32>, PER>;
      var ml: array<vec2<f32>, PER>;
      for (var u = 0u; u < PER; u++) {
        let s = min(base + group + u * groups, splits - 1u);
        words[u] = part_o[(h * splits + s) * quads + quad];
        ml[u] = part_ml[h * splits + s];
      }
      var top = m;
      for (var u = 0u; u < PER; u++) {
        if (base + group + u * groups < splits) {
          top = max(top, ml[u].x);
        }
      }
      let rescale = exp2(m - top);
      acc *= rescale;
      l *= rescale;
      for (var u = 0u; u < PER; u++) {
        if (base + group + u * groups < splits) {
          let weight = exp2(ml[u].x - top);
          acc += words[u] * weight;
          l += ml[u].y * weight;
        }
      }
      m = top;
    }
    // The groups meet once, at the workgroup's maximum: invocation o < D / 8 takes dims 8 o .. 8 o + 7.
    group_o[tid] = acc;
    if (quad == 0u && tid < groups * quads) {
      group_ml[group] = vec2<f32>(m, l);
    }
    workgroupBarrier();
    let live = tid < params.head_dim / 8u;
    var lo = vec4<f32>(0.0);
    var hi = vec4<f32>(0.0);
    if (live) {
      var top = NEG;
      for (var g = 0u; g < groups; g++) {
        top = max(top, group_ml[g].x);
      }
      var total_l = 0.0;
      for (var g = 0u; g < groups; g++) {
        let weight = exp2(group_ml[g].x - top);
        total_l += group_ml[g].y * weight;
        lo += group_o[g * quads + 2u * tid] * weight;
        hi += group_o[g * quads + 2u * tid + 1u] * weight;
      }
      lo /= total_l;
      hi /= total_l;
      out[h * quads + 2u * tid] = lo;
      out[h * quads + 2u * tid + 1u] = hi;
    }
    $if QUANT:
      quantize_head(h, tid, lo, hi);
  }
