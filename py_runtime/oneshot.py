"""One op, once: what a kernel engineer types in a notebook or a test.

    x = await tensor(runtime, "x", (1, 2048), data=x_bytes)
    out = await tensor(runtime, "out", (1, 8192))
    result = await run_op(runtime, q4_linear(x=x, weight=w, out=out, adapter=runtime.device.adapter),
                          read=[out], tokens=1)
    result["out"]        # the bytes of out after the dispatch

`run_op` records the op in a plan of its own, runs it once at the given live sizes (waiting, inside
error scopes), reads back the tensors asked for and releases the plan. It is the slow path by design:
a model or a benchmark records its plans once and replays them.
"""

from __future__ import annotations

from typing import Iterable

from .dispatch import Op, OpCall
from .plan import Plan
from .tensors import DTYPE_BYTES, Tensor

__all__ = ["tensor", "run_op"]


async def tensor(runtime, name: str, shape, *, data: bytes | bytearray | memoryview | None = None,
                 dtype: str = "f32") -> Tensor:
    """A new tensor of the runtime's pool, filled with `data` (little-endian bytes of exactly its size)."""
    t = await runtime.tensors.allocate(name, shape, dtype)
    if data is not None:
        expected = t.numel * DTYPE_BYTES[dtype]
        if len(data) != expected:
            runtime.tensors.release(name)
            raise ValueError(f"tensor {name!r} {list(t.shape)} {dtype} needs {expected} bytes, got {len(data)}")
        padded = bytes(data) + bytes(t.nbytes - expected)      # buffers are whole u32 words
        runtime.device.write_buffer(t.buffer, padded)
    return t


async def run_op(runtime, *ops: Op | OpCall, read: Iterable[Tensor] = (), **live: int) -> dict[str, bytes]:
    """Run the ops once, in order, at the live sizes given (e.g. tokens=7); the bytes of each `read`
    tensor (its elements, without the word padding), by tensor name."""
    plan = Plan(runtime, "run_op", live=live)
    try:
        for op in ops:
            await plan.add(op)
        plan.record()
        await plan.replay()
        return {t.name: (await runtime.device.read_buffer(t.buffer, t.nbytes))[:t.numel * DTYPE_BYTES[t.dtype]]
                for t in read}
    finally:
        plan.release()
