"""The one small device interface both backends implement (browser: navigator.gpu; native: wgpu).

Method names follow the WebGPU spec in snake_case; methods that are not in the spec are our
additions and say so. Handles returned by a backend are opaque `Handle`s: no JsProxy or wgpu
object escapes a backend, so the code above this interface is identical in both.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Union

__all__ = [
    "AdapterReport", "Binding", "BufferUsage", "Device", "DeviceLost", "Dispatch", "GpuError",
    "AdapterUnavailable", "KernelCompileError", "GpuValidationError", "GpuOutOfMemory", "Handle",
    "NAMED_TUNING", "WANTED_FEATURES", "WANTED_LIMITS", "software_adapter", "adapter_name", "SUBGROUP_MATRIX", "COMPILE_PROBES", "run_compile_probes",
]


class BufferUsage:
    """GPUBufferUsage flag values from the WebGPU spec."""

    MAP_READ = 0x0001
    MAP_WRITE = 0x0002
    COPY_SRC = 0x0004
    COPY_DST = 0x0008
    UNIFORM = 0x0040
    STORAGE = 0x0080
    QUERY_RESOLVE = 0x0200


# Optional features the runtime asks for when the adapter has them (WebGPU spellings). Chromium lists
# the subgroup-matrix feature only with --enable-unsafe-webgpu; its configs come in GPUAdapterInfo.
SUBGROUP_MATRIX = "chromium-experimental-subgroup-matrix"
WANTED_FEATURES = ("timestamp-query", "subgroups", "shader-f16", SUBGROUP_MATRIX)
# Kernels compiled once when the device is made, because a route depends on more than a feature bit:
# the subgroup-matrix extension's WGSL spelling has moved between Chromium releases. {probe: (kernel,
# the features it needs)}; the outcome is AdapterReport.probes[probe]: "ok" or the compiler's complaint.
COMPILE_PROBES = {"subgroup_matrix_i8": ("subgroup_matrix_probe", (SUBGROUP_MATRIX,)),
                  "subgroup_matrix_f16": ("subgroup_matrix_probe_f16", (SUBGROUP_MATRIX, "shader-f16"))}
# Limits requested at the adapter's maximum: the defaults (128 MiB bindings, 16 KiB workgroup
# memory) are far below what LLM-sized tensors and tiled kernels need.
WANTED_LIMITS = (
    "maxStorageBufferBindingSize", "maxBufferSize", "maxComputeWorkgroupStorageSize",
    "maxComputeInvocationsPerWorkgroup", "maxComputeWorkgroupSizeX", "maxComputeWorkgroupSizeY",
    "maxComputeWorkgroupSizeZ", "maxComputeWorkgroupsPerDimension", "maxStorageBuffersPerShaderStage",
)


class GpuError(RuntimeError):
    pass


class AdapterUnavailable(GpuError):
    pass


class KernelCompileError(GpuError):
    """WGSL compilation failed; `messages` are (line, column, text) from getCompilationInfo."""

    def __init__(self, kernel: str, messages: list[tuple[int, int, str]]):
        self.kernel = kernel
        self.messages = messages
        lines = "\n".join(f"  {kernel}.wgsl:{line}:{col}: {text}" for line, col, text in messages)
        super().__init__(f"WGSL compilation of kernel {kernel!r} failed:\n{lines}")


class GpuValidationError(GpuError):
    def __init__(self, op: str, message: str):
        self.op = op
        super().__init__(f"WebGPU validation error in {op}: {message}")


class GpuOutOfMemory(GpuError):
    def __init__(self, op: str, message: str):
        self.op = op
        super().__init__(f"WebGPU out of memory in {op}: {message}")


class DeviceLost(GpuError):
    """The device is gone (GPUDevice.lost resolved); rebuild the runtime and its plans."""

    def __init__(self, reason: str, message: str):
        self.reason = reason
        super().__init__(f"WebGPU device lost ({reason}): {message}; rebuild the runtime (Runtime.rebuild) "
                         f"and re-record its plans")


_handle_ids = itertools.count(1)


@dataclass(frozen=True)
class Handle:
    """An opaque backend object (buffer, pipeline, bind group, plan) with a label for error messages."""

    kind: str
    label: str
    size: int = 0
    raw: Any = field(default=None, repr=False, compare=False)
    uid: int = field(default_factory=lambda: next(_handle_ids), compare=False)


# A bind group entry: a whole buffer, or (buffer, offset, size) for a slice (the params arena).
Binding = Union[Handle, tuple]


# The adapter-info key of the tuning table a run names (ops/tuning.py) in place of the one the info
# matches: not a GPUAdapterInfo field, it rides in the info so that every route and oracle sees it.
NAMED_TUNING = "tuning_table"


@dataclass(frozen=True, kw_only=True)
class AdapterReport:
    backend: str                # "browser" or "native"
    info: dict                  # GPUAdapterInfo fields (vendor, architecture, device, description, ...)
    features: tuple[str, ...]   # adapter features, WebGPU spellings, sorted
    limits: dict                # the WANTED_LIMITS of the adapter
    device_features: tuple[str, ...]  # what the device was created with
    probes: dict = field(default_factory=dict)  # COMPILE_PROBES outcomes, filled once the device exists

    def to_json(self) -> dict:
        return {"backend": self.backend, "info": self.info, "features": list(self.features),
                "limits": self.limits, "device_features": list(self.device_features), "probes": dict(self.probes)}

    def subgroup_matrix_configs(self) -> list[dict]:
        """GPUAdapterInfo.subgroupMatrixConfigs as dicts (componentType, resultComponentType, M, N, K);
        empty where the device was made without the feature."""
        return list(self.info.get("subgroupMatrixConfigs", ())) if SUBGROUP_MATRIX in self.device_features else []


_SOFTWARE = ("swiftshader", "llvmpipe", "lavapipe")


def software_adapter(info: dict) -> str | None:
    """Why the adapter is a CPU (software) one, from its info; None for a GPU."""
    if info.get("isFallbackAdapter") is True:
        return f"{adapter_name(info)} is a fallback (CPU) adapter"
    text = " ".join(str(info.get(key, "")) for key in ("vendor", "architecture", "device", "description")).lower()
    if any(name in text for name in _SOFTWARE) or str(info.get("adapter_type", "")).lower() == "cpu":
        return f"{adapter_name(info)} is a CPU (software) adapter"
    return None


def adapter_name(info: dict) -> str:
    return info.get("description") or info.get("device") or info.get("vendor") or "the adapter"


async def run_compile_probes(device: "Device") -> None:
    """Compile each COMPILE_PROBES kernel whose features the device has; record the outcome."""
    from ..kernels import kernel         # the registry imports this module's types
    for probe, (name, features) in COMPILE_PROBES.items():
        if not set(features) <= set(device.adapter.device_features):
            continue
        try:
            await device.create_compute_pipeline(kernel=kernel(name))
            device.adapter.probes[probe] = "ok"
        except (KernelCompileError, GpuValidationError) as error:
            device.adapter.probes[probe] = str(error)


@dataclass(frozen=True, kw_only=True)
class Dispatch:
    label: str
    pipeline: Handle
    bind_group: Handle
    workgroups: tuple[int, int, int]


class Device:
    """Interface; see the browser and native backends."""

    adapter: AdapterReport

    @property
    def lost(self) -> tuple[str, str] | None:
        """(reason, message) once GPUDevice.lost has resolved, else None."""
        raise NotImplementedError

    async def create_buffer(self, *, label: str, size: int, usage: int) -> Handle:
        """GPUDevice.createBuffer (size rounded up to 4 bytes), inside error scopes."""
        raise NotImplementedError

    def write_buffer(self, buffer: Handle, data: bytes | bytearray | memoryview, offset: int = 0) -> None:
        """GPUQueue.writeBuffer."""
        raise NotImplementedError

    async def read_buffer(self, buffer: Handle, size: int | None = None, offset: int = 0) -> bytes:
        """Our addition: copy `size` bytes (default: the rest) from `offset` to a staging buffer,
        map it, copy out."""
        raise NotImplementedError

    async def create_compute_pipeline(self, *, kernel, constants: dict | None = None) -> Handle:
        """createShaderModule + createComputePipelineAsync, inside error scopes; compilation
        errors raise KernelCompileError with line and column."""
        raise NotImplementedError

    async def create_bind_group(self, *, label: str, pipeline: Handle, buffers: dict[int, Binding]) -> Handle:
        """Bind group 0 of `pipeline` from {binding: buffer or (buffer, offset, size)}."""
        raise NotImplementedError

    async def submit(self, dispatches: list[Dispatch], *, timestamps: bool = False, wait: bool = True) -> list[int] | None:
        """Our addition: encode `dispatches` call by call from Python into one command encoder,
        submit, and (unless wait=False) wait for the GPU. The baseline record/replay is measured against.

        Without timestamps: one compute pass. With timestamps (needs 'timestamp-query'): one pass
        per dispatch writing begin/end timestamps 2i and 2i+1; returns those 2N values in ns.
        """
        raise NotImplementedError

    def attach_params(self, page: int, buffer: Handle, shadow: bytearray) -> None:
        """Our addition: page `page` of the params arena that steps upload from: its uniform buffer
        and the host shadow of it, a bytearray that is never resized (so a backend may keep a view
        of it). Pages are attached in order, all of one size; attaching page 0 drops any earlier
        arena's pages. A step's range [lo, hi) runs over the pages end to end."""
        raise NotImplementedError

    def record(self, dispatches: list[Dispatch], *, label: str) -> Handle:
        """Our addition: keep (pipeline, bind group) pairs where encoding happens (JS in the
        browser), with the dispatches' workgroup counts, so that one call encodes a whole step."""
        raise NotImplementedError

    def set_workgroups(self, plan: Handle, workgroups) -> None:
        """Our addition: the plan's new workgroup counts (an array('I') of 3N) after a resize;
        steps and replays use the counts last given here (or at record)."""
        raise NotImplementedError

    def stepper(self, plan: Handle) -> Callable[..., None]:
        """Our addition: the per-token path. Returns step(lo, hi, repeat=1), which uploads bytes [lo, hi)
        of the params pages (end to end, as attach_params lays them) into the same bytes of their
        buffers (nothing when hi <= lo), then encodes every recorded dispatch into one pass, `repeat`
        times over, and submits it as one command buffer, without waiting. It raises for a lost
        device or errors reported since the last check (the unscoped steps' errors surface there)."""
        raise NotImplementedError

    async def replay(self, plan: Handle, *, timestamps: bool | str = False,
                     upload: tuple[int, int] = (0, 0)) -> list[int] | None:
        """Our addition: one step as `stepper` encodes it, but checked (inside error scopes in the
        browser) and waited for; timestamps=True: one pass per dispatch as in `submit`;
        timestamps="span": the step's one pass between two timestamps, returned as [begin, end] ns."""
        raise NotImplementedError

    # Our addition: a peer engine (ONNX Runtime Web) beside ours, in the browser only; a backend without one
    # says so by name.
    async def create_peer(self, *, module_url: str, options: dict, share_device: bool = True) -> Handle:
        """Our addition: the peer engine on this device (browser backend: web/peer/ort_web.mjs)."""
        raise NotImplementedError(f"{type(self).__name__}: the peer engine runs in the browser backend only")

    def peer_info(self, peer: Handle) -> dict:
        """Our addition: what the peer reports about itself (its build, flavour, device)."""
        raise NotImplementedError(f"{type(self).__name__}: the peer engine runs in the browser backend only")

    async def peer_generate(self, peer: Handle, prompt: list[int], decode: int, keep: bool | list[int]) -> dict:
        """Our addition: one greedy run of the peer: tokens, prefill_ms, decode_ms, the kept logits rows."""
        raise NotImplementedError(f"{type(self).__name__}: the peer engine runs in the browser backend only")

    async def release_peer(self, peer: Handle) -> None:
        """Our addition: the peer's sessions (and its own device, if it had one) released."""
        raise NotImplementedError(f"{type(self).__name__}: the peer engine runs in the browser backend only")

    def host_heap_bytes(self) -> int | None:
        """Our addition: the host's heap in bytes as the backend sees it (the page's JS heap where
        Chromium reports it; the native process's resident set), or None where it cannot tell."""
        return None

    def take_replay_stats(self) -> dict | None:
        """Our addition: where the steps spent host time since the last call, in ms as the backend
        measures it (upload_ms, encode_ms, finish_ms, submit_ms, steps, timer_step_us), or None
        where the backend does not measure."""
        return None

    async def on_submitted_work_done(self) -> None:
        """GPUQueue.onSubmittedWorkDone."""
        raise NotImplementedError

    def destroy(self, handle: Handle) -> None:
        """GPUBuffer.destroy for buffers; a plan's recording is released (what the backend keeps
        for it); other handles are left to garbage collection."""
        raise NotImplementedError

    def destroy_device(self) -> None:
        """GPUDevice.destroy: the device becomes lost with reason 'destroyed'."""
        raise NotImplementedError
