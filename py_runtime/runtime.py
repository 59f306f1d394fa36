"""The per-device runtime the ops and plans build on: caches, the params arena, tensors.

`Runtime.create(backend)` asks for a device. The params arena grows by pages as plans take slots,
so nothing is sized up front (`params_page_size=` sets the pages' size); `tuning=` names the tuning table
every route takes its variants from, in place of the one the adapter's info matches. After a device loss,
`rebuild()` asks for a new device, drops every cache and the arena's pages, and gives each tensor a
fresh buffer; plans then call `rebuild()` themselves and tensor contents must be produced again
(weights here are regenerated on the GPU).
"""

from __future__ import annotations

from dataclasses import replace

from .caches import BindGroupCache, PipelineCache
from .gpu import request_device
from .gpu.device import NAMED_TUNING, Device
from .params import PAGE_SIZE, ParamArena
from .tensors import TensorPool

__all__ = ["Runtime"]


class Runtime:
    def __init__(self, device: Device, *, backend: str | None = None, params_page_size: int = PAGE_SIZE,
                 tuning: str | None = None):
        self.backend = backend or device.adapter.backend
        self.params_page_size = params_page_size
        self.tuning = tuning
        self._attach(device)
        self.tensors = TensorPool(device, on_release=self.bind_groups.forget_buffer)

    def _attach(self, device: Device) -> None:
        if self.tuning is not None:
            device.adapter = replace(device.adapter, info={**device.adapter.info, NAMED_TUNING: self.tuning})
        self.device = device
        self.pipelines = PipelineCache(device)
        self.bind_groups = BindGroupCache(device)
        self.params = ParamArena(device, page_size=self.params_page_size)
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
