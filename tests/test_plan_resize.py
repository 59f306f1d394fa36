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
from py_runtime.plan import Plan, PlanError


def _counted(op: Op, calls: list) -> Op:
    def counting(sizing):
        def size(spec, live):
            calls.append(op.name)
            return sizing(spec, live)
        return size
    return Op(op.name, tuple(replace(call, sizing=counting(call.sizing)) for call in op.calls), op.decisions)


async def _norm_then_rope(runtime, prefix: str, calls: list, norm_phase: str = "any"):
    """An RMSNorm (of the given phase) then RoPE over [8, 2, 16] rows, both counting their sizings."""
    x = await tensor(runtime, f"{prefix}.x", (8, 2, 16))
    out = await tensor(runtime, f"{prefix}.out", (8, 2, 16))
    weight = await tensor(runtime, f"{prefix}.w", (16,))
    table = await tensor(runtime, f"{prefix}.table", (32, 8, 2), data=cos_sin_table(inverse_frequencies(16, 10000.0), 32))
    norm = rms_norm(x=x, weight=weight, out=out, heads=2, eps=1e-5, adapter=runtime.device.adapter)
    norm = _counted(Op(norm.name, tuple(replace(c, phase=norm_phase) for c in norm.calls)), calls)
    rotate = _counted(rope(src=out, dst=x, table=table, heads=2, head_dim=16, layout="half"), calls)
    return norm, rotate, (x, out, weight, table)


def test_only_dispatches_reading_a_changed_live_size_are_sized_again(native_runtime):
    async def main():
        runtime, calls = native_runtime, []
        norm, rotate, tensors = await _norm_then_rope(runtime, "resize", calls)
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
        for t in tensors:
            runtime.tensors.release(t.name)

    asyncio.run(main())


def test_a_remembered_sizing_is_reused_and_a_dispatch_outside_its_phase_idles_unsized(native_runtime):
    async def main():
        runtime, calls = native_runtime, []
        prefill_norm, rotate, tensors = await _norm_then_rope(runtime, "memo", calls, norm_phase="prefill")
        plan = Plan(runtime, "memo", live={TOKENS: 8, POS: 0})
        await plan.add(prefill_norm)
        await plan.add(rotate)
        plan.record()
        prefill_params = plan.params_of(0)
        for pos in (5, 6):
            plan.resize(pos=pos)
        calls.clear()
        plan.resize(pos=5)
        assert calls == [] and struct.unpack("<5I", plan.params_of(1)[:20])[3] == 5    # remembered
        plan.resize(tokens=1, pos=7)
        assert calls == [rotate.name]                          # the prefill-only norm idles unsized
        assert list(plan.workgroups[:3]) == [0, 0, 0] and plan.params_of(0) == prefill_params
        assert plan.routes == rotate.routes and plan.active_dispatches == 1
        calls.clear()
        plan.resize(tokens=8, pos=0)                            # the recorded sizes: both remembered
        assert calls == [] and list(plan.workgroups[:3]) != [0, 0, 0] and plan.params_of(0) == prefill_params
        plan.resize(tokens=5)                                   # a new length: both sized
        assert sorted(calls) == sorted([prefill_norm.name, rotate.name]) and plan.params_of(0) != prefill_params
        plan.release()
        for t in tensors:
            runtime.tensors.release(t.name)

    asyncio.run(main())


@pytest.mark.parametrize("model", ["llama", "qwen3"])
def test_a_decoders_plan_sized_the_short_way_equals_every_dispatch_sized_afresh(native_runtime, model):
    """The phases the ops declare agree with their sizings (an idle-by-phase dispatch's sizing says IDLE),
    remembered sizings equal fresh ones, and the second layer's dispatches (added like the first's: never
    sized, bound to its params slots) see what their own sizing would give, at a prefill, a decode step,
    another prefill length and back."""
    from py_runtime.models.config import model_config
    from py_runtime.models.decoder import Decoder
    from py_runtime.plan import _sized

    async def main():
        decoder = await Decoder.create(native_runtime, model_config(model, 2), seed=3, max_prompt=40, capacity=64,
                                       policy="int8x")
        plan = decoder.plan
        try:
            followers = [entry for entry in plan._entries if entry.leader is not None]
            assert followers and all(entry.slot is plan._entries[entry.leader].slot for entry in followers)
            for tokens, pos in ((40, 0), (1, 40), (7, 0), (1, 7), (40, 0), (1, 41)):
                plan.resize(tokens=tokens, pos=pos)
                for index, entry in enumerate(plan._entries):
                    fresh, _ = _sized(entry.call, entry.spec, plan.live)
                    assert tuple(plan._sizings[index].workgroups) == tuple(fresh.workgroups), (entry.call.label, tokens)
                    assert tuple(plan.workgroups[3 * index:3 * index + 3]) == tuple(fresh.workgroups)
                    if any(fresh.workgroups):
                        assert plan.params_of(index) == fresh.params, (entry.call.label, tokens)
        finally:
            decoder.release()

    asyncio.run(main())


def test_an_op_added_like_one_it_does_not_size_as_is_refused(native_runtime):
    async def main():
        runtime = native_runtime
        tensors = [await tensor(runtime, f"like.{name}", shape) for name, shape in
                   (("x", (8, 2, 16)), ("out", (8, 2, 16)), ("w", (16,)), ("x4", (8, 4, 8)), ("out4", (8, 4, 8)),
                    ("w4", (8,)))]
        x, out, weight, x4, out4, weight4 = tensors
        adapter = runtime.device.adapter
        plan = Plan(runtime, "like", live={TOKENS: 8, POS: 0})
        await plan.add(rms_norm(x=x, weight=weight, out=out, heads=2, eps=1e-5, adapter=adapter), like="norm")
        await plan.add(rms_norm(x=out, weight=weight, out=x, heads=2, eps=1e-5, adapter=adapter), like="norm")
        assert plan._entries[1].leader == 0 and plan._entries[1].slot is plan._entries[0].slot
        with pytest.raises(PlanError, match="sizes otherwise"):
            await plan.add(rms_norm(x=x4, weight=weight4, out=out4, heads=4, eps=1e-5, adapter=adapter), like="norm")
        plan.release()
        for t in tensors:
            runtime.tensors.release(t.name)

    asyncio.run(main())
