"""Native backend: the `wgpu` package (wgpu-native on Vulkan: lavapipe on CPU hosts, NVIDIA on GPU hosts).

Host-only. wgpu-py's API is the WebGPU spec in snake_case, so this is a thin mapping; the differences
handled here are feature/limit spellings ('subgroup' vs 'subgroups', kebab-case limits) and the
timestamp period, which wgpu-native leaves to the caller (WebGPU promises nanoseconds).
"""

from __future__ import annotations

import re
import struct

import wgpu
from wgpu.backends.wgpu_native import ffi as _ffi
from wgpu.backends.wgpu_native import lib as _wgpu_lib

from .device import (WANTED_FEATURES, WANTED_LIMITS, AdapterReport, AdapterUnavailable, BufferUsage,
                     Device, DeviceLost, Dispatch, GpuOutOfMemory, GpuValidationError, Handle,
                     KernelCompileError)

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
    # wgpu 0.32 spells the subgroup sizes 'stackgroup_*'; report them under the WebGPU names.
    for native_key, web_key in (("min_size", "subgroupMinSize"), ("max_size", "subgroupMaxSize")):
        for prefix in ("subgroup_", "stackgroup_"):
            if prefix + native_key in info:
                info[web_key] = info[prefix + native_key]
    report = AdapterReport(backend="native", info=info, features=tuple(features), limits=limits,
                           device_features=tuple(wanted))
    return NativeDevice(device, report)


