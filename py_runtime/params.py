"""The params arena: every op's uniform parameters, one 256-byte-aligned slot each, in pages.

A page is one uniform buffer and its host-side shadow, both of the arena's page size (64 KiB, 256
slots, unless the Runtime was given another). Slots fill the newest page; when it is full the
arena opens another, so no caller sizes the arena. A page is never reallocated or resized: bind
groups recorded against its buffer stay valid however far the arena grows, and a backend may keep
one view of each shadow across steps (the browser's JS half does).

Ops write their params into the shadows; a step uploads what changed, folded into the replay call
as two ints: the dirty range [lo, hi) over the pages laid end to end (byte a is byte a % page_size
of page a // page_size). The device uploads each page's part of it with one writeBuffer. The range
covers every plan's writes since the last step, as one arena-wide range did before pages: pages fill
in order, so a plan built in one go holds neighbouring pages and its range stays about its size.
Nothing is created per dispatch or per step; a new page costs one buffer, made while a plan builds.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from .gpu.device import BufferUsage, Device, Handle

__all__ = ["PAGE_SIZE", "ParamArena", "ParamSlot"]

SLOT_ALIGNMENT = 256        # minUniformBufferOffsetAlignment's default, which every adapter allows
PAGE_SIZE = 1 << 16         # 256 slots: a 16-layer decoder step's ~230 dispatches fit one page
_CLEAN = sys.maxsize        # the dirty range's lo when nothing is dirty
# COPY_SRC: the runtime-core check reads pages back to compare them with their shadows.
_PAGE_USAGE = BufferUsage.UNIFORM | BufferUsage.COPY_DST | BufferUsage.COPY_SRC


@dataclass(frozen=True)
class ParamSlot:
    page: int
    offset: int             # bytes into the page (a multiple of SLOT_ALIGNMENT)
    size: int


@dataclass(eq=False)
class _Page:
    shadow: bytearray
    buffer: Handle | None = None        # None until allocate() makes it (the page opened meanwhile)


class ParamArena:
    def __init__(self, device: Device, *, page_size: int = PAGE_SIZE):
        if page_size < SLOT_ALIGNMENT or page_size % SLOT_ALIGNMENT:
            raise ValueError(f"params page size must be a positive multiple of {SLOT_ALIGNMENT} bytes, "
                             f"got {page_size}")
        self.device = device
        self.page_size = page_size
        self.pages: list[_Page] = [_Page(bytearray(page_size))]
        self._allocated = 0                 # pages[:_allocated] have buffers attached to the device
        self._next = 0                      # the next free offset in the newest page
        self._free: dict[int, list[ParamSlot]] = {}      # released slots by size, reused first
        self._lo, self._hi = _CLEAN, 0      # the dirty byte range [lo, hi); empty when hi <= lo

    async def allocate(self) -> None:
        """Create and attach the buffers of the pages that have none yet (the first page at
        Runtime.create, later ones as plans grow the arena); each starts as a copy of its shadow."""
        for index in range(self._allocated, len(self.pages)):
            page = self.pages[index]
            page.buffer = await self.device.create_buffer(
                label=f"params.page{index}", size=self.page_size, usage=_PAGE_USAGE)
            self.device.write_buffer(page.buffer, page.shadow)
            self.device.attach_params(index, page.buffer, page.shadow)
            self._allocated = index + 1

    def slot(self, size: int) -> ParamSlot:
        size = max(16, (size + 15) // 16 * 16)      # uniform structs are 16-byte multiples
        if self._free.get(size):
            return self._free[size].pop()
        if size > self.page_size:
            raise ValueError(f"a {size}-byte params struct does not fit a {self.page_size}-byte params page")
        if self._next + size > self.page_size:
            self.pages.append(_Page(bytearray(self.page_size)))
            self._next = 0
        slot = ParamSlot(len(self.pages) - 1, self._next, size)
        self._next += (size + SLOT_ALIGNMENT - 1) // SLOT_ALIGNMENT * SLOT_ALIGNMENT
        return slot

    def release(self, slot: ParamSlot) -> None:
        """Hand a slot back (its plan is gone); the next slot of that size reuses it."""
        self._free.setdefault(slot.size, []).append(slot)

    async def binding(self, slot: ParamSlot) -> tuple[Handle, int, int]:
        """The slot as a bind group entry (its page's buffer, offset, size); a page opened since
        the last allocate() gets its buffer here, before anything can bind it."""
        if slot.page >= self._allocated:
            await self.allocate()
        return (self.pages[slot.page].buffer, slot.offset, slot.size)

    def write(self, slot: ParamSlot, data: bytes) -> None:
        if len(data) > slot.size:
            raise ValueError(f"{len(data)} bytes of params do not fit a {slot.size}-byte slot")
        shadow, end = self.pages[slot.page].shadow, slot.offset + len(data)
        if shadow[slot.offset:end] == data:
            return
        shadow[slot.offset:end] = data
        base = slot.page * self.page_size
        self.mark_dirty(base + slot.offset, base + end)

    def mark_dirty(self, lo: int, hi: int) -> None:
        """Widen the range the next step uploads (also how a failed step hands its range back)."""
        if hi <= lo:
            return
        if lo < self._lo:
            self._lo = lo
        if hi > self._hi:
            self._hi = hi

    def read(self, slot: ParamSlot) -> bytes:
        return bytes(self.pages[slot.page].shadow[slot.offset:slot.offset + slot.size])

    def take_range(self) -> tuple[int, int]:
        """The byte range [lo, hi) written since the last take, over the pages end to end, to upload
        into the same bytes of the page buffers (hi rounded up to writeBuffer's 4 bytes); (0, 0)
        when clean. Pages without a buffer yet are left out: allocate() copies their whole shadow."""
        lo, hi = self._lo, self._hi
        if hi <= lo:
            return (0, 0)
        self._lo, self._hi = _CLEAN, 0
        hi = min(hi, self._allocated * self.page_size)
        if hi <= lo:
            return (0, 0)
        return (lo, (hi + 3) & ~3)
