"""How much would a decode linear's split-K accumulation through storage atomics cost? (issue 14: the
fused gate/up + SwiGLU + down idea, docs/PERFORMANCE.md, session 30.) Natively (wgpu), one chain of
DISPATCHES back-to-back dispatches per case between two timestamps, us a dispatch:

  empty        a workgroup that does nothing (the floor of a dependent dispatch)
  store        every workgroup writes its N partial sums to its own row of a scratch (no reduction)
  atomic32     every workgroup adds its N partials into one i32 row (atomicAdd, result unused)
  atomic64     the same as an emulated 64-bit fixed-point add (lo word, its carry into the hi word)

for W workgroups of 256 invocations and N rows (Llama's hidden 2,048, Qwen3's 1,024).
  usage: PYTHONPATH=... python3 scripts/probe_atomics.py [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import struct
import sys

import wgpu
from wgpu import BufferUsage

DISPATCHES = 64
TRIALS = 5

_HEAD = """
@group(0) @binding(0) var<storage, read_write> lo: array<atomic<u32>>;
@group(0) @binding(1) var<storage, read_write> hi: array<atomic<i32>>;
@group(0) @binding(2) var<storage, read_write> scratch: array<f32>;
@group(0) @binding(3) var<uniform> n: vec4<u32>;
"""

_BODIES = {
    "empty": "if (n.y == 12345u) { scratch[0] = 1.0; }",
    "store": """
  for (var row = lid.x; row < n.x; row += 256u) {
    scratch[wid.x * n.x + row] = f32(row ^ wid.x);
  }""",
    "atomic32": """
  for (var row = lid.x; row < n.x; row += 256u) {
    atomicAdd(&hi[row], i32(row ^ wid.x));
  }""",
    "atomic64": """
  for (var row = lid.x; row < n.x; row += 256u) {
    let x = u32(row ^ wid.x) * 2654435761u;
    let old = atomicAdd(&lo[row], x);
    atomicAdd(&hi[row], select(0, 1, old + x < old));
  }""",
}


def _shader(kind: str) -> str:
    return (_HEAD + "@compute @workgroup_size(256)\nfn main(@builtin(workgroup_id) wid: vec3<u32>, "
            "@builtin(local_invocation_id) lid: vec3<u32>) {\n" + _BODIES[kind] + "\n}\n")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args()
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    device = adapter.request_device_sync(required_features=["timestamp-query"])
    from wgpu.backends.wgpu_native._api import lib
    period = float(lib.wgpuQueueGetTimestampPeriod(device.queue._internal))
    max_w, rows = 512, 2048
    lo = device.create_buffer(size=4 * rows, usage=BufferUsage.STORAGE)
    hi = device.create_buffer(size=4 * rows, usage=BufferUsage.STORAGE)
    scratch = device.create_buffer(size=4 * rows * max_w, usage=BufferUsage.STORAGE)
    storage = {"type": wgpu.BufferBindingType.storage}
    layout = device.create_bind_group_layout(entries=[
        {"binding": i, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": storage} for i in range(3)] + [
        {"binding": 3, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": wgpu.BufferBindingType.uniform}}])
    pipeline_layout = device.create_pipeline_layout(bind_group_layouts=[layout])
    results = []
    print(f"adapter: {adapter.info.get('device', '?')}; {DISPATCHES} dispatches a chain, median of {TRIALS}")
    print(f"{'case':>10} {'W':>5} {'N':>6} {'us':>8}")
    for kind in _BODIES:
        pipeline = device.create_compute_pipeline(
            layout=pipeline_layout, compute={"module": device.create_shader_module(code=_shader(kind)), "entry_point": "main"})
        for n in (1024, 2048):
            uniform = device.create_buffer_with_data(data=struct.pack("<4I", n, 0, 0, 0), usage=BufferUsage.UNIFORM)
            bind_group = device.create_bind_group(layout=layout, entries=[
                {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
                for i, b in enumerate((lo, hi, scratch, uniform))])
            for w in (64, 128, 256, 512):
                times = []
                for _ in range(TRIALS + 1):
                    query_set = device.create_query_set(type="timestamp", count=2)
                    encoder = device.create_command_encoder()
                    compute_pass = encoder.begin_compute_pass(timestamp_writes={
                        "query_set": query_set, "beginning_of_pass_write_index": 0, "end_of_pass_write_index": 1})
                    compute_pass.set_pipeline(pipeline)
                    compute_pass.set_bind_group(0, bind_group)
                    for _ in range(DISPATCHES):
                        compute_pass.dispatch_workgroups(w, 1, 1)
                    compute_pass.end()
                    resolved = device.create_buffer(size=16, usage=BufferUsage.QUERY_RESOLVE | BufferUsage.COPY_SRC)
                    encoder.resolve_query_set(query_set, 0, 2, resolved, 0)
                    device.queue.submit([encoder.finish()])
                    begin, end = struct.unpack("<2Q", device.queue.read_buffer(resolved))
                    times.append((end - begin) * period / 1000 / DISPATCHES)
                us = sorted(times[1:])[TRIALS // 2]
                results.append({"case": kind, "workgroups": w, "rows": n, "us": us})
                print(f"{kind:>10} {w:>5} {n:>6} {us:>8.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"adapter": dict(adapter.info), "dispatches": DISPATCHES, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
