// The JS half of the browser backend (py_runtime/gpu/browser.py evaluates this file once).
// Everything that would otherwise take many Python->JS calls per step lives here: encoding a whole
// recorded plan, reading a buffer back, creating a pipeline inside error scopes, and moving bytes
// out of the wasm heap without an intermediate copy. Each function is one FFI crossing.
(() => {
// Zero-copy view of a Python buffer (a PyProxy of a memoryview) for the duration of `use`.
function withPyBuffer(pyBuffer, use, type = "u8") {
  const view = pyBuffer.getBuffer(type);
  try {
    return use(view.data);
  } finally {
    view.release();
  }
}

let replayStats = { encodeMs: 0, submitMs: 0, steps: 0 };

// The smallest nonzero step of performance.now, in microseconds (how much to trust the stats).
function timerStepUs() {
  const start = performance.now();
  let next = start;
  while (next === start) next = performance.now();
  return (next - start) * 1000;
}

// Every wait on the GPU process is bounded: a hung device becomes an error naming the wait.
const GPU_WAIT_SECONDS = 60;
function bounded(promise, what) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not complete within ${GPU_WAIT_SECONDS} s`)),
      GPU_WAIT_SECONDS * 1000);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

function errorText(error) {
  return String(error && error.message ? error.message : error);
}

// Timestamp plumbing for `count` queries: the query set and the two buffers resolving it.
function createTimestampSet(device, count) {
  return {
    count,
    querySet: device.createQuerySet({ type: "timestamp", count }),
    resolved: device.createBuffer({ size: 8 * count, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC }),
    staging: device.createBuffer({ size: 8 * count, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST }),
  };
}

function destroyTimestampSet(set) {
  set.querySet.destroy();
  set.resolved.destroy();
  set.staging.destroy();
}

// Encodes pairs [[pipeline, bindGroup], ...] with counts[3i..3i+2]; one pass, or one pass per
// dispatch writing timestamps 2i and 2i+1 into `stamps` when given, or (span) one pass between
// timestamps 0 and 1.
function encode(device, pairs, counts, stamps, span = false) {
  const encoder = device.createCommandEncoder();
  if (stamps && !span) {
    for (let i = 0; i < pairs.length; i++) {
      const pass = encoder.beginComputePass({
        timestampWrites: { querySet: stamps.querySet, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 },
      });
      pass.setPipeline(pairs[i][0]);
      pass.setBindGroup(0, pairs[i][1]);
      pass.dispatchWorkgroups(counts[3 * i], counts[3 * i + 1], counts[3 * i + 2]);
      pass.end();
    }
    encoder.resolveQuerySet(stamps.querySet, 0, stamps.count, stamps.resolved, 0);
    encoder.copyBufferToBuffer(stamps.resolved, 0, stamps.staging, 0, 8 * stamps.count);
  } else {
    // One pass: state persists between dispatches, so repeated pipelines and bind groups are not
    // set again (each call costs host time in Dawn's wire client); idle alternatives are skipped.
    const pass = encoder.beginComputePass(span ? {
      timestampWrites: { querySet: stamps.querySet, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 },
    } : undefined);
    let pipeline = null, bindGroup = null;
    for (let i = 0; i < pairs.length; i++) {
      const x = counts[3 * i], y = counts[3 * i + 1], z = counts[3 * i + 2];
      if (x * y * z === 0) continue;
      if (pairs[i][0] !== pipeline) pass.setPipeline((pipeline = pairs[i][0]));
      if (pairs[i][1] !== bindGroup) pass.setBindGroup(0, (bindGroup = pairs[i][1]));
      pass.dispatchWorkgroups(x, y, z);
    }
    pass.end();
    if (span) {
      encoder.resolveQuerySet(stamps.querySet, 0, 2, stamps.resolved, 0);
      encoder.copyBufferToBuffer(stamps.resolved, 0, stamps.staging, 0, 16);
    }
  }
  return encoder.finish();
}

async function readStamps(stamps) {
  await bounded(stamps.staging.mapAsync(GPUMapMode.READ), "mapAsync (timestamps)");
  const out = new Uint8Array(stamps.staging.getMappedRange().slice(0));
  stamps.staging.unmap();
  return out;
}

// Validation errors of everything `work` enqueues, raised as one Error.
async function scoped(device, work) {
  device.pushErrorScope("out-of-memory");
  device.pushErrorScope("validation");
  let result, thrown = null;
  try {
    result = work();
  } catch (error) {
    thrown = error;
  }
  const validation = await bounded(device.popErrorScope(), "popErrorScope");
  const oom = await bounded(device.popErrorScope(), "popErrorScope");
  if (oom) throw new Error(`out of memory: ${oom.message}`);
  if (validation) throw new Error(validation.message);
  if (thrown) throw thrown;
  return result;
}

return {
  // Device state observable synchronously from Python: state.lost becomes {reason, message} when
  // GPUDevice.lost resolves; state.errors collects uncaptured errors (those of unscoped replays).
  // state.problems counts both, so the per-step check is a single property read.
  trackDevice(device) {
    const state = { lost: null, errors: [], problems: 0 };
    device.lost.then((info) => {
      state.lost = { reason: String(info.reason), message: String(info.message) };
      state.problems += 1;
    });
    device.addEventListener("uncapturederror", (event) => {
      state.errors.push(String(event.error.message));
      state.problems += 1;
    });
    return state;
  },

  writeBuffer(device, buffer, offset, pyBuffer) {
    withPyBuffer(pyBuffer, (bytes) => device.queue.writeBuffer(buffer, offset, bytes));
  },

  async postBytes(url, pyBuffer) {
    // fetch() copies a BufferSource body synchronously, so the heap view may be released at once.
    const sent = withPyBuffer(pyBuffer, (bytes) => fetch(url, { method: "POST", body: bytes }));
    const response = await sent;
    if (!response.ok) throw new Error(`upload to ${url} failed: HTTP ${response.status}`);
  },

  async createBuffer(device, descriptor) {
    return scoped(device, () => device.createBuffer(descriptor));
  },

  async createPipeline(device, label, code, entryPoint, constants) {
    device.pushErrorScope("out-of-memory");
    device.pushErrorScope("validation");
    const module = device.createShaderModule({ label, code });
    const info = await bounded(module.getCompilationInfo(), `getCompilationInfo(${label})`);
    const messages = info.messages
      .filter((m) => m.type === "error")
      .map((m) => [m.lineNum, m.linePos, m.message]);
    let pipeline = null;
    let failure = null;
    if (messages.length === 0) {
      const compute = { module, entryPoint };
      if (constants) compute.constants = constants;
      try {
        pipeline = await bounded(device.createComputePipelineAsync({ label, layout: "auto", compute }),
          `createComputePipelineAsync(${label})`);
      } catch (error) {
        failure = errorText(error);
      }
    }
    const validation = await bounded(device.popErrorScope(), "popErrorScope");
    const oom = await bounded(device.popErrorScope(), "popErrorScope");
    if (!failure && validation) failure = validation.message;
    return { pipeline, messages, failure, oom: oom ? oom.message : null };
  },

  // entries: [[binding, buffer, offset, size], ...]; offset/size null for the whole buffer.
  async createBindGroup(device, label, pipeline, entries) {
    return scoped(device, () => device.createBindGroup({
      label,
      layout: pipeline.getBindGroupLayout(0),
      entries: entries.map(([binding, buffer, offset, size]) => ({
        binding, resource: offset === null ? { buffer } : { buffer, offset, size },
      })),
    }));
  },

  // A recorded plan: the pairs to encode, and timestamp plumbing made once when profiling is possible.
  record(device, pairs, withTimestamps) {
    return { pairs, stamps: withTimestamps && pairs.length ? createTimestampSet(device, 2 * pairs.length) : null };
  },

  release(plan) {
    if (plan.stamps) destroyTimestampSet(plan.stamps);
  },

  // One step, synchronously: optional upload (the params arena), then the whole plan in one
  // encoder and one submit. No error scope (its pop is a round trip to the GPU process, longer than
  // encoding 230 dispatches): errors arrive as uncaptured errors, which Python checks on every call.
  replayNow(device, plan, countsPy, uploadBuffer, uploadOffset, uploadPy) {
    const t0 = performance.now();
    if (uploadPy) withPyBuffer(uploadPy, (bytes) => device.queue.writeBuffer(uploadBuffer, uploadOffset, bytes));
    const commands = withPyBuffer(countsPy, (counts) => encode(device, plan.pairs, counts, null), "u32");
    const t1 = performance.now();
    device.queue.submit([commands]);
    replayStats.encodeMs += t1 - t0;
    replayStats.submitMs += performance.now() - t1;
    replayStats.steps += 1;
  },

  // Where the unscoped replays' host time went (performance.now: 5 us steps when the page is
  // cross-origin isolated, as the dev server makes it); read and reset.
  takeReplayStats() {
    const out = { ...replayStats, resolutionProbeUs: timerStepUs() };
    replayStats = { encodeMs: 0, submitMs: 0, steps: 0 };
    return out;
  },

  // One step inside error scopes (first replays, profiling); resolves when the GPU is done, with a
  // Uint8Array of u64 timestamps when profiling (mode "dispatch": 2N, "span": the first 2), else null.
  async replayChecked(device, plan, countsPy, mode, uploadBuffer, uploadOffset, uploadPy) {
    const stamps = mode ? plan.stamps : null;
    if (mode && !stamps) throw new Error("this plan was recorded without timestamp queries");
    await scoped(device, () => {
      if (uploadPy) withPyBuffer(uploadPy, (bytes) => device.queue.writeBuffer(uploadBuffer, uploadOffset, bytes));
      const commands = withPyBuffer(countsPy,
        (counts) => encode(device, plan.pairs, counts, stamps, mode === "span"), "u32");
      device.queue.submit([commands]);
    });
    if (!stamps) {
      await bounded(device.queue.onSubmittedWorkDone(), "onSubmittedWorkDone");
      return null;
    }
    return readStamps(stamps);
  },

  workDone(device) {
    return bounded(device.queue.onSubmittedWorkDone(), "onSubmittedWorkDone");
  },

  // The same encoding for a one-off list (used by submit's timestamp path).
  async submitOnce(device, pairs, counts, timestamps) {
    const stamps = timestamps ? createTimestampSet(device, 2 * pairs.length) : null;
    try {
      await scoped(device, () => device.queue.submit([encode(device, pairs, counts, stamps)]));
      if (!stamps) {
        await bounded(device.queue.onSubmittedWorkDone(), "onSubmittedWorkDone");
        return null;
      }
      return await readStamps(stamps);
    } finally {
      if (stamps) destroyTimestampSet(stamps);
    }
  },

  async readBuffer(device, buffer, offset, size) {
    const padded = Math.ceil(size / 4) * 4;
    const staging = device.createBuffer({ size: padded, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(buffer, offset, staging, 0, padded);
    device.queue.submit([encoder.finish()]);
    await bounded(staging.mapAsync(GPUMapMode.READ), `mapAsync (read ${size} bytes)`);
    const out = new Uint8Array(staging.getMappedRange(0, padded).slice(0, size));
    staging.unmap();
    staging.destroy();
    return out;
  },
};
})()
