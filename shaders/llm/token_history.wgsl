// Appends the step's greedy token (next[0], written by argmax) to the sequence's token history at
// position pos + tokens, so generated ids accumulate on the GPU and the host reads them in batches.
// One invocation: a store of 4 bytes.

struct Params {
  at: u32,
  capacity: u32,
}

@group(0) @binding(0) var<storage, read> next: array<u32>;
@group(0) @binding(1) var<storage, read_write> history: array<u32>;
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(1)
fn main() {
  if (params.at < params.capacity) {
    history[params.at] = next[0];
  }
}
