"""Objects created once and reused across steps: pipelines and bind groups.

A decode step replays the same ~230 dispatches: creating either object per step would dominate
host time, so both are keyed by what determines them and created on first use only.
"""

from __future__ import annotations

from .gpu.device import Binding, Device, Handle
from .kernels import Kernel, kernel

__all__ = ["PipelineCache", "BindGroupCache"]


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


def _binding_key(entry: Binding) -> tuple:
    buffer, offset, size = entry if isinstance(entry, tuple) else (entry, 0, entry.size)
    return (buffer.uid, offset, size)


class BindGroupCache:
    def __init__(self, device: Device):
        self.device = device
        self._groups: dict[tuple, Handle] = {}
        self.created = 0

    async def get(self, *, label: str, pipeline: Handle, buffers: dict[int, Binding]) -> Handle:
        key = (pipeline.uid, tuple((b, _binding_key(e)) for b, e in sorted(buffers.items())))
        if key not in self._groups:
            self._groups[key] = await self.device.create_bind_group(label=label, pipeline=pipeline, buffers=buffers)
            self.created += 1
        return self._groups[key]

    def forget_buffer(self, buffer: Handle) -> None:
        """Drop bind groups that reference a destroyed buffer."""
        self._groups = {k: v for k, v in self._groups.items() if all(e[1][0] != buffer.uid for e in k[1])}
