"""Plan.resize sizes again only the dispatches whose sizing read a live size that changed: a decode step
that moves `pos` re-sizes RoPE (and the cache write, attention), not the norms and linears."""

from __future__ import annotations

import asyncio
import struct
from dataclasses import replace

import pytest

from py_runtime.dispatch import POS, TOKENS, Op
from py_runtime.oneshot import tensor
from py_runtime.ops.norm import rms_norm
from py_runtime.ops.rope import cos_sin_table, inverse_frequencies, rope
from py_runtime.plan import Plan


def _counted(op: Op, calls: list) -> Op:
    def counting(sizing):
        def size(spec, live):
            calls.append(op.name)
            return sizing(spec, live)
        return size
    return Op(op.name, tuple(replace(call, sizing=counting(call.sizing)) for call in op.calls), op.decisions)


def test_only_dispatches_reading_a_changed_live_size_are_sized_again(native_runtime):
    async def main():
        runtime = native_runtime
        x = await tensor(runtime, "resize.x", (8, 2, 16))
        out = await tensor(runtime, "resize.out", (8, 2, 16))
        weight = await tensor(runtime, "resize.w", (16,))
        table = await tensor(runtime, "resize.table", (32, 8, 2),
                             data=cos_sin_table(inverse_frequencies(16, 10000.0), 32))
        calls = []
        norm = _counted(rms_norm(x=x, weight=weight, out=out, heads=2, eps=1e-5, adapter=runtime.device.adapter), calls)
        rotate = _counted(rope(src=out, dst=x, table=table, heads=2, head_dim=16, layout="half"), calls)
        plan = Plan(runtime, "resize", live={TOKENS: 8, POS: 0})
        await plan.add(norm)
        await plan.add(rotate)
        plan.record()
        calls.clear()
        plan.resize(pos=5)
        assert calls == [rotate.name]                           # the norm reads only the token count
        assert struct.unpack("<5I", plan.params_of(1)[:20])[3] == 5
        calls.clear()
        plan.resize(tokens=1, pos=6)
        assert sorted(calls) == sorted([norm.name, rotate.name]) and list(plan.workgroups[:3]) == [2, 1, 1]
        calls.clear()
        plan.resize(tokens=1, pos=6)                            # nothing changed: nothing sized
        assert calls == []
        with pytest.raises(ValueError, match="outside the 32-row cos/sin table"):
            plan.resize(pos=40)
        assert plan.live[POS] == 6 and struct.unpack("<5I", plan.params_of(1)[:20])[3] == 6
        plan.release()
        for t in (x, out, weight, table):
            runtime.tensors.release(t.name)

    asyncio.run(main())
