"""Native backend: the `wgpu` package (wgpu-native on Vulkan: lavapipe on CPU hosts, NVIDIA on GPU hosts).

Host-only. wgpu-py's API is the WebGPU spec in snake_case, so this is a thin mapping; the differences
handled here are feature/limit spellings ('subgroup' vs 'subgroups', kebab-case limits) and the
timestamp period, which wgpu-native leaves to the caller (WebGPU promises nanoseconds).
"""

from __future__ import annotations

import re
import struct

import wgpu
from wgpu.backends.wgpu_native import lib as _wgpu_lib

from .device import (WANTED_FEATURES, WANTED_LIMITS, AdapterReport, AdapterUnavailable, BufferUsage,
                     Device, Dispatch, GpuOutOfMemory, GpuValidationError, Handle, KernelCompileError)

__all__ = ["NativeDevice", "request_native_device"]

_FEATURE_NATIVE = {"subgroups": "subgroup"}       # WebGPU spelling -> wgpu-native spelling
_FEATURE_WEB = {v: k for k, v in _FEATURE_NATIVE.items()}
_LOCATION = re.compile(r":(\d+):(\d+)")


def _kebab(name: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "-" + m.group(1).lower(), name)


async def request_native_device(power_preference: str = "high-performance") -> "NativeDevice":
    adapter = wgpu.gpu.request_adapter_sync(power_preference=power_preference)
    if adapter is None:
        raise AdapterUnavailable("wgpu found no Vulkan adapter; install mesa-vulkan-drivers (lavapipe) "
                                 "or a GPU driver with a Vulkan ICD")
    features = sorted(_FEATURE_WEB.get(f, f) for f in adapter.features)
    limits = {name: int(adapter.limits[_kebab(name)]) for name in WANTED_LIMITS if _kebab(name) in adapter.limits}
    wanted = [f for f in WANTED_FEATURES if f in features]
    device = adapter.request_device_sync(
        required_features=[_FEATURE_NATIVE.get(f, f) for f in wanted],
        required_limits={_kebab(k): v for k, v in limits.items()},
    )
    info = {k: v for k, v in dict(adapter.info).items() if isinstance(v, (str, int))}
    report = AdapterReport(backend="native", info=info, features=tuple(features), limits=limits,
                           device_features=tuple(wanted))
    return NativeDevice(device, report)


class NativeDevice(Device):
    def __init__(self, device, adapter: AdapterReport):
        self._device = device
        self.adapter = adapter
        self._timestamp_period = float(_wgpu_lib.wgpuQueueGetTimestampPeriod(device.queue._internal))

    def create_buffer(self, *, label, size, usage):
        size = max(4, (size + 3) // 4 * 4)      # WebGPU buffer sizes for copies are 4-byte aligned
        try:
            raw = self._device.create_buffer(label=label, size=size, usage=usage)
        except wgpu.GPUValidationError as error:
            raise GpuValidationError(f"create_buffer({label!r}, {size} bytes)", str(error)) from None
        except wgpu.GPUOutOfMemoryError as error:
            raise GpuOutOfMemory(f"create_buffer({label!r}, {size} bytes)", str(error)) from None
        return Handle("buffer", label, size, raw)

    def write_buffer(self, buffer, data, offset=0):
        self._device.queue.write_buffer(buffer.raw, offset, memoryview(data).cast("B"))

    async def read_buffer(self, buffer, size=None):
        size = buffer.size if size is None else size
        return bytes(self._device.queue.read_buffer(buffer.raw, 0, (size + 3) // 4 * 4)[:size])

    async def create_compute_pipeline(self, *, kernel, constants=None):
        try:
            module = self._device.create_shader_module(label=kernel.name, code=kernel.code)
        except wgpu.GPUError as error:
            text = str(error)
            line, col = map(int, _LOCATION.search(text).groups()) if _LOCATION.search(text) else (0, 0)
            raise KernelCompileError(kernel.name, [(line, col, text.strip())]) from None
        compute = {"module": module, "entry_point": kernel.entry_point}
        if constants:
            compute["constants"] = dict(constants)
        try:
            raw = self._device.create_compute_pipeline(label=kernel.name, layout="auto", compute=compute)
        except wgpu.GPUError as error:
            raise GpuValidationError(f"create_compute_pipeline({kernel.name})", str(error)) from None
        return Handle("pipeline", kernel.name, 0, raw)

    def create_bind_group(self, *, label, pipeline, buffers):
        entries = [{"binding": b, "resource": {"buffer": buf.raw, "offset": 0, "size": buf.size}}
                   for b, buf in sorted(buffers.items())]
        try:
            raw = self._device.create_bind_group(
                label=label, layout=pipeline.raw.get_bind_group_layout(0), entries=entries)
        except wgpu.GPUError as error:
            raise GpuValidationError(f"create_bind_group({label})", str(error)) from None
        return Handle("bind_group", label, 0, raw)

    async def submit(self, dispatches: list[Dispatch], *, timestamps=False):
        device = self._device
        encoder = device.create_command_encoder()
        query_set = None
        if timestamps:
            count = 2 * len(dispatches)
            query_set = device.create_query_set(type="timestamp", count=count)
            for i, d in enumerate(dispatches):
                compute_pass = encoder.begin_compute_pass(timestamp_writes={
                    "query_set": query_set, "beginning_of_pass_write_index": 2 * i,
                    "end_of_pass_write_index": 2 * i + 1})
                _encode(compute_pass, d)
                compute_pass.end()
            resolved = device.create_buffer(size=8 * count, usage=BufferUsage.QUERY_RESOLVE | BufferUsage.COPY_SRC)
            encoder.resolve_query_set(query_set, 0, count, resolved, 0)
        else:
            compute_pass = encoder.begin_compute_pass()
            for d in dispatches:
                _encode(compute_pass, d)
            compute_pass.end()
        try:
            device.queue.submit([encoder.finish()])
        except wgpu.GPUError as error:
            raise GpuValidationError(f"submit({', '.join(d.label for d in dispatches[:4])})", str(error)) from None
        if not timestamps:
            device.queue.on_submitted_work_done_sync()
            return None
        raw = device.queue.read_buffer(resolved)
        ticks = struct.unpack(f"<{2 * len(dispatches)}Q", raw)
        return [round(t * self._timestamp_period) for t in ticks]

    def destroy(self, handle):
        if handle.kind == "buffer":
            handle.raw.destroy()


def _encode(compute_pass, d: Dispatch) -> None:
    compute_pass.set_pipeline(d.pipeline.raw)
    compute_pass.set_bind_group(0, d.bind_group.raw)
    compute_pass.dispatch_workgroups(*d.workgroups)
