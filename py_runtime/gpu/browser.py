"""Browser backend: pyodide.ffi -> navigator.gpu. Runs only inside Pyodide.

All JS interop of the runtime lives here and in its JS half, browser_bridge.js: descriptors go
through to_js, bulk bytes cross as zero-copy heap views, and no JsProxy leaves this module except
inside an opaque Handle.
"""

from __future__ import annotations

import asyncio
import struct
import time
from array import array
from pathlib import Path

import js
from pyodide.code import run_js
from pyodide.ffi import JsException, create_proxy, to_js

from .device import (WANTED_FEATURES, WANTED_LIMITS, AdapterReport, AdapterUnavailable, Device, DeviceLost,
                     GpuOutOfMemory, GpuValidationError, Handle, KernelCompileError)

__all__ = ["BrowserDevice", "request_browser_device", "post_bytes"]

_INFO_FIELDS = ("vendor", "architecture", "device", "description", "subgroupMinSize", "subgroupMaxSize",
                "isFallbackAdapter")
_FLAGS_HINT = ("start Chromium with --enable-unsafe-webgpu (and --enable-webgpu-developer-features for "
               "unquantized timestamps), and serve the page from http://127.0.0.1 or https (a secure context)")
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
    report = AdapterReport(backend="browser", info=info, features=features, limits=limits,
                           device_features=tuple(wanted))
    return BrowserDevice(device, report)


class BrowserDevice(Device):
    def __init__(self, device, adapter: AdapterReport):
        self._device = device
        self._bridge = _js_bridge()
        self._state = self._bridge.trackDevice(device)
        self._counts_views: dict[int, tuple] = {}     # plan uid -> (its counts array, a heap view of it)
        self.adapter = adapter

    @property
    def lost(self):
        info = self._state.lost
        return (str(info.reason), str(info.message)) if info else None

    def _check_alive(self, what: str = "an earlier unscoped call"):
        """Raise for a lost device, or for uncaptured errors that arrived since the last check."""
        if not self._state.problems:        # one property read on the per-step path
            return
        lost = self.lost
        if lost:
            raise DeviceLost(*lost)
        errors = self._state.errors
        if errors.length:
            messages = [str(m) for m in errors]
            errors.length = 0
            self._state.problems = 0
            raise GpuValidationError(what, "; ".join(messages))

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

    def record(self, dispatches, *, label):
        self._check_alive()
        pairs = to_js([[d.pipeline.raw, d.bind_group.raw] for d in dispatches])
        plan = self._bridge.record(self._device, pairs, "timestamp-query" in self.adapter.device_features)
        return Handle("plan", label, len(dispatches), plan)

    def _counts_view(self, plan, workgroups):
        """A heap view of the plan's workgroup counts, made once per counts array: a PyProxy costs
        tens of microseconds in Pyodide, a noticeable share of a whole step's host time. (Resizes
        assign same-length slices, which an exported array allows.)"""
        cached = self._counts_views.get(plan.uid)
        if cached is None or cached[0] is not workgroups:
            if cached is not None:
                cached[1].destroy()
            cached = (workgroups, create_proxy(memoryview(workgroups)))
            self._counts_views[plan.uid] = cached
        return cached[1]

    async def replay(self, plan, workgroups, *, timestamps=False, upload=None, wait=True):
        buffer, offset, data = upload if upload else (None, 0, None)
        bridge = self._bridge
        counts = self._counts_view(plan, workgroups)
        if not (timestamps or wait):
            # The per-token path: one synchronous call; errors surface on the next check.
            self._check_alive(plan.label)
            if data is None:
                bridge.replayNow(self._device, plan.raw, counts, None, 0, None)
            else:
                with _HeapView(data) as view:
                    bridge.replayNow(self._device, plan.raw, counts, buffer.raw, offset, view)
            return None
        what = f"replay({plan.label})"
        mode = {False: "", True: "dispatch", "span": "span"}[timestamps]
        if data is None:
            raw = await self._scoped(what, lambda: bridge.replayChecked(
                self._device, plan.raw, counts, mode, None, 0, None))
        else:
            with _HeapView(data) as view:
                raw = await self._scoped(what, lambda: bridge.replayChecked(
                    self._device, plan.raw, counts, mode, buffer.raw, offset, view))
        if not timestamps:
            return None
        count = 2 if timestamps == "span" else 2 * plan.size
        return list(struct.unpack(f"<{count}Q", raw.to_bytes()[:8 * count]))

    def take_replay_stats(self):
        stats = self._bridge.takeReplayStats()
        return {"encode_ms": float(stats.encodeMs), "submit_ms": float(stats.submitMs), "steps": int(stats.steps),
                "timer_step_us": float(stats.resolutionProbeUs)}

    async def on_submitted_work_done(self):
        await self._scoped("on_submitted_work_done", lambda: self._bridge.workDone(self._device))

    def destroy(self, handle):
        if handle.kind == "buffer":
            handle.raw.destroy()
        elif handle.kind == "plan":
            self._bridge.release(handle.raw)
            cached = self._counts_views.pop(handle.uid, None)
            if cached is not None:
                cached[1].destroy()

    def destroy_device(self):
        self._device.destroy()
