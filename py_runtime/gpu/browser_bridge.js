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

// Where the unscoped steps' host time went (ms, summed; read and reset by takeReplayStats). Plain
// numbers updated from five performance.now() reads per step: nothing allocated for them.
let uploadMs = 0, encodeMs = 0, finishMs = 0, submitMs = 0, steps = 0;
// How many times a params view was (re)acquired: once per params page, plus once per page in use
// per wasm heap growth.
let paramViews = 0;

// The smallest nonzero step of performance.now, in microseconds (how much to trust the stats).
function timerStepUs() {
  const start = performance.now();
  let next = start;
  while (next === start) next = performance.now();
  return (next - start) * 1000;
}

// Every wait on the GPU process is bounded: a hung device becomes an error naming the wait. The
// bound is per device kind (setGpuWaitSeconds): a CPU adapter takes minutes for what a GPU does in ms.
let GPU_WAIT_SECONDS = 60;
function bounded(promise, what) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not complete within ${GPU_WAIT_SECONDS} s`)),
      GPU_WAIT_SECONDS * 1000);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

// A wait on the GPU (a readback's mapAsync, onSubmittedWorkDone), bounded. Chromium on Linux/Vulkan
// re-polls an unsignalled fence only every ~2 ms, so a wait can end that long after the GPU is done
// (../shared/reference/attention.md: 3.5 ms against 1.6 after 200 dispatches); an error-scope round trip
// makes the GPU process poll now, so while the wait is pending it keeps asking. Only on GPU adapters
// (setGpuWaitSeconds): on a CPU adapter the loop would take cycles from the threads doing the work.
let KICK_WAITS = false;
async function settled(device, promise, what) {
  const waited = bounded(promise, what);
  if (!KICK_WAITS) return waited;
  let pending = true;
  waited.then(() => { pending = false; }, () => { pending = false; });
  while (pending) {
    device.pushErrorScope("validation");
    const error = await device.popErrorScope();       // nothing is issued in between: nothing to catch
    if (error) throw new Error(`a GPU error while waiting on ${what}: ${error.message}`);
  }
  return waited;
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

// Encodes pairs [[pipeline, bindGroup], ...] with counts[3i..3i+2] into `encoder`: one pass, or one
// pass per dispatch writing timestamps 2i and 2i+1 into `stamps` when given, or (span) the one pass
// between timestamps 0 and 1. `repeat` > 1 (one pass, no stamps): the dispatches that many times over.
function encodeInto(encoder, pairs, counts, stamps, span = false, begin = 0, end = pairs.length, repeat = 1) {
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
    return;
  }
  // One pass: state persists between dispatches, so repeated pipelines and bind groups are not
  // set again (each call costs host time in Dawn's wire client); idle alternatives are skipped.
  const pass = encoder.beginComputePass(span ? {
    timestampWrites: { querySet: stamps.querySet, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 },
  } : undefined);
  let pipeline = null, bindGroup = null;
  for (let r = 0; r < repeat; r++) {
    for (let i = begin; i < end; i++) {
      const x = counts[3 * i], y = counts[3 * i + 1], z = counts[3 * i + 2];
      if (x * y * z === 0) continue;
      if (pairs[i][0] !== pipeline) pass.setPipeline((pipeline = pairs[i][0]));
      if (pairs[i][1] !== bindGroup) pass.setBindGroup(0, (bindGroup = pairs[i][1]));
      pass.dispatchWorkgroups(x, y, z);
    }
  }
  pass.end();
  if (span) {
    encoder.resolveQuerySet(stamps.querySet, 0, 2, stamps.resolved, 0);
    encoder.copyBufferToBuffer(stamps.resolved, 0, stamps.staging, 0, 16);
  }
}

// Where a long step (a prefill) splits into command buffers, as pair indices [0, ..., pairs]: Chromium's
// GPU process takes in a whole command buffer before the GPU starts on it, so a short first one lets
// the GPU start while the rest is still being taken in. A step of at most SUBMIT_ABOVE running
// dispatches (a decode step) stays one command buffer: the previous step's GPU work hides its intake.
const SUBMIT_ABOVE = 200, SUBMIT_FIRST = 48, SUBMIT_REST = 160;
function submitCuts(counts) {
  const n = counts.length / 3, running = [];
  for (let i = 0; i < n; i++) if (counts[3 * i] * counts[3 * i + 1] * counts[3 * i + 2]) running.push(i);
  const cuts = [0];
  if (running.length > SUBMIT_ABOVE) {
    for (let k = SUBMIT_FIRST; k < running.length; k += SUBMIT_REST) cuts.push(running[k]);
  }
  cuts.push(n);
  return cuts;
}

function encode(device, pairs, counts, stamps, span = false) {
  const encoder = device.createCommandEncoder();
  encodeInto(encoder, pairs, counts, stamps, span);
  return encoder.finish();
}

// A params page's host shadow, seen from JS: one long-lived view of the Python bytearray (never
// resized, so its address is fixed), instead of acquiring and releasing a buffer every step. Growing
// the wasm heap detaches every view of the old heap (byteLength becomes 0): then it is re-acquired.
function paramBytes(page) {
  let bytes = page.bytes;
  if (bytes === null || bytes.byteLength === 0) {
    if (page.pyBuffer) page.pyBuffer.release();
    page.pyBuffer = null;         // so that a failing getBuffer leaves nothing to release twice
    page.pyBuffer = page.py.getBuffer("u8");
    page.bytes = bytes = page.pyBuffer.data;
    paramViews += 1;
  }
  return bytes;
}

function releaseParams(state) {
  const params = state.params;
  if (!params) return;
  state.params = null;
  for (const page of params.pages) {
    if (page.pyBuffer) page.pyBuffer.release();
    page.py.destroy();
  }
}

// Bytes [lo, hi) of the params pages laid end to end into the same bytes of their buffers: one
// writeBuffer per page the range touches (it copies at once, so the view is free when it returns).
function uploadParams(device, state, lo, hi) {
  const params = state.params;
  if (!params) throw new Error("no params arena attached to this device (attachParams)");
  const size = params.size;
  for (let index = Math.floor(lo / size), base = index * size; base < hi; index++, base += size) {
    const page = params.pages[index];
    if (!page) throw new Error(`params page ${index} is not attached (bytes ${lo}..${hi})`);
    const start = Math.max(lo, base) - base, end = Math.min(hi, base + size) - base;
    device.queue.writeBuffer(page.buffer, start, paramBytes(page), start, end - start);
  }
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
  setGpuWaitSeconds(seconds, kick) {
    GPU_WAIT_SECONDS = seconds;
    KICK_WAITS = kick;
  },

  // Device state observable synchronously from Python: state.lost becomes {reason, message} when
  // GPUDevice.lost resolves; state.errors collects uncaptured errors (those of unscoped replays).
  // state.problems counts both, so the per-step check is a single property read.
  // state.params is the attached params arena's pages (attachParams), released when the device is lost.
  trackDevice(device) {
    const state = { lost: null, errors: [], problems: 0, params: null };
    device.lost.then((info) => {
      if (!state.lost) state.lost = { reason: String(info.reason), message: String(info.message) };
      state.problems += 1;
      releaseParams(state);
    });
    device.addEventListener("uncapturederror", (event) => {
      state.errors.push(String(event.error.message));
      state.problems += 1;
    });
    return state;
  },

  // GPUDevice.destroy, with the loss visible at once (GPUDevice.lost resolves a little later): a step
  // issued in between must not run on the destroyed device.
  destroyDevice(device, state) {
    state.lost = { reason: "destroyed", message: "GPUDevice.destroy() was called" };
    state.problems += 1;
    device.destroy();
    releaseParams(state);
  },

  // Page `index` of the params arena: its GPU buffer and a PyProxy of a memoryview of its shadow
  // (JS owns the proxy from here on and destroys it with the device state). Pages come in order,
  // all `size` bytes; page 0 starts a new arena.
  attachParams(state, index, buffer, py, size) {
    if (index === 0) {
      releaseParams(state);
      state.params = { size, pages: [] };
    }
    const params = state.params;
    if (!params || index !== params.pages.length || size !== params.size) {
      py.destroy();
      throw new Error(`params page ${index} (${size} bytes) attached out of order`);
    }
    params.pages.push({ buffer, py, pyBuffer: null, bytes: null });
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

  // JSON to the page's server and its answer as [status, text]; ends at timeoutMs or when `signal` aborts.
  async postJson(url, text, timeoutMs, signal) {
    const signals = [AbortSignal.timeout(timeoutMs)];
    if (signal) signals.push(signal);
    const response = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json" }, body: text,
      signal: AbortSignal.any(signals) });
    return [response.status, await response.text()];
  },

  // A model file's size: a URL by HEAD (the dev server answers ranges), or the File the user picked.
  async sourceSize(url, file, timeoutMs) {
    if (file) return file.size;
    const response = await fetch(url, { method: "HEAD", cache: "no-store", signal: AbortSignal.timeout(timeoutMs) });
    if (!response.ok) throw new Error(`HEAD ${url}: HTTP ${response.status} (vendored models come from scripts/setup.sh)`);
    const size = Number(response.headers.get("Content-Length"));
    if (!Number.isFinite(size)) throw new Error(`HEAD ${url}: no Content-Length`);
    return size;
  },

  // Bytes [offset, offset + length) of a URL (one ranged GET) or of a picked File (a Blob slice), ending at timeoutMs.
  async readRange(url, file, offset, length, timeoutMs) {
    const signal = AbortSignal.timeout(timeoutMs);
    let buffer;
    if (file) {
      // The limit's listener is removed once the read settles, so a late timeout rejects nothing unhandled.
      let onAbort;
      const limit = new Promise((_, reject) => {
        onAbort = () => reject(new Error(`reading ${file.name} [${offset}, ${offset + length}) took over ${timeoutMs} ms`));
        signal.addEventListener("abort", onAbort, { once: true });
      });
      try {
        buffer = await Promise.race([file.slice(offset, offset + length).arrayBuffer(), limit]);
      } finally {
        signal.removeEventListener("abort", onAbort);
      }
    } else {
      const response = await fetch(url, { headers: { Range: `bytes=${offset}-${offset + length - 1}` }, cache: "no-store",
        signal });
      if (response.status !== 206) throw new Error(`GET ${url} bytes ${offset}-${offset + length - 1}: HTTP ` +
        `${response.status} (the server must answer ranges)`);
      buffer = await response.arrayBuffer();
    }
    if (buffer.byteLength !== length) throw new Error(`read ${buffer.byteLength} of ${length} bytes at ${offset}`);
    return new Uint8Array(buffer);
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

  // A recorded plan: the pairs to encode, a JS-owned copy of the workgroup counts (setCounts), the
  // timestamp plumbing when profiling is possible, and `step`, the per-token path. Python keeps a
  // handle to `step` itself, so a step is one call with two small ints that returns a small int.
  record(device, state, pairs, withTimestamps) {
    const plan = {
      pairs,
      counts: new Uint32Array(3 * pairs.length),
      cuts: [0, pairs.length],           // command buffers of a step (submitCuts, at every setCounts)
      stamps: withTimestamps && pairs.length ? createTimestampSet(device, 2 * pairs.length) : null,
      step: null,
    };
    const queue = device.queue;
    // Upload params bytes [lo, hi) when hi > lo, encode every dispatch into one pass (a long step: a
    // few, submitCuts), submit. `repeat` > 1 encodes the step that many times over in one pass and
    // one command buffer (consecutive decode steps whose position lives on the GPU: one submit for
    // several tokens; a step long enough to be cut is then not cut: the GPU is busy with the submit
    // before, so an early start gains nothing). No
    // error scope (its pop is a round trip to the GPU process, longer than encoding 230 dispatches):
    // errors arrive as uncaptured errors. Returns state.problems; nonzero makes Python raise, and
    // a step that finds it nonzero does nothing (Python hands its upload range back to the arena).
    plan.step = (lo, hi, repeat = 1) => {
      if (state.problems) return state.problems;
      const cuts = repeat > 1 ? [0, plan.cuts[plan.cuts.length - 1]] : plan.cuts;
      const t0 = performance.now();
      if (hi > lo) uploadParams(device, state, lo, hi);
      const t1 = performance.now();
      for (let c = 0; c + 1 < cuts.length; c++) {     // (one command buffer unless the step is long)
        const a = performance.now();
        const encoder = device.createCommandEncoder();
        encodeInto(encoder, plan.pairs, plan.counts, null, false, cuts[c], cuts[c + 1], repeat);
        const b = performance.now();
        const commands = encoder.finish();
        const d = performance.now();
        queue.submit([commands]);
        encodeMs += b - a;
        finishMs += d - b;
        submitMs += performance.now() - d;
      }
      uploadMs += t1 - t0;
      steps += repeat;
      return state.problems;
    };
    return plan;
  },

  // New workgroup counts (a PyProxy of the plan's array('I')), copied into the plan's own array:
  // done at record and when a resize changed them, so no step reads Python memory for them.
  setCounts(plan, countsPy) {
    withPyBuffer(countsPy, (counts) => plan.counts.set(counts), "u32");
    plan.cuts = submitCuts(plan.counts);
  },

  release(plan) {
    if (plan.stamps) destroyTimestampSet(plan.stamps);
    plan.stamps = null;
  },

  // Where the unscoped steps' host time went (performance.now: 5 us steps when the page is
  // cross-origin isolated, as the dev server makes it); read and reset.
  // The JS heap in use (Chromium's performance.memory), or null where the browser does not say.
  jsHeapBytes() {
    const memory = globalThis.performance && performance.memory;
    return memory ? memory.usedJSHeapSize : null;
  },

  takeReplayStats() {
    const out = { uploadMs, encodeMs, finishMs, submitMs, steps, paramViews, resolutionProbeUs: timerStepUs() };
    uploadMs = encodeMs = finishMs = submitMs = 0;
    steps = 0;
    return out;
  },

  // One step inside error scopes (first replays, profiling); resolves when the GPU is done, with a
  // Uint8Array of u64 timestamps when profiling (mode "dispatch": 2N; "span": the first 2), else null.
  async replayChecked(device, state, plan, mode, lo, hi) {
    const stamps = mode ? plan.stamps : null;
    if (mode && !stamps) throw new Error("this plan was recorded without timestamp queries");
    await scoped(device, () => {
      if (hi > lo) uploadParams(device, state, lo, hi);
      device.queue.submit([encode(device, plan.pairs, plan.counts, stamps, mode === "span")]);
    });
    if (!stamps) {
      await settled(device, device.queue.onSubmittedWorkDone(), "onSubmittedWorkDone");
      return null;
    }
    return readStamps(stamps);
  },

  workDone(device) {
    return settled(device, device.queue.onSubmittedWorkDone(), "onSubmittedWorkDone");
  },

  // The same encoding for a one-off list (used by submit's timestamp path).
  async submitOnce(device, pairs, counts, timestamps) {
    const stamps = timestamps ? createTimestampSet(device, 2 * pairs.length) : null;
    try {
      await scoped(device, () => device.queue.submit([encode(device, pairs, counts, stamps)]));
      if (!stamps) {
        await settled(device, device.queue.onSubmittedWorkDone(), "onSubmittedWorkDone");
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
    await settled(device, staging.mapAsync(GPUMapMode.READ), `mapAsync (read ${size} bytes)`);
    const out = new Uint8Array(staging.getMappedRange(0, padded).slice(0, size));
    staging.unmap();
    staging.destroy();
    return out;
  },
};
})()
