// FlashDecoding over an f16 KV cache packed two per u32, for one live token (decode) at position
// ctx - 1, G = Hq / Hkv query heads per KV head, any even head_dim D <= 2 * MAXHALF, G <= MAXG and
// G * D <= MAXGD.
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
  // Reduce pass: one workgroup per query head combines its splits' partials:
  // M = max m_s, L = sum l_s e^(m_s - M), out = sum o_s e^(m_s - M) / L.
const WG: u32 = 64u;
const TILE: u32 = 32u;                // keys per tile: WG / 2
const MAXG: u32 = 8u;
const MAXGD: u32 = 512u;              // G * head_dim
const MAXHALF: u32 = 64u;             // head_dim / 2
const NEG: f32 = -0x1.fffffep+127f;   // an empty running max: exp(NEG - m) is 0 for any real m

struct Params {
  kv_heads: u32,
  group: u32,           // G
  head_dim: u32,
  ctx: u32,             // keys in the cache: the live position + 1
  chunk: u32,           // keys per split
  splits: u32,
  scale: f32,
}

$if PASS == "split":
  @group(0) @binding(0) var<storage, read> q: array<f32>;
  @group(0) @binding(1) var<storage, read> k_cache: array<u32>;
  @group(0) @binding(2) var<storage, read> v_cache: array<u32>;
  @group(0) @binding(3) var<storage, read_write> part_ml: array<vec2<f32>>;
  @group(0) @binding(4) var<storage, read_write> part_o: array<f32>;
  @group(0) @binding(5) var<uniform> params: Params;

  var<workgroup> q_tile: array<f32, MAXGD>;
  var<workgroup> acc: array<f32, MAXGD>;                     // [head, dim], unnormalized
  var<workgroup> rows: array<u32, TILE * (MAXHALF + 1u)>;   // the tile's K rows, then its V rows
  var<workgroup> probs: array<f32, MAXG * TILE>;             // [head, key in tile]: scores, then e^(s - m)
  var<workgroup> run_m: array<f32, MAXG>;
  var<workgroup> run_l: array<f32, MAXG>;
  var<workgroup> alpha: array<f32, MAXG>;

  @compute @workgroup_size(WG)
  fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let s = wid.x;
    let kv = wid.y;
    let g = params.group;
    let dim = params.head_dim;
    let half = dim / 2u;
    let pitch = half + 1u;                   // a staged row's words
    let stride = params.kv_heads * half;     // a cache position's words
    let tid = lid.x;
    for (var i = tid; i < g * dim; i += WG) {
      q_tile[i] = q[kv * g * dim + i];       // query heads kv * G .. kv * G + G - 1 are consecutive
      acc[i] = 0.0;
    }
    if (tid < g) {
      run_m[tid] = NEG;
      run_l[tid] = 0.0;
    }
    let first = s * params.chunk;
    let end = min(params.ctx, first + params.chunk);
    let key = tid % TILE;
    let heads_from = tid / TILE;             // this invocation scores heads heads_from, + 2, + 4, ...
    for (var tile = first; tile < end; tile += TILE) {
      let n = min(TILE, end - tile);
      for (var i = tid; i < n * half; i += WG) {
        rows[(i / half) * pitch + i % half] = k_cache[(tile + i / half) * stride + kv * half + i % half];
      }
      workgroupBarrier();
      var dots: array<f32, MAXG>;
      if (key < n) {
        for (var p = 0u; p < half; p++) {
          let pair = unpack2x16float(rows[key * pitch + p]);
          for (var h = heads_from; h < g; h += 2u) {
            dots[h] += q_tile[h * dim + 2u * p] * pair.x + q_tile[h * dim + 2u * p + 1u] * pair.y;
          }
        }
      }
      for (var h = heads_from; h < g; h += 2u) {
        probs[h * TILE + key] = select(NEG, dots[h] * params.scale, key < n);
      }
      workgroupBarrier();
      if (tid < g) {
        var m = run_m[tid];
        for (var jj = 0u; jj < n; jj++) {
          m = max(m, probs[tid * TILE + jj]);
        }
        var sum = 0.0;
        for (var jj = 0u; jj < n; jj++) {
          let p = exp(probs[tid * TILE + jj] - m);
          probs[tid * TILE + jj] = p;
          sum += p;
        }
        let a = exp(run_m[tid] - m);
        alpha[tid] = a;
        run_l[tid] = run_l[tid] * a + sum;
        run_m[tid] = m;
      }
      for (var i = tid; i < n * half; i += WG) {
        rows[(i / half) * pitch + i % half] = v_cache[(tile + i / half) * stride + kv * half + i % half];
      }
      workgroupBarrier();
      for (var d = tid; d < dim; d += WG) {
        var out: array<f32, MAXG>;
        for (var h = 0u; h < g; h++) {
          out[h] = acc[h * dim + d] * alpha[h];
        }
        let column = d / 2u;
        let odd = d % 2u == 1u;
        for (var jj = 0u; jj < n; jj++) {
          let pair = unpack2x16float(rows[jj * pitch + column]);
          let value = select(pair.x, pair.y, odd);
          for (var h = 0u; h < g; h++) {
            out[h] += probs[h * TILE + jj] * value;
          }
        }
        for (var h = 0u; h < g; h++) {
          acc[h * dim + d] = out[h];
        }
      }
      workgroupBarrier();
    }
    for (var i = tid; i < g * dim; i += WG) {
      let part = (kv * g + i / dim) * params.splits + s;
      part_o[part * dim + i % dim] = acc[i];
    }
    if (tid < g) {
      part_ml[(kv * g + tid) * params.splits + s] = vec2<f32>(run_m[tid], run_l[tid]);
    }
  }
$else:
  @group(0) @binding(0) var<storage, read> part_ml: array<vec2<f32>>;
  @group(0) @binding(1) var<storage, read> part_o: array<f32>;
  @group(0) @binding(2) var<storage, read_write> out: array<f32>;
  @group(0) @binding(3) var<uniform> params: Params;

  @compute @workgroup_size(WG)
  fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let h = wid.x;
    let dim = params.head_dim;
    var m = NEG;
    for (var s = 0u; s < params.splits; s++) {
      m = max(m, part_ml[h * params.splits + s].x);
    }
    var l = 0.0;
    for (var s = 0u; s < params.splits; s++) {
      let ml = part_ml[h * params.splits + s];
      l += ml.y * exp(ml.x - m);
    }
    for (var d = lid.x; d < dim; d += WG) {
      var sum = 0.0;
      for (var s = 0u; s < params.splits; s++) {
        let part = h * params.splits + s;
        sum += part_o[part * dim + d] * exp(part_ml[part].x - m);
      }
      out[h * dim + d] = sum / l;
    }
  }
