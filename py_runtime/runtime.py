"""The per-device runtime state the ops build on: pipelines, parameter buffers, limits."""

from __future__ import annotations

from .gpu.device import BufferUsage, Device, Handle
from .pipelines import PipelineCache

__all__ = ["Runtime"]


class Runtime:
    def __init__(self, device: Device):
        self.device = device
        self.pipelines = PipelineCache(device)
        self.max_workgroups_per_dim = int(device.adapter.limits.get("maxComputeWorkgroupsPerDimension", 65535))
        self._uniforms: list[Handle] = []

    def uniform(self, label: str, data: bytes) -> Handle:
        """A uniform buffer holding `data` (padded to 16 bytes, as uniform layouts require)."""
        padded = bytes(data) + bytes(-len(data) % 16)
        buffer = self.device.create_buffer(label=label, size=len(padded), usage=BufferUsage.UNIFORM | BufferUsage.COPY_DST)
        self.device.write_buffer(buffer, padded)
        self._uniforms.append(buffer)
        return buffer

    def release_uniforms(self) -> None:
        for buffer in self._uniforms:
            self.device.destroy(buffer)
        self._uniforms.clear()
