"""Pure parts of the per-token step: the native encoding program (the params arena's dirty range:
tests/test_params_arena.py)."""

from __future__ import annotations

from py_runtime.gpu.native import encoding_program


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
