"""Named GPU tensors: shape, dtype and byte size, checked against the adapter's limits.

Storage is a flat buffer per tensor. f16 is stored packed, two per u32 (pack2x16float), since
shader-f16 is missing on several adapters (SwiftShader, Chromium on the H200); bool is one byte
per element, packed four per u32 word by the kernels that read it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .gpu.device import BufferUsage, Device, Handle

__all__ = ["DTYPE_BYTES", "Tensor", "TensorPool", "TensorTooLarge"]

DTYPE_BYTES = {"f32": 4, "i32": 4, "u32": 4, "f16": 2, "u8": 1, "bool": 1}
STORAGE = BufferUsage.STORAGE | BufferUsage.COPY_SRC | BufferUsage.COPY_DST


class TensorTooLarge(ValueError):
    pass


@dataclass(eq=False)
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str
    usage: int
    buffer: Handle | None = None

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes the buffer holds: element bytes rounded up to whole u32 words."""
        return max(4, -(-self.numel * DTYPE_BYTES[self.dtype] // 4) * 4)

    def __repr__(self) -> str:
        return f"Tensor({self.name!r}, {list(self.shape)}, {self.dtype})"


class TensorPool:
    def __init__(self, device: Device, *, on_release=None):
        self.device = device
        self._tensors: dict[str, Tensor] = {}
        self._on_release = on_release

    def __contains__(self, name: str) -> bool:
        return name in self._tensors

    @property
    def allocated_bytes(self) -> int:
        """The bytes of every live tensor's buffer (WebGPU offers no device-memory query: this is ours)."""
        return sum(tensor.nbytes for tensor in self._tensors.values())

    def get(self, name: str) -> Tensor:
        if name not in self._tensors:
            raise KeyError(f"no tensor named {name!r}; allocated: {', '.join(sorted(self._tensors)) or 'none'}")
        return self._tensors[name]

    def _check_limits(self, tensor: Tensor) -> None:
        limits = self.device.adapter.limits
        checks = [("maxBufferSize", limits.get("maxBufferSize"))]
        if tensor.usage & BufferUsage.STORAGE:
            checks.append(("maxStorageBufferBindingSize", limits.get("maxStorageBufferBindingSize")))
        info = self.device.adapter.info
        adapter = info.get("description") or info.get("device") or info.get("vendor") or "this adapter"
        for limit, value in checks:
            if value is not None and tensor.nbytes > value:
                raise TensorTooLarge(
                    f"tensor {tensor.name!r} {list(tensor.shape)} {tensor.dtype} needs {tensor.nbytes:,} bytes, "
                    f"above {limit} = {value:,} on {adapter}; split it or pick a smaller shape")

    async def allocate(self, name: str, shape, dtype: str = "f32", usage: int = STORAGE) -> Tensor:
        if dtype not in DTYPE_BYTES:
            raise ValueError(f"tensor {name!r}: unknown dtype {dtype!r}; known: {', '.join(DTYPE_BYTES)}")
        if name in self._tensors:
            raise ValueError(f"tensor {name!r} is already allocated")
        shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in shape):
            raise ValueError(f"tensor {name!r}: negative dimension in {list(shape)}")
        tensor = Tensor(name, shape, dtype, usage)
        self._check_limits(tensor)
        tensor.buffer = await self.device.create_buffer(label=name, size=tensor.nbytes, usage=usage)
        self._tensors[name] = tensor
        return tensor

    def release(self, name: str) -> None:
        tensor = self._tensors.pop(name)
        if self._on_release:
            self._on_release(tensor.buffer)
        self.device.destroy(tensor.buffer)

    def release_all(self) -> None:
        for name in list(self._tensors):
            self.release(name)

    async def reallocate(self, device: Device, *, on_release=None) -> None:
        """After a device loss: fresh (uninitialised) buffers for every tensor, same names and sizes;
        `on_release` replaces the release hook (the new device's bind-group cache)."""
        self.device = device
        self._on_release = on_release
        for tensor in self._tensors.values():
            tensor.buffer = await device.create_buffer(label=tensor.name, size=tensor.nbytes, usage=tensor.usage)
