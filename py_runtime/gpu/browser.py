"""Browser backend: pyodide.ffi -> navigator.gpu. Runs only inside Pyodide.

All JS interop of the runtime lives here and in its JS half, browser_bridge.js: descriptors go
through to_js, bulk bytes cross as zero-copy heap views, and no JsProxy leaves this module except
inside an opaque Handle.
"""

from __future__ import annotations

import asyncio
import json
import struct
import time
from array import array
from pathlib import Path

import js
from pyodide.code import run_js
from pyodide.ffi import JsException, create_proxy, to_js

from .device import (SUBGROUP_MATRIX, WANTED_FEATURES, WANTED_LIMITS, AdapterReport, AdapterUnavailable, Device,
                     DeviceLost, GpuOutOfMemory, GpuValidationError, Handle, KernelCompileError, run_compile_probes,
                     software_adapter)

__all__ = ["BrowserDevice", "request_browser_device", "post_bytes", "post_json", "fetch_bytes", "ModelFileSource"]

_INFO_FIELDS = ("vendor", "architecture", "device", "description", "subgroupMinSize", "subgroupMaxSize",
                "isFallbackAdapter")
_FLAGS_HINT = ("start Chromium with --enable-unsafe-webgpu (and --enable-webgpu-developer-features for "
               "unquantized timestamps), and serve the page from http://127.0.0.1 or https (a secure context)")
# How long one wait on the GPU process (a readback, onSubmittedWorkDone) may take before it is an error.
GPU_WAIT_S = 60
GPU_WAIT_S_SOFTWARE = 300
_bridge = None


def _js_bridge():
    global _bridge
    if _bridge is None:
        _bridge = run_js((Path(__file__).parent / "browser_bridge.js").read_text())
    return _bridge


class _HeapView:
    """A PyProxy of a memoryview for zero-copy reads by JS; destroyed on exit. Typed arrays keep
    their item type (the workgroup counts are read as a Uint32Array); anything else is bytes."""

    def __init__(self, data):
        self.proxy = create_proxy(memoryview(data) if isinstance(data, array) else memoryview(data).cast("B"))

    def __enter__(self):
        return self.proxy

    def __exit__(self, *exc):
        self.proxy.destroy()


async def post_bytes(url: str, data: bytes | memoryview) -> None:
    """Our addition: POST bytes to the page's server (result uploads for headless runs)."""
    with _HeapView(data) as view:
        await _js_bridge().postBytes(url, view)


async def post_json(url: str, payload: dict, *, timeout_s: float, signal=None) -> tuple[int, str]:
    """Our addition: POST JSON to the page's server; (HTTP status, body text). Ends with an error after
    `timeout_s` or when `signal` (the page's AbortSignal) aborts."""
    answer = await _js_bridge().postJson(url, json.dumps(payload), int(1000 * timeout_s), signal)
    status, text = answer.to_py()
    return int(status), str(text)


async def fetch_bytes(url: str) -> bytes:
    """Our addition: GET a file the page's server serves (vendored assets such as a tokenizer.json),
    relative to the page."""
    response = await js.fetch(url)
    if not response.ok:
        raise FileNotFoundError(f"GET {url}: HTTP {response.status} (vendored assets come from scripts/setup.sh)")
    return (await response.arrayBuffer()).to_bytes()


class ModelFileSource:
    """Our addition: a checkpoint's ranged source (checkpoints/source.py) in the page: a URL the page's server
    serves (one ranged GET per read) or, with `picked`, the File the user chose in the page's picker (main.js keeps
    it as window.__lab.modelFile; a Blob slice per read). Each read ends with an error after `timeout_s`."""

    def __init__(self, url: str | None, file, name: str, size: int, timeout_s: float):
        self._url, self._file, self.name, self.size, self._timeout_ms = url, file, name, size, int(1000 * timeout_s)

    @classmethod
    async def open(cls, url: str | None = None, *, picked: bool = False, timeout_s: float = 60.0) -> "ModelFileSource":
        file = None
        if picked:
            file = getattr(getattr(js.window, "__lab"), "modelFile", None)
            if not file:
                raise FileNotFoundError("model_file=picked: no file is picked (choose one with \"Load a model file\")")
        name = str(file.name) if file else url.rsplit("/", 1)[-1]
        try:
            size = int(await _js_bridge().sourceSize(url, file, int(1000 * timeout_s)))
        except JsException as error:
            raise FileNotFoundError(f"{name}: {error.message}") from None
        return cls(url, file, name, size, timeout_s)

    async def read(self, offset: int, length: int) -> bytes:
        from ..checkpoints.source import CheckpointError
        if offset < 0 or length < 0 or offset + length > self.size:
            raise CheckpointError(f"{self.name}: bytes [{offset}, {offset + length}) are past its end "
                                  f"({self.size} bytes): the file is truncated")
        if length == 0:
            return b""
        try:
            return (await _js_bridge().readRange(self._url, self._file, offset, length, self._timeout_ms)).to_bytes()
        except JsException as error:
            raise CheckpointError(f"{self.name}: {error.message}") from None

    def close(self) -> None:
        self._file = None


