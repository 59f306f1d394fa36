"""The one small device interface both backends implement (browser: navigator.gpu; native: wgpu).

Method names follow the WebGPU spec in snake_case; methods that are not in the spec are our
additions and say so. Handles returned by a backend are opaque `Handle`s: no JsProxy or wgpu
object escapes a backend, so the code above this interface is identical in both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "AdapterReport", "BufferUsage", "Device", "Dispatch", "GpuError", "AdapterUnavailable",
    "KernelCompileError", "GpuValidationError", "GpuOutOfMemory", "Handle", "WANTED_FEATURES",
    "WANTED_LIMITS",
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


# Optional features the runtime asks for when the adapter has them (WebGPU spellings).
WANTED_FEATURES = ("timestamp-query", "subgroups", "shader-f16")
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


@dataclass(frozen=True)
class Handle:
    """An opaque backend object (buffer, pipeline, bind group) with a label for error messages."""

    kind: str
    label: str
    size: int = 0
    raw: Any = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, kw_only=True)
class AdapterReport:
    backend: str                # "browser" or "native"
    info: dict                  # GPUAdapterInfo fields (vendor, architecture, device, description, ...)
    features: tuple[str, ...]   # adapter features, WebGPU spellings, sorted
    limits: dict                # the WANTED_LIMITS of the adapter
    device_features: tuple[str, ...]  # what the device was created with

    def to_json(self) -> dict:
        return {"backend": self.backend, "info": self.info, "features": list(self.features),
                "limits": self.limits, "device_features": list(self.device_features)}


@dataclass(frozen=True, kw_only=True)
class Dispatch:
    label: str
    pipeline: Handle
    bind_group: Handle
    workgroups: tuple[int, int, int]


class Device:
    """Interface; see the browser and native backends."""

    adapter: AdapterReport

    def create_buffer(self, *, label: str, size: int, usage: int) -> Handle:
        raise NotImplementedError

    def write_buffer(self, buffer: Handle, data: bytes | bytearray | memoryview, offset: int = 0) -> None:
        """GPUQueue.writeBuffer."""
        raise NotImplementedError

    async def read_buffer(self, buffer: Handle, size: int | None = None) -> bytes:
        """Our addition: copy `size` bytes (default: all) to a staging buffer, map it, copy out."""
        raise NotImplementedError

    async def create_compute_pipeline(self, *, kernel, constants: dict | None = None) -> Handle:
        """createShaderModule + createComputePipelineAsync, inside error scopes; compilation
        errors raise KernelCompileError with line and column."""
        raise NotImplementedError

    def create_bind_group(self, *, label: str, pipeline: Handle, buffers: dict[int, Handle]) -> Handle:
        """Bind group 0 of `pipeline` from {binding: buffer}; uniform or storage follows the layout."""
        raise NotImplementedError

    async def submit(self, dispatches: list[Dispatch], *, timestamps: bool = False) -> list[int] | None:
        """Our addition: encode `dispatches` in order into one command encoder and submit it.

        Without timestamps: one compute pass. With timestamps (needs 'timestamp-query'): one pass
        per dispatch writing begin/end timestamps 2i and 2i+1; returns those 2N values in ns.
        Waits for the GPU to finish either way.
        """
        raise NotImplementedError

    def destroy(self, handle: Handle) -> None:
        """GPUBuffer.destroy for buffers; other handles are left to garbage collection."""
        raise NotImplementedError
