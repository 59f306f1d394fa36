// The peer engine: ONNX Runtime Web (WebGPU provider) running the peer build of our model
// (py_runtime/host/peer.py) greedily with its KV cache, timed the way our bench times ours.
// py_runtime/gpu/browser.py imports this module and calls createPeer(options) and peer.generate(...).
//
// Timing, as for our engine (py_runtime/checks/peer_bench.py): prefill = from the call until the first
// generated id is on the host (one session.run over the prompt, the last logits row copied out and
// read back, argmax here); decode = from then until the last id is on the host. ORT-web's greedy loop
// needs each step's logits on the host to choose the next id: that readback is part of its step.
// The KV cache stays on the GPU (present.* as GPU tensors fed back as past_key_values.*).

function argmax(row) {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return best;
}

export async function createPeer({ ortUrl, modelUrl, dataUrl, device, layers, kvHeads, headDim, vocab, logLevel }) {
  const page = (url) => new URL(url, location.href).href;     // URLs relative to the page
  const ort = await import(page(ortUrl));
  ort.env.wasm.numThreads = 1;               // no cross-origin isolation here: no wasm threads
  // "error": its warning that shape ops run on the CPU (by design) would read as a console error
  ort.env.logLevel = logLevel || "error";
  const outputs = { logits: "gpu-buffer" };
  for (let i = 0; i < layers; i++) {
    outputs[`present.${i}.key`] = "gpu-buffer";
    outputs[`present.${i}.value`] = "gpu-buffer";
  }
  const began = performance.now();
  const session = await ort.InferenceSession.create(page(modelUrl), {
    executionProviders: [{ name: "webgpu", device }],
    externalData: [{ path: "model.onnx.data", data: page(dataUrl) }],
    preferredOutputLocation: outputs,
    graphOptimizationLevel: "all",
    logSeverityLevel: 3,
  });
  const loadMs = performance.now() - began;
  const rowBytes = vocab * 4;
  const readBuffer = device.createBuffer({ size: rowBytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
                                           label: "peer.logits_row" });

  // The last row of a [1, S, V] logits tensor on the GPU, read back (one copy, one map).
  async function lastRow(logits) {
    const rows = logits.dims[1];
    const encoder = device.createCommandEncoder({ label: "peer.read_row" });
    encoder.copyBufferToBuffer(logits.gpuBuffer, (rows - 1) * rowBytes, readBuffer, 0, rowBytes);
    device.queue.submit([encoder.finish()]);
    await readBuffer.mapAsync(GPUMapMode.READ);
    const row = new Float32Array(readBuffer.getMappedRange().slice(0));
    readBuffer.unmap();
    return row;
  }

  function emptyPast() {
    const feeds = {};
    for (let i = 0; i < layers; i++) {
      for (const kind of ["key", "value"]) {
        feeds[`past_key_values.${i}.${kind}`] = new ort.Tensor("float32", new Float32Array(0), [1, kvHeads, 0, headDim]);
      }
    }
    return feeds;
  }

  // Greedy generation: the prompt, then `decode` steps. keep: true (every step's logits row), or a list of
  // the steps whose rows to return (0: the prompt's last position); the rows come back in step order.
  async function generate(promptIds, decode, keep) {
    const keepStep = keep === true ? () => true : ((steps) => (step) => steps.has(step))(new Set(keep || []));
    let past = emptyPast();
    let ids = Array.from(promptIds);
    let length = 0;
    const tokens = [];
    const kept = [];
    const started = performance.now();
    let firstMs = 0;
    for (let step = 0; step <= decode; step++) {
      length += ids.length;
      const feeds = {
        input_ids: new ort.Tensor("int64", BigInt64Array.from(ids, BigInt), [1, ids.length]),
        attention_mask: new ort.Tensor("int64", new BigInt64Array(length).fill(1n), [1, length]),
        ...past,
      };
      const out = await session.run(feeds);
      const row = await lastRow(out.logits);
      out.logits.dispose();
      for (const tensor of Object.values(past)) if (tensor.location === "gpu-buffer") tensor.dispose();
      past = {};
      for (let i = 0; i < layers; i++) {
        past[`past_key_values.${i}.key`] = out[`present.${i}.key`];
        past[`past_key_values.${i}.value`] = out[`present.${i}.value`];
      }
      const next = argmax(row);
      tokens.push(next);
      if (keepStep(step)) kept.push(row);
      if (step === 0) firstMs = performance.now() - started;
      ids = [next];
    }
    const totalMs = performance.now() - started;
    for (const tensor of Object.values(past)) tensor.dispose();
    return { tokens, prefillMs: firstMs, decodeMs: totalMs - firstMs, logits: kept };
  }

  return {
    info: { loadMs, inputs: session.inputNames.length, outputs: session.outputNames.length, ortVersion: ort.env.versions?.web },
    generate,
    async release() {
      readBuffer.destroy();
      await session.release();
    },
  };
}
