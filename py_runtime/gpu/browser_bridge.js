// The JS half of the browser backend (py_runtime/gpu/browser.py evaluates this file once).
// Everything that would otherwise take many Python->JS calls per step lives here: encoding a whole
// list of dispatches, reading a buffer back, creating a pipeline inside error scopes, and moving
// bytes out of the wasm heap without an intermediate copy. Each function is one FFI crossing.
(() => {
// Zero-copy view of a Python buffer (a PyProxy of bytes/memoryview) for the duration of `use`.
function withPyBuffer(pyBuffer, use) {
  const view = pyBuffer.getBuffer("u8");
  try {
    return use(view.data);
  } finally {
    view.release();
  }
}

return {

  writeBuffer(device, buffer, offset, pyBuffer) {
    withPyBuffer(pyBuffer, (bytes) => device.queue.writeBuffer(buffer, offset, bytes));
  },

  async postBytes(url, pyBuffer) {
    // fetch() copies a BufferSource body synchronously, so the heap view may be released at once.
    const sent = withPyBuffer(pyBuffer, (bytes) => fetch(url, { method: "POST", body: bytes }));
    const response = await sent;
    if (!response.ok) throw new Error(`upload to ${url} failed: HTTP ${response.status}`);
  },

  async createPipeline(device, label, code, entryPoint, constants) {
    device.pushErrorScope("out-of-memory");
    device.pushErrorScope("validation");
    const module = device.createShaderModule({ label, code });
    const info = await module.getCompilationInfo();
    const messages = info.messages
      .filter((m) => m.type === "error")
      .map((m) => [m.lineNum, m.linePos, m.message]);
    let pipeline = null;
    let failure = null;
    if (messages.length === 0) {
      const compute = { module, entryPoint };
      if (constants) compute.constants = constants;
      try {
        pipeline = await device.createComputePipelineAsync({ label, layout: "auto", compute });
      } catch (error) {
        failure = String(error && error.message ? error.message : error);
      }
    }
    const validation = await device.popErrorScope();
    const oom = await device.popErrorScope();
    if (!failure && validation) failure = validation.message;
    return { pipeline, messages, failure, oom: oom ? oom.message : null };
  },

  createBindGroup(device, label, pipeline, entries) {
    return device.createBindGroup({
      label,
      layout: pipeline.getBindGroupLayout(0),
      entries: entries.map(([binding, buffer]) => ({ binding, resource: { buffer } })),
    });
  },

  // dispatches: [[pipeline, bindGroup, x, y, z], ...]. Returns a Uint8Array of 2N u64 timestamps
  // (ns) when `timestamps` is set, else null. Resolves once the GPU has finished the work.
  async submit(device, dispatches, timestamps) {
    device.pushErrorScope("validation");
    const encoder = device.createCommandEncoder();
    let querySet = null, resolved = null, staging = null;
    const count = 2 * dispatches.length;
    if (timestamps) {
      querySet = device.createQuerySet({ type: "timestamp", count });
      dispatches.forEach(([pipeline, bindGroup, x, y, z], i) => {
        const pass = encoder.beginComputePass({
          timestampWrites: { querySet, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 },
        });
        pass.setPipeline(pipeline);
        pass.setBindGroup(0, bindGroup);
        pass.dispatchWorkgroups(x, y, z);
        pass.end();
      });
      resolved = device.createBuffer({ size: 8 * count, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
      staging = device.createBuffer({ size: 8 * count, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
      encoder.resolveQuerySet(querySet, 0, count, resolved, 0);
      encoder.copyBufferToBuffer(resolved, 0, staging, 0, 8 * count);
    } else {
      const pass = encoder.beginComputePass();
      for (const [pipeline, bindGroup, x, y, z] of dispatches) {
        pass.setPipeline(pipeline);
        pass.setBindGroup(0, bindGroup);
        pass.dispatchWorkgroups(x, y, z);
      }
      pass.end();
    }
    device.queue.submit([encoder.finish()]);
    const error = await device.popErrorScope();
    if (error) {
      for (const b of [resolved, staging]) if (b) b.destroy();
      throw new Error(error.message);
    }
    if (!timestamps) {
      await device.queue.onSubmittedWorkDone();
      return null;
    }
    await staging.mapAsync(GPUMapMode.READ);
    const out = new Uint8Array(staging.getMappedRange().slice(0));
    staging.unmap();
    for (const b of [resolved, staging]) b.destroy();
    querySet.destroy();
    return out;
  },

  async readBuffer(device, buffer, size) {
    const padded = Math.ceil(size / 4) * 4;
    const staging = device.createBuffer({ size: padded, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(buffer, 0, staging, 0, padded);
    device.queue.submit([encoder.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    const out = new Uint8Array(staging.getMappedRange(0, padded).slice(0, size));
    staging.unmap();
    staging.destroy();
    return out;
  },
};
})()
