"""The per-device runtime the ops and plans build on: caches, the params arena, tensors.

`Runtime.create(backend)` asks for a device; after a device loss, `rebuild()` asks for a new one,
drops every cache and gives each tensor a fresh buffer; plans then call `rebuild()` themselves
and tensor contents must be produced again (weights here are regenerated on the GPU).
"""

from __future__ import annotations

from .caches import BindGroupCache, PipelineCache
from .gpu import request_device
from .gpu.device import Device
from .params import ParamArena
from .tensors import TensorPool

__all__ = ["Runtime"]


class Runtime:
    def __init__(self, device: Device, *, backend: str | None = None, params_capacity: int = 1 << 16):
        self.backend = backend or device.adapter.backend
        self.params_capacity = params_capacity
        self._attach(device)
        self.tensors = TensorPool(device, on_release=self.bind_groups.forget_buffer)

    def _attach(self, device: Device) -> None:
        self.device = device
        self.pipelines = PipelineCache(device)
        self.bind_groups = BindGroupCache(device)
        self.params = ParamArena(device, capacity=self.params_capacity)
        self.max_workgroups_per_dim = int(device.adapter.limits.get("maxComputeWorkgroupsPerDimension", 65535))

    @classmethod
    async def create(cls, backend: str, **options) -> "Runtime":
        runtime = cls(await request_device(backend), backend=backend, **options)
        await runtime.params.allocate()
        return runtime

    async def rebuild(self) -> None:
        """A new device after a loss: caches and the params arena start over, tensors get new buffers."""
        device = await request_device(self.backend)
        self._attach(device)
        await self.params.allocate()
        await self.tensors.reallocate(device, on_release=self.bind_groups.forget_buffer)