class NativeDevice(Device):
    def __init__(self, device, adapter: AdapterReport):
        self._device = device
        self.adapter = adapter
        self._lost: tuple[str, str] | None = None
        self._timestamp_period = float(_wgpu_lib.wgpuQueueGetTimestampPeriod(device.queue._internal))
        self._fence = device.create_buffer(label="native.fence", size=4,
                                           usage=BufferUsage.COPY_SRC | BufferUsage.COPY_DST)

    def _wait_idle(self) -> None:
        # wgpu 0.32.0's on_submitted_work_done_sync passes a callback of the wrong C type, so wait
        # by mapping a copy of a 4-byte buffer: the map completes after all earlier submissions.
        self._device.queue.read_buffer(self._fence)

    @property
    def lost(self):
        return self._lost

    def _check_alive(self):
        if self._lost:
            raise DeviceLost(*self._lost)

    def _call(self, what: str, fn, *args, **kwargs):
        """wgpu-py raises validation errors synchronously; name the op in them."""
        self._check_alive()
        try:
            return fn(*args, **kwargs)
        except wgpu.GPUOutOfMemoryError as error:
            raise GpuOutOfMemory(what, str(error)) from None
        except wgpu.GPUError as error:
            raise GpuValidationError(what, str(error)) from None

    async def create_buffer(self, *, label, size, usage):
        size = max(4, (size + 3) // 4 * 4)      # WebGPU buffer sizes for copies are 4-byte aligned
        raw = self._call(f"create_buffer({label!r}, {size} bytes)", self._device.create_buffer,
                         label=label, size=size, usage=usage)
        return Handle("buffer", label, size, raw)

    def write_buffer(self, buffer, data, offset=0):
        self._call(f"write_buffer({buffer.label!r})", self._device.queue.write_buffer,
                   buffer.raw, offset, memoryview(data).cast("B"))

    async def read_buffer(self, buffer, size=None, offset=0):
        size = buffer.size - offset if size is None else size
        data = self._call(f"read_buffer({buffer.label!r})", self._device.queue.read_buffer,
                          buffer.raw, offset, (size + 3) // 4 * 4)
        return bytes(data[:size])

    async def create_compute_pipeline(self, *, kernel, constants=None):
        self._check_alive()
        try:
            module = self._device.create_shader_module(label=kernel.name, code=kernel.code)
        except wgpu.GPUError as error:
            text = str(error)
            found = _LOCATION.search(text)
            line, col = map(int, found.groups()) if found else (0, 0)
            raise KernelCompileError(kernel.name, [(line, col, text.strip())]) from None
        compute = {"module": module, "entry_point": kernel.entry_point}
        if constants:
            compute["constants"] = dict(constants)
        raw = self._call(f"create_compute_pipeline({kernel.name})", self._device.create_compute_pipeline,
                         label=kernel.name, layout="auto", compute=compute)
        return Handle("pipeline", kernel.name, 0, raw)

    async def create_bind_group(self, *, label, pipeline, buffers):
        entries = []
        for binding, entry in sorted(buffers.items()):
            buffer, offset, size = entry if isinstance(entry, tuple) else (entry, 0, entry.size)
            entries.append({"binding": binding, "resource": {"buffer": buffer.raw, "offset": offset, "size": size}})
        raw = self._call(f"create_bind_group({label})", self._device.create_bind_group,
                         label=label, layout=pipeline.raw.get_bind_group_layout(0), entries=entries)
        return Handle("bind_group", label, 0, raw)

    def _encode_and_wait(self, what, pairs, counts, timestamps, wait=True, direct=False):
        self._check_alive()
        device = self._device
        encoder = device.create_command_encoder()
        span = timestamps == "span"         # the whole pass between two timestamps
        count = 2 if span else 2 * len(pairs)
        query_set = device.create_query_set(type="timestamp", count=count) if timestamps else None
        pass_stamps = {"query_set": query_set, "beginning_of_pass_write_index": 0,
                       "end_of_pass_write_index": 1} if span else None
        if timestamps and not span:
            for i, (pipeline, bind_group) in enumerate(pairs):
                compute_pass = encoder.begin_compute_pass(timestamp_writes={
                    "query_set": query_set, "beginning_of_pass_write_index": 2 * i,
                    "end_of_pass_write_index": 2 * i + 1})
                compute_pass.set_pipeline(pipeline)
                compute_pass.set_bind_group(0, bind_group)
                compute_pass.dispatch_workgroups(counts[3 * i], counts[3 * i + 1], counts[3 * i + 2])
                compute_pass.end()
        elif not direct:
            compute_pass = encoder.begin_compute_pass(timestamp_writes=pass_stamps)
            for i, (pipeline, bind_group) in enumerate(pairs):
                compute_pass.set_pipeline(pipeline)
                compute_pass.set_bind_group(0, bind_group)
                compute_pass.dispatch_workgroups(counts[3 * i], counts[3 * i + 1], counts[3 * i + 2])
            compute_pass.end()
        else:
            compute_pass = encoder.begin_compute_pass(timestamp_writes=pass_stamps)
            # Replay goes straight to wgpu-native's C entry points (the wgpu objects stay referenced by `pairs`):
            # wgpu-py's per-call argument handling is most of the host cost of a dispatch.
            handle = compute_pass._internal
            set_pipeline = _wgpu_lib.wgpuComputePassEncoderSetPipeline
            set_bind_group = _wgpu_lib.wgpuComputePassEncoderSetBindGroup
            dispatch = _wgpu_lib.wgpuComputePassEncoderDispatchWorkgroups
            for i, (pipeline, bind_group) in enumerate(pairs):
                set_pipeline(handle, pipeline._internal)
                set_bind_group(handle, 0, bind_group._internal, 0, _ffi.NULL)
                dispatch(handle, counts[3 * i], counts[3 * i + 1], counts[3 * i + 2])
            compute_pass.end()
        if timestamps:
            resolved = device.create_buffer(size=8 * count, usage=BufferUsage.QUERY_RESOLVE | BufferUsage.COPY_SRC)
            encoder.resolve_query_set(query_set, 0, count, resolved, 0)
        self._call(what, device.queue.submit, [encoder.finish()])
        if not timestamps:
            if wait:
                self._wait_idle()
            return None
        ticks = struct.unpack(f"<{count}Q", device.queue.read_buffer(resolved))
        return [round(t * self._timestamp_period) for t in ticks]

    async def submit(self, dispatches: list[Dispatch], *, timestamps=False, wait=True):
        pairs = [(d.pipeline.raw, d.bind_group.raw) for d in dispatches]
        counts = [c for d in dispatches for c in d.workgroups]
        return self._encode_and_wait(f"submit({', '.join(d.label for d in dispatches[:4])})", pairs, counts,
                                     timestamps, wait)

    def record(self, dispatches, *, label):
        self._check_alive()
        return Handle("plan", label, len(dispatches), [(d.pipeline.raw, d.bind_group.raw) for d in dispatches])

    async def replay(self, plan, workgroups, *, timestamps=False, upload=None, wait=True):
        if upload:
            buffer, offset, data = upload
            self.write_buffer(buffer, data, offset)
        return self._encode_and_wait(f"replay({plan.label})", plan.raw, workgroups, timestamps, wait, direct=True)

    async def on_submitted_work_done(self):
        self._call("on_submitted_work_done", self._wait_idle)

    def destroy(self, handle):
        if handle.kind == "buffer":
            handle.raw.destroy()

    def destroy_device(self):
        self._device.destroy()
        self._lost = ("destroyed", "GPUDevice.destroy() was called")
