// Appends the step's token (next[0], written by argmax or the sampler) to the sequence's token history at
// position at + offset[0] (the step's last position + 1), so generated ids accumulate on the GPU and the
// host reads them in batches; then advances the GPU-side position offset by `advance` (the step's
// tokens, where the sequence's position lives on the GPU; 0 where the host sizes every step).
// One invocation: a store of 4 bytes and a read-modify-write of 4.

struct Params {
  at: u32,
  capacity: u32,
  advance: u32,
}

@group(0) @binding(0) var<storage, read> next: array<u32>;
@group(0) @binding(1) var<storage, read_write> history: array<u32>;
@group(0) @binding(2) var<storage, read_write> offset: array<u32>;
@group(0) @binding(3) var<uniform> params: Params;

@compute @workgroup_size(1)
fn main() {
  let at = params.at + offset[0];
  if (at < params.capacity) {
    history[at] = next[0];
  }
  offset[0] += params.advance;
}