async def request_browser_device(*, retry_seconds: float = 8.0) -> "BrowserDevice":
    gpu = getattr(js.navigator, "gpu", None)
    if not gpu:
        raise AdapterUnavailable(f"navigator.gpu is not available: {_FLAGS_HINT}")
    deadline = time.monotonic() + retry_seconds
    adapter = None
    while True:
        # The first request can return null while Chromium's GPU process starts: retry briefly.
        adapter = await gpu.requestAdapter(to_js({"powerPreference": "high-performance"}))
        if adapter or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.25)
    if not adapter:
        raise AdapterUnavailable(f"requestAdapter() returned null for {retry_seconds:.0f} s: {_FLAGS_HINT}")
    features = tuple(sorted(str(f) for f in adapter.features))
    limits = {name: int(getattr(adapter.limits, name)) for name in WANTED_LIMITS
              if getattr(adapter.limits, name, None) is not None}
    wanted = [f for f in WANTED_FEATURES if f in features]
    device = await adapter.requestDevice(to_js({"requiredFeatures": wanted, "requiredLimits": limits}))
    info = {}
    for name in _INFO_FIELDS:
        value = getattr(adapter.info, name, None)
        if isinstance(value, (str, int, bool)):
            info[name] = value
    configs = getattr(adapter.info, "subgroupMatrixConfigs", None)
    if configs:
        info["subgroupMatrixConfigs"] = [{key: (str(v) if isinstance(v, str) else int(v)) for key, v in
                                          ((k, getattr(c, k)) for k in ("componentType", "resultComponentType",
                                                                       "M", "N", "K"))} for c in configs]
    report = AdapterReport(backend="browser", info=info, features=features, limits=limits,
                           device_features=tuple(wanted))
    browser_device = BrowserDevice(device, report)
    # A readback waits for all submitted work: on a CPU adapter a decode batch of a 30-layer model on
    # a loaded 2-core machine has taken over a minute (SmolLM2 f32 on SwiftShader in CI).
    software = software_adapter(info)
    _js_bridge().setGpuWaitSeconds(GPU_WAIT_S_SOFTWARE if software else GPU_WAIT_S, not software)
    await run_compile_probes(browser_device)
    return browser_device


