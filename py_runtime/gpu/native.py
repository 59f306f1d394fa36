"""Native backend: the `wgpu` package (wgpu-native on Vulkan: lavapipe on CPU hosts, NVIDIA on GPU hosts).

Host-only. wgpu-py's API is the WebGPU spec in snake_case, so this is a thin mapping; the differences
handled here are feature/limit spellings ('subgroup' vs 'subgroups', kebab-case limits) and the
timestamp period, which wgpu-native leaves to the caller (WebGPU promises nanoseconds).

The per-token step skips wgpu-py's objects and calls wgpu-native's C entry points through cffi:
wgpu-py's argument handling and wrapper objects cost more host time than the dispatch itself.
"""

from __future__ import annotations

import os
import re
import struct
import time

import wgpu
from wgpu.backends.wgpu_native import ffi as _ffi
from wgpu.backends.wgpu_native import lib as _wgpu_lib
# wgpu-py's error-capturing copy of the C library: a call that reports a validation error raises it.
from wgpu.backends.wgpu_native._api import libf as _checked_lib

from .device import (WANTED_FEATURES, WANTED_LIMITS, AdapterReport, AdapterUnavailable, BufferUsage,
                     Device, DeviceLost, Dispatch, GpuOutOfMemory, GpuValidationError, Handle,
                     KernelCompileError)

__all__ = ["NativeDevice", "request_native_device"]

_FEATURE_NATIVE = {"subgroups": "subgroup"}       # WebGPU spelling -> wgpu-native spelling
# Naga (wgpu-native 0.32) does not support the `subgroups` enable-extension yet ("not yet supported")
# and gates subgroup builtins by the device feature alone; Tint requires the directive. Kernels are
# written for Tint and the directive is blanked here (a blank line keeps compile errors' line numbers).
_SUBGROUPS_DIRECTIVE = re.compile(r"^[ \t]*enable[ \t]+subgroups[ \t]*;", re.MULTILINE)

_FEATURE_WEB = {v: k for k, v in _FEATURE_NATIVE.items()}
_LOCATION = re.compile(r":(\d+):(\d+)")


def _naga_dialect(code: str) -> str:
    return _SUBGROUPS_DIRECTIVE.sub("", code)


def _kebab(name: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "-" + m.group(1).lower(), name)


class _NativePlan:
    """A recorded plan: its wgpu objects (kept alive here, since the C calls use raw handles), the
    counts, and the encoding program at those counts (rebuilt by set_workgroups)."""

    __slots__ = ("pairs", "handles", "counts", "program")

    def __init__(self, pairs):
        self.pairs = pairs
        self.handles = [(pipeline._internal, bind_group._internal) for pipeline, bind_group in pairs]
        self.counts: list[int] = []
        self.program: list[tuple] = []


