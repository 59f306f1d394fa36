// Scaled dot-product attention, materialized, over an f16 KV cache packed two per u32: any query
// heads Hq over KV heads Hkv (Hq % Hkv == 0, query head h reads KV head h / (Hq / Hkv)), any even
// head_dim D. The step's token t sits at position pos + t and attends keys 0..pos + t (causal).
// Three passes over a scores buffer [tokens * Hq, ctx] (ctx = pos + tokens; row r = t * Hq + h):
$if PASS == "scores":
  //   scores: scores[r, j] = scale * q[t, h] . k[j, h / G] for j <= pos + t, one invocation each.
$elif PASS == "softmax":
  //   softmax: each row's scores [0, pos + t] -> exp(s - max) / sum, one workgroup per row.
$else:
  //   weighted: out[t, h, d] = sum_j p[r, j] v[j, h / G, d], one invocation per output.
const WG: u32 = ${WG}u;

struct Params {
  tokens: u32,
  heads: u32,
  kv_heads: u32,
  head_dim: u32,
  pos: u32,
  ctx: u32,             // pos + tokens: the scores' row stride
  scale: f32,
}

$if PASS == "scores":
  @group(0) @binding(0) var<storage, read> q: array<f32>;
  @group(0) @binding(1) var<storage, read> k_cache: array<u32>;
  @group(0) @binding(2) var<storage, read_write> scores: array<f32>;
  @group(0) @binding(3) var<uniform> params: Params;

  @compute @workgroup_size(WG)
  fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.y * (groups.x * WG) + gid.x;
    let r = i / params.ctx;
    let j = i % params.ctx;
    let t = r / params.heads;
    if (r >= params.tokens * params.heads || j > params.pos + t) {
      return;
    }
    let h = r % params.heads;
    let half = params.head_dim / 2u;
    let kv = h / (params.heads / params.kv_heads);
    let q0 = r * params.head_dim;
    let k0 = (j * params.kv_heads + kv) * half;
    var sum = 0.0;
    for (var p = 0u; p < half; p++) {
      let key = unpack2x16float(k_cache[k0 + p]);
      sum += q[q0 + 2u * p] * key.x + q[q0 + 2u * p + 1u] * key.y;
    }
    scores[i] = sum * params.scale;
  }
$elif PASS == "softmax":
  @group(0) @binding(0) var<storage, read_write> scores: array<f32>;
  @group(0) @binding(1) var<uniform> params: Params;

  var<workgroup> partial: array<f32, WG>;

  // A workgroup-wide max (is_sum false) or sum of one value per invocation.
  fn reduce_row(local: u32, value: f32, is_sum: bool) -> f32 {
    partial[local] = value;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
      if (local < stride) {
        partial[local] = select(max(partial[local], partial[local + stride]), partial[local] + partial[local + stride], is_sum);
      }
      workgroupBarrier();
    }
    let total = partial[0];
    workgroupBarrier();
    return total;
  }

  @compute @workgroup_size(WG)
  fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
          @builtin(num_workgroups) groups: vec3<u32>) {
    let r = wid.y * groups.x + wid.x;
    if (r >= params.tokens * params.heads) {
      return;         // uniform per workgroup: the barriers below stay in uniform control flow
    }
    let n = params.pos + r / params.heads + 1u;
    let row = r * params.ctx;
    var m = -0x1.fffffep+127f;
    for (var j = lid.x; j < n; j += WG) {
      m = max(m, scores[row + j]);
    }
    m = reduce_row(lid.x, m, false);
    var l = 0.0;
    for (var j = lid.x; j < n; j += WG) {
      let p = exp(scores[row + j] - m);
      scores[row + j] = p;
      l += p;
    }
    l = reduce_row(lid.x, l, true);
    for (var j = lid.x; j < n; j += WG) {
      scores[row + j] = scores[row + j] / l;
    }
  }
$else:
  @group(0) @binding(0) var<storage, read> scores: array<f32>;
  @group(0) @binding(1) var<storage, read> v_cache: array<u32>;
  @group(0) @binding(2) var<storage, read_write> out: array<f32>;
  @group(0) @binding(3) var<uniform> params: Params;

  @compute @workgroup_size(WG)
  fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.y * (groups.x * WG) + gid.x;
    if (i >= params.tokens * params.heads * params.head_dim) {
      return;
    }
    let d = i % params.head_dim;
    let r = i / params.head_dim;
    let t = r / params.heads;
    let kv = (r % params.heads) / (params.heads / params.kv_heads);
    let half = params.head_dim / 2u;
    let row = r * params.ctx;
    var sum = 0.0;
    for (var j = 0u; j <= params.pos + t; j++) {
      let value = unpack2x16float(v_cache[(j * params.kv_heads + kv) * half + d / 2u]);
      sum += scores[row + j] * select(value.x, value.y, d % 2u == 1u);
    }
    out[i] = sum;
  }
