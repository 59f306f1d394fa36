"""The params arena: every op's uniform parameters live in one buffer, one 256-byte slot each.

Ops write their params into a host-side shadow; a step uploads the dirty range with one
writeBuffer (folded into the replay call). Nothing is created per dispatch or per step.

The shadow is a bytearray of fixed size, never resized (writes assign same-length slices), so a
backend may keep one view of it across steps (the browser's JS half does: the per-step call then
carries only the dirty range's two offsets). The device learns of it through attach_params.
"""

from __future__ import annotations

from dataclasses import dataclass

from .gpu.device import BufferUsage, Device, Handle

__all__ = ["ParamArena", "ParamSlot"]

SLOT_ALIGNMENT = 256        # minUniformBufferOffsetAlignment's default, which every adapter allows


@dataclass(frozen=True)
class ParamSlot:
    offset: int
    size: int


class ParamArena:
    def __init__(self, device: Device, *, capacity: int = 1 << 16):
        self.device = device
        self.capacity = capacity
        self.shadow = bytearray(capacity)
        self.buffer: Handle | None = None
        self._next = 0
        self._free: dict[int, list[ParamSlot]] = {}      # released slots by size, reused first
        self._lo, self._hi = capacity, 0                  # the dirty byte range [lo, hi); empty when hi <= lo

    async def allocate(self) -> None:
        self.buffer = await self.device.create_buffer(
            label="params.arena", size=self.capacity, usage=BufferUsage.UNIFORM | BufferUsage.COPY_DST)
        self.device.attach_params(self.buffer, self.shadow)

    def slot(self, size: int) -> ParamSlot:
        size = max(16, (size + 15) // 16 * 16)      # uniform structs are 16-byte multiples
        if self._free.get(size):
            return self._free[size].pop()
        if self._next + size > self.capacity:
            raise MemoryError(f"params arena full: {self.capacity} bytes hold {self._next // SLOT_ALIGNMENT} slots; "
                              f"create the Runtime with a larger params_capacity")
        slot = ParamSlot(self._next, size)
        self._next += (size + SLOT_ALIGNMENT - 1) // SLOT_ALIGNMENT * SLOT_ALIGNMENT
        return slot

    def release(self, slot: ParamSlot) -> None:
        """Hand a slot back (its plan is gone); the next slot of that size reuses it."""
        self._free.setdefault(slot.size, []).append(slot)

    def binding(self, slot: ParamSlot) -> tuple[Handle, int, int]:
        return (self.buffer, slot.offset, slot.size)

    def write(self, slot: ParamSlot, data: bytes) -> None:
        if len(data) > slot.size:
            raise ValueError(f"{len(data)} bytes of params do not fit a {slot.size}-byte slot")
        end = slot.offset + len(data)
        if self.shadow[slot.offset:end] == data:
            return
        self.shadow[slot.offset:end] = data
        self.mark_dirty(slot.offset, end)

    def mark_dirty(self, lo: int, hi: int) -> None:
        """Widen the range the next step uploads (also how a failed step hands its range back)."""
        if hi <= lo:
            return
        if lo < self._lo:
            self._lo = lo
        if hi > self._hi:
            self._hi = hi

    def read(self, slot: ParamSlot) -> bytes:
        return bytes(self.shadow[slot.offset:slot.offset + slot.size])

    def take_range(self) -> tuple[int, int]:
        """The byte range [lo, hi) of the shadow written since the last take, to upload into the
        same range of the buffer (hi rounded up to writeBuffer's 4 bytes); (0, 0) when clean."""
        lo, hi = self._lo, self._hi
        if hi <= lo:
            return (0, 0)
        self._lo, self._hi = self.capacity, 0
        return (lo, (hi + 3) & ~3)
