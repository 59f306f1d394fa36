"""GPU access: the device interface and its two backends, picked lazily at the leaves."""

from .device import (AdapterReport, AdapterUnavailable, BufferUsage, Device, DeviceLost, Dispatch, GpuError,
                     GpuOutOfMemory, GpuValidationError, Handle, KernelCompileError)

__all__ = ["AdapterReport", "AdapterUnavailable", "BufferUsage", "Device", "DeviceLost", "Dispatch", "GpuError",
           "GpuOutOfMemory", "GpuValidationError", "Handle", "KernelCompileError", "request_device"]


async def request_device(backend: str) -> Device:
    """'browser' (inside Pyodide) or 'native' (wgpu on the host)."""
    if backend == "browser":
        from .browser import request_browser_device
        return await request_browser_device()
    if backend == "native":
        from .native import request_native_device
        return await request_native_device()
    raise ValueError(f"unknown backend {backend!r}; expected 'browser' or 'native'")