def encoding_program(handles, counts) -> list[tuple]:
    """(pipeline or None, bind group or None, x, y, z) per dispatch that runs, from (pipeline,
    bind group) handles and 3N counts: idle dispatches (a zero count) are dropped and a pipeline
    or bind group already set in the pass is None, so the step loop makes only the calls needed
    (as the browser's JS encoder does). Derived once per resize, not per step."""
    program = []
    pipeline_set = bind_group_set = None
    for i, (pipeline, bind_group) in enumerate(handles):
        x, y, z = counts[3 * i], counts[3 * i + 1], counts[3 * i + 2]
        if not (x and y and z):
            continue
        program.append((None if pipeline == pipeline_set else pipeline,
                        None if bind_group == bind_group_set else bind_group, x, y, z))
        pipeline_set, bind_group_set = pipeline, bind_group
    return program


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
        self._params: list[tuple] = []              # per params page: (buffer handle, cffi pointer into its shadow)
        self._page_size = 0
        self._submit_list = _ffi.new("WGPUCommandBuffer[1]")
        self._stats = [0, 0, 0, 0, 0]               # ns: upload, encode, finish, submit; steps

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
            module = self._device.create_shader_module(label=kernel.name, code=_naga_dialect(kernel.code))
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

    def _encode_and_wait(self, what, pairs, counts, timestamps, wait=True):
        self._check_alive()
        device = self._device
        encoder = device.create_command_encoder()
        span = timestamps == "span"         # the whole pass between two timestamps
        count = 2 if span else 2 * len(pairs)
        query_set = device.create_query_set(type="timestamp", count=count) if timestamps else None
        if timestamps and not span:
            for i, (pipeline, bind_group) in enumerate(pairs):
                compute_pass = encoder.begin_compute_pass(timestamp_writes={
                    "query_set": query_set, "beginning_of_pass_write_index": 2 * i,
                    "end_of_pass_write_index": 2 * i + 1})
                compute_pass.set_pipeline(pipeline)
                compute_pass.set_bind_group(0, bind_group)
                compute_pass.dispatch_workgroups(counts[3 * i], counts[3 * i + 1], counts[3 * i + 2])
                compute_pass.end()
        else:
            compute_pass = encoder.begin_compute_pass(timestamp_writes={
                "query_set": query_set, "beginning_of_pass_write_index": 0,
                "end_of_pass_write_index": 1} if span else None)
            for i, (pipeline, bind_group) in enumerate(pairs):
                if counts[3 * i] * counts[3 * i + 1] * counts[3 * i + 2] == 0:
                    continue            # an idle alternative, as the replay step skips it
                compute_pass.set_pipeline(pipeline)
                compute_pass.set_bind_group(0, bind_group)
                compute_pass.dispatch_workgroups(counts[3 * i], counts[3 * i + 1], counts[3 * i + 2])
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

    def attach_params(self, page, buffer, shadow):
        # cffi keeps the shadow exported while the pointer lives, so it cannot be resized under it.
        if page == 0:
            self._params, self._page_size = [], len(shadow)
        if page != len(self._params) or len(shadow) != self._page_size:
            raise ValueError(f"params page {page} of {len(shadow)} bytes attached after {len(self._params)} "
                             f"page(s) of {self._page_size} bytes: pages come in order, all of one size")
        self._params.append((buffer.raw._internal, _ffi.from_buffer(shadow)))

    def _upload_params(self, write, lo, hi):
        """Bytes [lo, hi) of the params pages laid end to end, one `write` (wgpuQueueWriteBuffer)
        per page the range touches."""
        queue, pages, size = self._device.queue._internal, self._params, self._page_size
        page, start = lo // size, lo % size
        while lo < hi:
            end = min(hi - lo + start, size)
            buffer, shadow = pages[page]
            write(queue, buffer, start, shadow + start, end - start)
            lo += end - start
            page, start = page + 1, 0

    def record(self, dispatches, *, label):
        self._check_alive()
        plan = Handle("plan", label, len(dispatches),
                      _NativePlan([(d.pipeline.raw, d.bind_group.raw) for d in dispatches]))
        self.set_workgroups(plan, [c for d in dispatches for c in d.workgroups])
        return plan

    def set_workgroups(self, plan, workgroups):
        recorded = plan.raw
        recorded.counts = list(workgroups)
        recorded.program = encoding_program(recorded.handles, recorded.counts)

    def stepper(self, plan):
        recorded, what, stats = plan.raw, f"replay({plan.label})", self._stats

        def step(lo, hi, repeat=1):
            self._step(recorded, what, lo, hi, stats, repeat)

        return step

    def _step(self, recorded, what, lo, hi, stats, repeat=1):
        """Upload [lo, hi) of the params shadow, encode the plan's program into one pass (`repeat` times
        over), finish, submit; adds ns per phase to `stats` when given. (The program's first entry sets
        its pipeline and bind group, so a repeat starts from the right state.) Encoder-level calls go through wgpu-py's
        error-capturing wrappers (validation errors raise here, named); the per-dispatch calls are
        raw: wgpu-core defers their errors to the pass end or the finish, both checked."""
        if self._lost:
            raise DeviceLost(*self._lost)
        clock = time.perf_counter_ns
        checked, raw, null = _checked_lib, _wgpu_lib, _ffi.NULL
        set_pipeline = raw.wgpuComputePassEncoderSetPipeline
        set_bind_group = raw.wgpuComputePassEncoderSetBindGroup
        dispatch = raw.wgpuComputePassEncoderDispatchWorkgroups
        queue = self._device.queue._internal
        started = clock()
        try:
            if hi > lo:
                self._upload_params(checked.wgpuQueueWriteBuffer, lo, hi)
            uploaded = clock()
            encoder = checked.wgpuDeviceCreateCommandEncoder(self._device._internal, null)
            try:
                compute_pass = checked.wgpuCommandEncoderBeginComputePass(encoder, null)
                try:
                    for _ in range(repeat):
                        for pipeline, bind_group, x, y, z in recorded.program:
                            if pipeline is not None:
                                set_pipeline(compute_pass, pipeline)
                            if bind_group is not None:
                                set_bind_group(compute_pass, 0, bind_group, 0, null)
                            dispatch(compute_pass, x, y, z)
                    checked.wgpuComputePassEncoderEnd(compute_pass)
                finally:
                    raw.wgpuComputePassEncoderRelease(compute_pass)
                encoded = clock()
                commands = checked.wgpuCommandEncoderFinish(encoder, null)
            finally:
                raw.wgpuCommandEncoderRelease(encoder)
            finished = clock()
            try:
                self._submit_list[0] = commands
                checked.wgpuQueueSubmit(queue, 1, self._submit_list)
            finally:
                raw.wgpuCommandBufferRelease(commands)
        except wgpu.GPUOutOfMemoryError as error:
            raise GpuOutOfMemory(what, str(error)) from None
        except wgpu.GPUError as error:
            raise GpuValidationError(what, str(error)) from None
        if stats is not None:
            submitted = clock()
            stats[0] += uploaded - started
            stats[1] += encoded - uploaded
            stats[2] += finished - encoded
            stats[3] += submitted - finished
            stats[4] += repeat

    async def replay(self, plan, *, timestamps=False, upload=(0, 0)):
        recorded, what = plan.raw, f"replay({plan.label})"
        if not timestamps:
            self._step(recorded, what, *upload, None)
            self._call("on_submitted_work_done", self._wait_idle)
            return None
        lo, hi = upload
        if hi > lo:
            self._call(what, self._upload_params, _checked_lib.wgpuQueueWriteBuffer, lo, hi)
        return self._encode_and_wait(what, recorded.pairs, recorded.counts, timestamps)

    def host_heap_bytes(self):
        try:                                    # resident pages (Linux); elsewhere the backend cannot tell
            with open("/proc/self/statm") as statm:
                return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            return None

    def take_replay_stats(self):
        upload, encode, finish, submit, steps = self._stats
        self._stats[:] = [0, 0, 0, 0, 0]
        return {"upload_ms": upload / 1e6, "encode_ms": encode / 1e6, "finish_ms": finish / 1e6,
                "submit_ms": submit / 1e6, "steps": steps,
                "timer_step_us": time.get_clock_info("perf_counter").resolution * 1e6}

    async def on_submitted_work_done(self):
        self._call("on_submitted_work_done", self._wait_idle)

    def destroy(self, handle):
        if handle.kind == "buffer":
            handle.raw.destroy()

    def destroy_device(self):
        self._device.destroy()
        self._lost = ("destroyed", "GPUDevice.destroy() was called")
