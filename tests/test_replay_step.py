"""Pure parts of the per-token step: the native encoding program and the params arena's dirty range."""

from __future__ import annotations

from py_runtime.gpu.native import encoding_program
from py_runtime.params import ParamArena


def test_program_skips_idle_dispatches_and_calls_already_made():
    handles = [("p0", "b0"), ("p0", "b0"), ("p1", "b1"), ("p0", "b2"), ("p0", "b2"), ("p2", "b3")]
    counts = [4, 1, 1,  2, 1, 1,  0, 1, 1,  3, 2, 1,  5, 1, 1,  1, 1, 0]
    assert encoding_program(handles, counts) == [
        ("p0", "b0", 4, 1, 1),
        (None, None, 2, 1, 1),      # same pipeline and bind group: dispatch only
        # ("p1", "b1") idles: nothing set, so the next dispatch compares against p0/b0
        (None, "b2", 3, 2, 1),
        (None, None, 5, 1, 1),
        # ("p2", "b3") idles (z = 0)
    ]


def test_program_after_an_idle_dispatch_sets_what_the_pass_lacks():
    handles = [("p0", "b0"), ("p1", "b1"), ("p1", "b1")]
    assert encoding_program(handles, [1, 1, 1, 0, 0, 0, 1, 1, 1]) == [("p0", "b0", 1, 1, 1), ("p1", "b1", 1, 1, 1)]


def test_arena_range_covers_every_write_once():
    arena = ParamArena(device=None, capacity=4096)
    assert arena.take_range() == (0, 0)
    first, second = arena.slot(4), arena.slot(16)
    arena.write(second, bytes(range(16)))
    arena.write(first, b"\x01\x02\x03")
    assert arena.take_range() == (first.offset, second.offset + 16)
    assert arena.take_range() == (0, 0)
    arena.write(second, bytes(range(16)))             # unchanged bytes: nothing to upload
    assert arena.take_range() == (0, 0)
    arena.write(first, b"\x09")
    assert arena.take_range() == (first.offset, first.offset + 4)      # rounded up to 4 bytes


def test_a_failed_step_hands_its_range_back():
    arena = ParamArena(device=None, capacity=4096)
    slot = arena.slot(16)
    arena.write(slot, b"\x07" * 16)
    lo, hi = arena.take_range()
    arena.mark_dirty(lo, hi)
    arena.mark_dirty(0, 0)                             # an empty range widens nothing
    assert arena.take_range() == (lo, hi)
