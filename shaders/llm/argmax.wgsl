$if PASS == 1:
  // Argmax over a f32 vector, pass 1 of 2: workgroup b reduces elements [b * BLOCK, (b + 1) * BLOCK)
  // of the first n to one (key, index) pair in block_keys[b], block_index[b].
$else:
  // Argmax over a f32 vector, pass 2 of 2: one workgroup reduces the `blocks` pairs of pass 1 and
  // writes the winning index to result[0] (the only word the host reads back: 4 bytes).
$if HISTORY:
  // It also stores the winner in the sequence's token history (TokenHistory, ops/sequence.py) at
  // params.at + offset[0], and offset[0] advances by params.advance: no dispatch of its own for that.
$if EMBED:
  // And the winner's embedding row goes to next_input: the next decode step's input, read by its first
  // layer, so that step starts without an embedding dispatch of its own (argmax(embed=), NextInput).
// Order: values compare through an order-preserving u32 key computed from the bits, so no float
// comparison (which compilers may assume NaN-free) is involved. Every NaN maps to the largest key
// (NaN beats +inf, as in numpy.argmax and torch.argmax), -0 and +0 map to the same key, and equal
// keys go to the LOWEST index. The pair order (larger key, then smaller index) is a total order, so
// the result does not depend on the reduction's shape.
const WG: u32 = 256u;
$if PASS == 1:
  const ITEMS: u32 = ${ITEMS}u;        // elements per invocation: a block is WG * ITEMS (ops/argmax.py reads it)

struct Params {
  n: u32,
  blocks: u32,
  $if HISTORY:
    at: u32,
    capacity: u32,
    advance: u32,
  $if EMBED:
    $include next_input_params.wgsli
}

$if PASS == 1:
  @group(0) @binding(0) var<storage, read> values: array<f32>;
  @group(0) @binding(1) var<storage, read_write> block_keys: array<u32>;
  @group(0) @binding(2) var<storage, read_write> block_index: array<u32>;
  @group(0) @binding(3) var<uniform> params: Params;
$else:
  @group(0) @binding(0) var<storage, read> block_keys: array<u32>;
  @group(0) @binding(1) var<storage, read> block_index: array<u32>;
  @group(0) @binding(2) var<storage, read_write> result: array<u32>;
  @group(0) @binding(3) var<uniform> params: Params;
  $if EMBED:
    @group(0) @binding(6) var<storage, read> packed: array<u32>;
    @group(0) @binding(7) var<storage, read> scales: array<f32>;
    @group(0) @binding(8) var<storage, read_write> next_input: array<f32>;
  $if HISTORY:
    @group(0) @binding(4) var<storage, read_write> history: array<u32>;
    @group(0) @binding(5) var<storage, read_write> offset: array<u32>;

var<workgroup> keys: array<u32, WG>;
var<workgroup> indices: array<u32, WG>;

// Identity of the reduction: key 0 is below every value's key (the smallest, -inf's, is 0x007FFFFF).
const NO_KEY: u32 = 0u;
const NO_INDEX: u32 = 0xFFFFFFFFu;

$if EMBED:
  $include q4_embed_word.wgsli
  $include next_input_row.wgsli
$if PASS == 1:
  $include order_key.wgsli

fn wins(key: u32, index: u32, other_key: u32, other_index: u32) -> bool {
  return key > other_key || (key == other_key && index < other_index);
}

// Tree over workgroup memory; the winner ends in keys[0], indices[0]. Call from uniform control flow.
fn reduce_workgroup(lid: u32, key: u32, index: u32) {
  keys[lid] = key;
  indices[lid] = index;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
    if (lid < stride && wins(keys[lid + stride], indices[lid + stride], keys[lid], indices[lid])) {
      keys[lid] = keys[lid + stride];
      indices[lid] = indices[lid + stride];
    }
    workgroupBarrier();
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  var best_key = NO_KEY;
  var best_index = NO_INDEX;
  $if PASS == 1:
    let block = wid.y * groups.x + wid.x;
    if (block >= params.blocks) {
      return;     // uniform: the whole workgroup leaves together
    }
    for (var j = 0u; j < ITEMS; j++) {
      let i = block * WG * ITEMS + j * WG + lid;
      if (i < params.n) {
        let key = order_key(values[i]);
        if (wins(key, i, best_key, best_index)) {
          best_key = key;
          best_index = i;
        }
      }
    }
  $else:
    for (var b = lid; b < params.blocks; b += WG) {
      let key = block_keys[b];
      let index = block_index[b];
      if (wins(key, index, best_key, best_index)) {
        best_key = key;
        best_index = index;
      }
    }
  reduce_workgroup(lid, best_key, best_index);
  if (lid == 0u) {
    $if PASS == 1:
      block_keys[block] = keys[0];
      block_index[block] = indices[0];
    $else:
      result[0] = indices[0];
      $if HISTORY:
        let at = params.at + offset[0];
        if (at < params.capacity) {
          history[at] = indices[0];
        }
        offset[0] += params.advance;
  }
  $if EMBED:
    // (every invocation reads the winner: nothing writes keys or indices after the reduction's last barrier)
    write_next_input(indices[0], lid);
}
