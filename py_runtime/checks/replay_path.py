"""The per-token replay path computes what naive encoding computes, whatever changed between steps.

A replayed step no longer reads the plan from Python: the device keeps its own copy of the
workgroup counts (pushed when a resize changes them) and, in the browser, one long-lived view of
the params shadow (re-acquired when the wasm heap grows), and the encoders skip idle alternative
dispatches and repeated pipeline/bind-group sets. Each of those is a way to run stale counts or
stale params without any error, so each is checked here bit for bit against naive encoding (every
dispatch encoded from Python, idle ones included) or against what must be left untouched:

  waited      plan.replay() (checked, waited) == naive, after a resize from one element to all
              (the counts recorded cover one workgroup)
  step        plan.replay(wait=False) == naive
  shrink      resize to one element, then a step: element 0 as naive, the rest untouched (stale
              params, n = all, would write the first workgroup's 256 elements)
  grow_heap   resize back to all elements, grow the host heap, then a step == naive (stale counts
              would cover one workgroup, stale params one element)
  long        a chain of more dispatches than the browser submits as one command buffer (a prefill's
              length: browser_bridge.js submitCuts splits it), stepped == naive (one buffer)

Runs identically on both backends (the heap growth only matters in Pyodide); host_cost includes it.
"""

from __future__ import annotations

from dataclasses import replace

from ..ops.synth import UniformRange, fill_uniform
from ..ops.unary import unary
from ..dispatch import OpCall
from ..plan import Plan
from ..runtime import Runtime

__all__ = ["run_replay_path_checks", "idle_twin"]

_LENGTH = 4096              # 16 workgroups of 256 at full length, one at length 1
_OPS = ("tanh", "neg", "neg", "sigmoid", "abs", "abs", "silu", "sin", "hardswish", "round", "tanh")
_RANGE = UniformRange(scale_log2=-22, offset=-2.0)
_POISON = b"\xff" * (4 * _LENGTH)          # NaN bit patterns no op of the chain produces
# More running dispatches than browser_bridge.js SUBMIT_ABOVE (200): three command buffers in the browser.
_LONG = 241
_LONG_OPS = ("sin", "neg", "tanh", "neg")
# Enough to grow the wasm heap past any size it reached before (growth detaches old views).
_HEAP_BALLAST_BYTES = 512 << 20


def idle_twin(call: OpCall) -> OpCall:
    """The same kernel (hence the same pipeline) with zero workgroups: an alternative that idles,
    as a linear's GEMM does at decode. Its own params slot gives it its own bind group."""
    def sizing(spec, live):
        return replace(call.sizing(spec, live), workgroups=(0, 0, 0))

    return replace(call, label=f"idle {call.label}", sizing=sizing)


async def run_replay_path_checks(runtime: Runtime) -> dict:
    device = runtime.device
    a = await runtime.tensors.allocate("replay_path.a", (_LENGTH,))
    b = await runtime.tensors.allocate("replay_path.b", (_LENGTH,))
    seed = Plan(runtime, "replay_path.seed")
    await seed.add(fill_uniform(target=a, value_range=_RANGE, seed=11, stream=2))
    seed.record()
    chain = Plan(runtime, "replay_path.chain", live={"n": 1})
    for i, op in enumerate(_OPS):
        src, dst = (a, b) if i % 2 == 0 else (b, a)
        call = unary(op, src=src, dst=dst, length="n").call
        if i % 2:
            await chain.add(idle_twin(call))    # between two real dispatches of different pipelines
        await chain.add(call)
    chain.record()
    chain.resize(n=_LENGTH)     # recorded at one workgroup: every full-length step needs the pushed counts
    last = b if len(_OPS) % 2 else a

    async def fresh_inputs() -> bytes:
        """Seed a, poison b; returns the output tensor as it is before the chain runs. (Seeding
        first: its waited replay uploads every pending param, and the chain's own must not be.)"""
        await seed.replay()
        device.write_buffer(b.buffer, _POISON)
        return await device.read_buffer(last.buffer)

    async def stepped() -> bytes:
        await chain.replay(wait=False)
        await device.on_submitted_work_done()
        return await device.read_buffer(last.buffer)

    await seed.replay()
    await device.submit(chain.dispatches())
    naive = await device.read_buffer(last.buffer)
    checks = {}
    await fresh_inputs()
    await chain.replay()
    checks["waited"] = await device.read_buffer(last.buffer) == naive
    await fresh_inputs()
    checks["step"] = await stepped() == naive

    before = await fresh_inputs()
    chain.resize(n=1)
    checks["shrink"] = await stepped() == naive[:4] + before[4:]

    await fresh_inputs()
    chain.resize(n=_LENGTH)
    views_before = (device.take_replay_stats() or {}).get("param_views")
    # Natively there is no wasm heap: the check is then the same as step's, after a resize.
    ballast = bytearray(_HEAP_BALLAST_BYTES if runtime.backend == "browser" else 0)
    await chain.replay(wait=False)
    views_after = (device.take_replay_stats() or {}).get("param_views")
    del ballast
    await device.on_submitted_work_done()
    checks["grow_heap"] = await device.read_buffer(last.buffer) == naive

    long = Plan(runtime, "replay_path.long", live={"n": _LENGTH})
    for i in range(_LONG):
        src, dst = (a, b) if i % 2 == 0 else (b, a)
        await long.add(unary(_LONG_OPS[i % len(_LONG_OPS)], src=src, dst=dst, length="n").call)
    long.record()
    long_last = b if _LONG % 2 else a
    await fresh_inputs()
    await device.submit(long.dispatches())
    naive_long = await device.read_buffer(long_last.buffer)
    await fresh_inputs()
    await long.replay(wait=False)
    await device.on_submitted_work_done()
    checks["long"] = await device.read_buffer(long_last.buffer) == naive_long
    long.release()

    dispatches = len(chain)
    idle = sum(1 for i in range(dispatches) if not any(chain.workgroups[3 * i:3 * i + 3]))
    chain.release()
    seed.release()
    runtime.tensors.release(a.name)
    runtime.tensors.release(b.name)
    return {
        "dispatches": dispatches, "idle_dispatches": idle, "length": _LENGTH, "checks": checks,
        # Browser only: how often JS (re)acquired its view of the params shadow, before and after
        # the step that followed the ballast; a larger count shows the heap grew and was handled.
        "param_views": [views_before, views_after],
        "heap_view_renewed": None if views_before is None else views_after > views_before,
        "passed": all(checks.values()),
    }
