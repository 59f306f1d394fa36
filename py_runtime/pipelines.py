"""Pipelines created once per (kernel, override constants) and reused."""

from __future__ import annotations

from .gpu.device import Device, Handle
from .kernels import Kernel, kernel

__all__ = ["PipelineCache"]


class PipelineCache:
    def __init__(self, device: Device):
        self.device = device
        self._pipelines: dict[tuple, Handle] = {}
        self.created = 0        # pipelines actually created (tests assert it stays put on reuse)

    async def get(self, name: str, constants: dict | None = None) -> tuple[Kernel, Handle]:
        spec = kernel(name)
        key = (name, tuple(sorted((constants or {}).items())))
        if key not in self._pipelines:
            self._pipelines[key] = await self.device.create_compute_pipeline(kernel=spec, constants=constants)
            self.created += 1
        return spec, self._pipelines[key]
