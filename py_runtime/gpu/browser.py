"""Browser backend: pyodide.ffi -> navigator.gpu. Runs only inside Pyodide.

All JS interop of the runtime lives here and in its JS half, browser_bridge.js: descriptors go
through to_js, bulk bytes cross as zero-copy heap views, and no JsProxy leaves this module except
inside an opaque Handle.
"""

from __future__ import annotations

import asyncio
import struct
import time
from pathlib import Path

import js
from pyodide.code import run_js
from pyodide.ffi import JsException, create_proxy, to_js

from .device import (WANTED_FEATURES, WANTED_LIMITS, AdapterReport, AdapterUnavailable, Device,
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


def _call_with_buffer(fn, data) -> object:
    proxy = create_proxy(memoryview(data).cast("B"))
    try:
        return fn(proxy)
    finally:
        proxy.destroy()


async def post_bytes(url: str, data: bytes | memoryview) -> None:
    """Our addition: POST bytes to the page's server (result uploads for headless runs)."""
    proxy = create_proxy(memoryview(data).cast("B"))
    try:
        await _js_bridge().postBytes(url, proxy)
    finally:
        proxy.destroy()


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
        self.adapter = adapter

    def create_buffer(self, *, label, size, usage):
        size = max(4, (size + 3) // 4 * 4)
        raw = self._device.createBuffer(to_js({"label": label, "size": size, "usage": usage}))
        return Handle("buffer", label, size, raw)

    def write_buffer(self, buffer, data, offset=0):
        _call_with_buffer(lambda proxy: _js_bridge().writeBuffer(self._device, buffer.raw, offset, proxy), data)

    async def read_buffer(self, buffer, size=None):
        size = buffer.size if size is None else size
        return (await _js_bridge().readBuffer(self._device, buffer.raw, size)).to_bytes()

    async def create_compute_pipeline(self, *, kernel, constants=None):
        result = await _js_bridge().createPipeline(
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

    def create_bind_group(self, *, label, pipeline, buffers):
        entries = to_js([[b, buf.raw] for b, buf in sorted(buffers.items())])
        raw = _js_bridge().createBindGroup(self._device, label, pipeline.raw, entries)
        return Handle("bind_group", label, 0, raw)

    async def submit(self, dispatches, *, timestamps=False):
        encoded = to_js([[d.pipeline.raw, d.bind_group.raw, *d.workgroups] for d in dispatches])
        try:
            raw = await _js_bridge().submit(self._device, encoded, bool(timestamps))
        except JsException as error:
            names = ", ".join(d.label for d in dispatches[:4])
            raise GpuValidationError(f"submit({names})", str(error)) from None
        if not timestamps:
            return None
        return list(struct.unpack(f"<{2 * len(dispatches)}Q", raw.to_bytes()))

    def destroy(self, handle):
        if handle.kind == "buffer":
            handle.raw.destroy()