class BrowserDevice(Device):
    def __init__(self, device, adapter: AdapterReport):
        self._device = device
        self._bridge = _js_bridge()
        self._state = self._bridge.trackDevice(device)
        self.adapter = adapter

    @property
    def lost(self):
        info = self._state.lost
        return (str(info.reason), str(info.message)) if info else None

    def _check_alive(self, what: str = "an earlier unscoped call"):
        """Raise for a lost device, or for uncaptured errors that arrived since the last check."""
        if self._state.problems:            # one property read when all is well
            self._raise_problems(what)

    def _raise_problems(self, what: str):
        lost = self.lost
        if lost:
            raise DeviceLost(*lost)
        errors = self._state.errors
        messages = [str(m) for m in errors]
        errors.length = 0
        self._state.problems = 0
        raise GpuValidationError(what, "; ".join(messages) or "an error was counted but not recorded")

    async def _scoped(self, what: str, call):
        self._check_alive()
        try:
            return await call()
        except JsException as error:
            self._check_alive()
            text = str(error)
            if "out of memory" in text:
                raise GpuOutOfMemory(what, text) from None
            raise GpuValidationError(what, text) from None

    async def create_buffer(self, *, label, size, usage):
        size = max(4, (size + 3) // 4 * 4)
        descriptor = to_js({"label": label, "size": size, "usage": usage})
        raw = await self._scoped(f"create_buffer({label!r}, {size} bytes)",
                                 lambda: self._bridge.createBuffer(self._device, descriptor))
        return Handle("buffer", label, size, raw)

    def write_buffer(self, buffer, data, offset=0):
        self._check_alive()
        with _HeapView(data) as view:
            self._bridge.writeBuffer(self._device, buffer.raw, offset, view)

    async def read_buffer(self, buffer, size=None, offset=0):
        size = buffer.size - offset if size is None else size
        return (await self._scoped(f"read_buffer({buffer.label!r})",
                                   lambda: self._bridge.readBuffer(self._device, buffer.raw, offset, size))).to_bytes()

    async def create_compute_pipeline(self, *, kernel, constants=None):
        self._check_alive()
        result = await self._bridge.createPipeline(
            self._device, kernel.name, kernel.code, kernel.entry_point,
            to_js(constants) if constants else None)
        messages = [(int(m[0]), int(m[1]), str(m[2])) for m in result.messages]
        if messages:
            raise KernelCompileError(kernel.name, messages)
        if result.oom:
            raise GpuOutOfMemory(f"create_compute_pipeline({kernel.name})", str(result.oom))
        if result.failure:
            raise GpuValidationError(f"create_compute_pipeline({kernel.name})", str(result.failure))
        return Handle("pipeline", kernel.name, 0, result.pipeline)

    async def create_bind_group(self, *, label, pipeline, buffers):
        rows = []
        for binding, entry in sorted(buffers.items()):
            buffer, offset, size = entry if isinstance(entry, tuple) else (entry, None, None)
            rows.append([binding, buffer.raw, offset, size])
        entries = to_js(rows)
        raw = await self._scoped(f"create_bind_group({label})",
                                 lambda: self._bridge.createBindGroup(self._device, label, pipeline.raw, entries))
        return Handle("bind_group", label, 0, raw)

    async def submit(self, dispatches, *, timestamps=False, wait=True):
        self._check_alive()
        if timestamps:
            pairs = to_js([[d.pipeline.raw, d.bind_group.raw] for d in dispatches])
            counts = to_js([c for d in dispatches for c in d.workgroups])
            raw = await self._scoped(f"submit({', '.join(d.label for d in dispatches[:4])})",
                                     lambda: self._bridge.submitOnce(self._device, pairs, counts, True))
            return list(struct.unpack(f"<{2 * len(dispatches)}Q", raw.to_bytes()))
        # The naive baseline: every call crosses from Python to JS. Scoped only when waiting, like replay.
        device = self._device
        if wait:
            device.pushErrorScope("validation")
        encoder = device.createCommandEncoder()
        compute_pass = encoder.beginComputePass()
        for d in dispatches:
            compute_pass.setPipeline(d.pipeline.raw)
            compute_pass.setBindGroup(0, d.bind_group.raw)
            compute_pass.dispatchWorkgroups(*d.workgroups)
        compute_pass.end()
        device.queue.submit(to_js([encoder.finish()]))
        if wait:
            error = await device.popErrorScope()
            if error:
                raise GpuValidationError(f"submit({', '.join(d.label for d in dispatches[:4])})", str(error.message))
            await self.on_submitted_work_done()
        return None

    def attach_params(self, page, buffer, shadow):
        # JS keeps one view of each page's shadow for every step (re-acquired when the wasm heap
        # grows) and owns this proxy from here on: it is destroyed with the device state (loss,
        # destroy) or when a new arena attaches its page 0.
        self._bridge.attachParams(self._state, page, buffer.raw, create_proxy(memoryview(shadow)), len(shadow))

    def record(self, dispatches, *, label):
        self._check_alive()
        pairs = to_js([[d.pipeline.raw, d.bind_group.raw] for d in dispatches])
        plan = Handle("plan", label, len(dispatches), self._bridge.record(
            self._device, self._state, pairs, "timestamp-query" in self.adapter.device_features))
        self.set_workgroups(plan, array("I", [c for d in dispatches for c in d.workgroups]))
        return plan

    def set_workgroups(self, plan, workgroups):
        with _HeapView(workgroups) as view:
            self._bridge.setCounts(plan.raw, view)

    def stepper(self, plan):
        js_step = plan.raw.step     # a handle on the JS closure itself: no attribute lookup per step
        raise_problems, label = self._raise_problems, plan.label

        def step(lo, hi, repeat=1):
            try:
                problems = js_step(lo, hi, repeat)
            except JsException as error:        # e.g. a range writeBuffer refuses: loud, and named
                raise GpuValidationError(f"replay({label})", str(error)) from None
            if problems:
                raise_problems(label)

        return step

    async def replay(self, plan, *, timestamps=False, upload=(0, 0)):
        lo, hi = upload
        bridge = self._bridge
        mode = {False: "", True: "dispatch", "span": "span"}[timestamps]
        raw = await self._scoped(f"replay({plan.label})", lambda: bridge.replayChecked(
            self._device, self._state, plan.raw, mode, lo, hi))
        if not timestamps:
            return None
        count = 2 if timestamps == "span" else 2 * plan.size
        return list(struct.unpack(f"<{count}Q", raw.to_bytes()[:8 * count]))

    def host_heap_bytes(self):
        used = self._bridge.jsHeapBytes()
        return None if used is None else int(used)

    def take_replay_stats(self):
        stats = self._bridge.takeReplayStats()
        return {"upload_ms": float(stats.uploadMs), "encode_ms": float(stats.encodeMs),
                "finish_ms": float(stats.finishMs), "submit_ms": float(stats.submitMs), "steps": int(stats.steps),
                "param_views": int(stats.paramViews), "timer_step_us": float(stats.resolutionProbeUs)}

    async def on_submitted_work_done(self):
        await self._scoped("on_submitted_work_done", lambda: self._bridge.workDone(self._device))

    def destroy(self, handle):
        if handle.kind == "buffer":
            handle.raw.destroy()
        elif handle.kind == "plan":
            self._bridge.release(handle.raw)

    async def create_peer(self, *, module_url: str, options: dict, share_device: bool = True) -> Handle:
        """Our addition: the peer engine (web/peer/ort_web.mjs: ONNX Runtime Web) on this GPUDevice, or with
        share_device False on a device of its own without the subgroups feature (from a new adapter: ours is
        consumed; its other features and limits as ours). `options` are createPeer's, as plain JSON."""
        url = str(js.URL.new(module_url, js.location.href).href)
        module = await run_js(f"import({json.dumps(url)})")
        device = self._device
        if not share_device:
            adapter = await js.navigator.gpu.requestAdapter(to_js({"powerPreference": "high-performance"}))
            if not adapter:
                raise AdapterUnavailable("requestAdapter() returned null for the peer's own device")
            features = [f for f in self.adapter.device_features if f not in ("subgroups", SUBGROUP_MATRIX)]
            device = await adapter.requestDevice(
                to_js({"requiredFeatures": features, "requiredLimits": dict(self.adapter.limits)}))
        peer = await module.createPeer(to_js({**options, "device": device}, dict_converter=js.Object.fromEntries))
        info = peer.info.to_py()
        return Handle("peer", "ort-web", 0, (peer, device if not share_device else None, info))

    def peer_info(self, peer: Handle) -> dict:
        return dict(peer.raw[2])

    async def peer_generate(self, peer: Handle, prompt: list[int], decode: int, keep: bool | list[int]) -> dict:
        """Our addition: one greedy run of the peer (see ort_web.mjs for what its times include); the logits
        rows of the steps in `keep` (True: all) come back as f32 bytes, in step order."""
        result = await peer.raw[0].generate(to_js(list(prompt)), decode, to_js(keep))
        return {"tokens": [int(t) for t in result.tokens], "prefill_ms": float(result.prefillMs),
                "decode_ms": float(result.decodeMs), "logits": [row.to_bytes() for row in result.logits]}

    async def release_peer(self, peer: Handle) -> None:
        engine, own_device, _ = peer.raw
        await engine.release()
        if own_device is not None:
            own_device.destroy()

    def destroy_device(self):
        self._bridge.destroyDevice(self._device, self._state)
