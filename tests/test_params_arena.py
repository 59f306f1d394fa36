"""The params arena's host logic: slots across pages, bindings that survive growth, and the dirty
range a step uploads (over the pages end to end), with the native backend's split of that range
into one write per page. The GPU side of the same runs in py_runtime/checks/runtime_core.py."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from py_runtime.gpu.device import Handle
from py_runtime.gpu.native import NativeDevice
from py_runtime.params import SLOT_ALIGNMENT, ParamArena

PAGE = 4 * SLOT_ALIGNMENT       # four slots a page


class _Recorder:
    """The three device calls the arena makes, recorded."""

    def __init__(self):
        self.calls = []

    async def create_buffer(self, *, label, size, usage):
        self.calls.append(("create", label, size))
        return Handle("buffer", label, size)

    def write_buffer(self, buffer, data, offset=0):
        self.calls.append(("write", buffer.label, offset, bytes(data)))

    def attach_params(self, page, buffer, shadow):
        self.calls.append(("attach", page, buffer.label, len(shadow)))


def _arena() -> tuple[ParamArena, _Recorder]:
    device = _Recorder()
    arena = ParamArena(device, page_size=PAGE)
    asyncio.run(arena.allocate())
    return arena, device


def _bind(arena: ParamArena, slot):
    return asyncio.run(arena.binding(slot))


def test_slots_fill_a_page_then_open_the_next():
    arena, device = _arena()
    slots = [arena.slot(16) for _ in range(6)]
    assert [(s.page, s.offset) for s in slots] == [(0, 0), (0, 256), (0, 512), (0, 768), (1, 0), (1, 256)]
    assert len(arena.pages) == 2
    assert device.calls == [("create", "params.page0", PAGE), ("write", "params.page0", 0, bytes(PAGE)),
                            ("attach", 0, "params.page0", PAGE)]


def test_growth_keeps_every_earlier_binding_valid():
    arena, device = _arena()
    first = arena.slot(16)
    before = _bind(arena, first)
    later = [arena.slot(32) for _ in range(9)]          # pages 0, 1 and 2
    bindings = [_bind(arena, s) for s in later]
    assert _bind(arena, first) == before and before[0] is arena.pages[0].buffer
    assert {b[0].label for b in bindings} == {"params.page0", "params.page1", "params.page2"}
    assert [b[1:] for b in bindings[3:5]] == [(0, 32), (256, 32)]
    assert [c for c in device.calls if c[0] == "attach"] == [("attach", i, f"params.page{i}", PAGE) for i in range(3)]


def test_a_new_page_starts_as_a_copy_of_its_shadow():
    arena, device = _arena()
    slots = [arena.slot(16) for _ in range(5)]
    arena.write(slots[4], b"\x05" * 16)                  # page 1 has no buffer yet
    assert arena.take_range() == (0, 0)                  # nothing to upload into: allocate copies it
    _bind(arena, slots[4])
    assert ("write", "params.page1", 0, b"\x05" * 16 + bytes(PAGE - 16)) in device.calls
    assert arena.take_range() == (0, 0)


def test_range_runs_over_the_pages_end_to_end():
    arena, _ = _arena()
    slots = [arena.slot(16) for _ in range(12)]         # pages 0, 1, 2
    for slot in slots:
        _bind(arena, slot)
    arena.write(slots[9], b"\x09" * 16)                 # page 2, offset 256
    arena.write(slots[1], b"\x01\x02\x03")               # page 0, offset 256
    assert arena.take_range() == (256, 2 * PAGE + 256 + 16)
    assert arena.take_range() == (0, 0)
    arena.write(slots[9], b"\x09" * 16)                 # unchanged bytes: nothing to upload
    assert arena.take_range() == (0, 0)
    arena.write(slots[5], b"\x07")                       # page 1, offset 256: hi rounded up to 4 bytes
    assert arena.take_range() == (PAGE + 256, PAGE + 260)
    assert arena.read(slots[9]) == b"\x09" * 16 and arena.read(slots[5])[:2] == b"\x07\x00"


def test_a_failed_step_hands_its_range_back():
    arena, _ = _arena()
    slot = arena.slot(16)
    arena.write(slot, b"\x07" * 16)
    lo, hi = arena.take_range()
    arena.mark_dirty(lo, hi)
    arena.mark_dirty(0, 0)                               # an empty range widens nothing
    assert arena.take_range() == (lo, hi)


def test_released_slots_are_reused_before_the_arena_grows():
    arena, _ = _arena()
    slots = [arena.slot(48) for _ in range(4)]
    arena.release(slots[2])
    assert arena.slot(40) == slots[2]                    # 40 rounds up to the same 48-byte struct
    assert len(arena.pages) == 1
    assert arena.slot(48).page == 1


def test_sizes_that_cannot_work_are_refused():
    arena, _ = _arena()
    with pytest.raises(ValueError, match="does not fit a 1024-byte params page"):
        arena.slot(PAGE + 16)
    with pytest.raises(ValueError, match="multiple of 256"):
        ParamArena(None, page_size=1000)


def test_native_upload_writes_each_page_its_part_of_the_range():
    writes = []
    pages = [(f"buffer{i}", i * 10_000) for i in range(4)]      # (buffer, "pointer" to its shadow)
    device = SimpleNamespace(_device=SimpleNamespace(queue=SimpleNamespace(_internal="queue")),
                             _params=pages, _page_size=PAGE)

    def upload(lo, hi):
        writes.clear()
        NativeDevice._upload_params(device, lambda *call: writes.append(call), lo, hi)
        return list(writes)

    assert upload(256, 272) == [("queue", "buffer0", 256, 256, 16)]
    assert upload(PAGE - 16, 2 * PAGE + 32) == [("queue", "buffer0", PAGE - 16, PAGE - 16, 16),
                                                ("queue", "buffer1", 0, 10_000, PAGE),
                                                ("queue", "buffer2", 0, 20_000, 32)]
    assert upload(3 * PAGE, 4 * PAGE) == [("queue", "buffer3", 0, 30_000, PAGE)]
