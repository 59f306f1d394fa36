"""Runtime-core checks, run identically in the page and natively: caching, resize, profiler rows,
route attestation, a plan larger than one params page, and every error path. Numbers that need an oracle (linear outputs) go to the
sink; the host recomputes them in float64 from the synthetic inputs' numpy twin.
"""

from __future__ import annotations

import asyncio
import time

from ..dispatch import TOKENS
from ..gpu.device import BufferUsage, DeviceLost, KernelCompileError
from ..kernels import Kernel
from ..ops.linear import linear_f32
from ..ops.synth import UniformRange, fill_uniform
from ..ops.unary import unary
from ..params import SLOT_ALIGNMENT
from ..plan import Plan, PlanError
from ..routes import routes_from_mask
from ..runtime import Runtime
from ..tensors import TensorTooLarge
from .outcome import verdict

__all__ = ["LINEAR_SHAPE", "LINEAR_RANGE", "LINEAR_STREAMS", "run_runtime_checks"]

# Prefill M rows, then decode 1 row, through one plan: x [M, K], w [N, K], bias [N].
LINEAR_SHAPE = {"prefill_rows": 7, "k": 96, "n": 80}
LINEAR_RANGE = UniformRange(scale_log2=-23, offset=-1.0)     # [-1, 1)
LINEAR_STREAMS = {"x": 101, "w": 102, "bias": 103}
_BROKEN_WGSL = "@compute @workgroup_size(1)\nfn main() {\n  let x: f32 = undefined_name;\n}\n"


async def _error_of(awaitable_or_call) -> dict | None:
    """{type, message} of what the call raised, or None if it did not raise."""
    try:
        result = awaitable_or_call()
        if asyncio.iscoroutine(result):
            await result
    except Exception as error:  # the point is to record exactly what was raised
        return {"type": type(error).__name__, "message": str(error)}
    return None


async def _linear_calls(runtime: Runtime, seed: int) -> tuple[list, object]:
    """Fill x, w, bias with synthetic values, then out = x @ w.T + bias over the live `rows`."""
    m, k, n = LINEAR_SHAPE["prefill_rows"], LINEAR_SHAPE["k"], LINEAR_SHAPE["n"]
    tensors = runtime.tensors
    x = await tensors.allocate("core.x", (m, k))
    w = await tensors.allocate("core.w", (n, k))
    bias = await tensors.allocate("core.bias", (n,))
    out = await tensors.allocate("core.out", (m, n))
    calls = [fill_uniform(target=t, value_range=LINEAR_RANGE, seed=seed, stream=LINEAR_STREAMS[role])
             for t, role in ((x, "x"), (w, "w"), (bias, "bias"))]
    calls.append(linear_f32(x=x, w=w, bias=bias, out=out, tokens=TOKENS))
    return calls, out


async def _plan_of(runtime: Runtime, label: str, calls: list) -> Plan:
    plan = Plan(runtime, label, live={TOKENS: LINEAR_SHAPE["prefill_rows"]})
    for call in calls:
        await plan.add(call)
    plan.record()
    return plan


async def _read_rows(runtime: Runtime, out, rows: int) -> bytes:
    return await runtime.device.read_buffer(out.buffer, 4 * rows * LINEAR_SHAPE["n"])


async def _wait_lost(device, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while device.lost is None and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return device.lost is not None


async def _params_pages_check(runtime: Runtime) -> dict:
    """A plan with more dispatches than one params page holds: a page's worth of neg (a <-> b)
    then sin (a -> c), recorded at n = 1 and resized to all elements, so one step must upload the
    new lengths into pages opened while the plan was built (their buffers hold n = 1 until then).
    After that step every page's buffer equals its shadow, c has no poison left (the last
    dispatch, on the newest page, ran at full length), and c equals naive encoding's, as it does
    after the step repeated three times in one submit."""
    device, arena, length = runtime.device, runtime.params, 1024
    poison = b"\xff" * (4 * length)
    a, b, c = [await runtime.tensors.allocate(f"core.pages.{name}", (length,)) for name in "abc"]
    seed = Plan(runtime, "core.pages.seed")
    await seed.add(fill_uniform(target=a, value_range=LINEAR_RANGE, seed=5, stream=1))
    seed.record()
    pages_before = len(arena.pages)
    chain = Plan(runtime, "core.pages.chain", live={"n": 1})
    for i in range(arena.page_size // SLOT_ALIGNMENT):       # an even count: a holds the input again
        src, dst = (a, b) if i % 2 == 0 else (b, a)
        await chain.add(unary("neg", src=src, dst=dst, length="n"))
    await chain.add(unary("sin", src=a, dst=c, length="n"))
    chain.record()
    chain.resize(n=length)

    async def fresh_output(step) -> bytes:
        await seed.replay()
        device.write_buffer(c.buffer, poison)
        await step()
        await device.on_submitted_work_done()
        return await device.read_buffer(c.buffer)

    stepped = await fresh_output(lambda: chain.replay(wait=False))
    buffers_match = [await device.read_buffer(page.buffer) == bytes(page.shadow) for page in arena.pages]
    naive = await fresh_output(lambda: device.submit(chain.dispatches()))
    # The step three times in one submit, as decode steps go: more running dispatches than the browser
    # bridge keeps in one command buffer (it cuts a long step), so the repeat must not be cut.
    repeated = await fresh_output(lambda: chain.replay(wait=False, repeat=3))
    poisoned = sum(stepped[i:i + 4] == b"\xff" * 4 for i in range(0, len(stepped), 4))
    dispatches = len(chain)
    chain.release()
    seed.release()
    for tensor in (a, b, c):
        runtime.tensors.release(tensor.name)
    checks = {"grew": len(arena.pages) > pages_before, "page_buffers_match_shadows": all(buffers_match),
              "no_poison_left": poisoned == 0, "step_equals_naive": stepped == naive,
              "repeated_step_equals_naive": repeated == naive}
    return {"dispatches": dispatches, "page_size": arena.page_size,
            "pages": [pages_before, len(arena.pages)], "poisoned_elements": poisoned, "checks": checks,
            "passed": all(checks.values())}


async def run_runtime_checks(runtime: Runtime, *, seed: int = 77, sink=None) -> dict:
    report: dict = {"suite": "runtime", "adapter": runtime.device.adapter.to_json(), "seed": seed,
                    "linear_shape": LINEAR_SHAPE}
    m = LINEAR_SHAPE["prefill_rows"]
    calls, out = await _linear_calls(runtime, seed)
    plan = await _plan_of(runtime, "core.linear", calls)

    # Caching: a second step creates nothing; a second plan over the same kernels creates no
    # pipeline (its bind groups differ: each plan owns its params slots).
    first = await plan.replay()
    created = [runtime.pipelines.created, runtime.bind_groups.created]
    second = await plan.replay()
    after_second = [runtime.pipelines.created, runtime.bind_groups.created]
    twin = await _plan_of(runtime, "core.linear.twin", calls)
    twin.release()
    report["caching"] = {"after_first_step": created, "after_second_step": after_second,
                         "after_second_plan": [runtime.pipelines.created, runtime.bind_groups.created]}
    prefill = await _read_rows(runtime, out, m)

    # Resize: decode one row through the same plan; has_bias must survive.
    linear_index = len(plan) - 1
    params_prefill = plan.params_of(linear_index)
    plan.resize(tokens=1)
    await plan.replay()
    decode = await _read_rows(runtime, out, 1)
    report["resize"] = {"params_prefill": list(params_prefill), "params_decode": list(plan.params_of(linear_index)),
                        "workgroups_decode": list(plan.workgroups[3 * linear_index:3 * linear_index + 3])}
    if sink:
        await sink("linear_prefill.f32", prefill)
        await sink("linear_decode.f32", decode)

    # Profiler rows and attestation.
    profiled = "timestamp-query" in runtime.device.adapter.device_features
    execution = await plan.replay(profile=profiled)
    span = await plan.replay(profile="span") if profiled else None      # the same plan, one pass, two stamps
    report["profile"] = {"available": profiled, "quantized": execution.quantized,
                         "rows": [r.to_json() for r in execution.rows], "host_ns": execution.host_ns,
                         "span_ns": span.span_ns if span else None, "span_rows": len(span.rows) if span else None,
                         "span_routes": list(span.routes) if span else None}
    report["attestation"] = {"routes": list(execution.routes), "mask": execution.route_mask,
                             "mask_routes": routes_from_mask(execution.route_mask),
                             "attention_conflicts": execution.attention_conflicts,
                             "first_step_routes": list(first.routes), "second_step_mask": second.route_mask}

    report["params_pages"] = await _params_pages_check(runtime)

    # Error paths: each must raise a clear, named error.
    device = runtime.device
    broken = Kernel(name="broken_kernel", source="(inline test kernel)", code=_BROKEN_WGSL, entry_point="main",
                    workgroup_size=(1, 1, 1), bindings=(), template_values={}, params_layout=None, workgroup_bytes=0,
                    tier="shipped", sha256="")
    limit = device.adapter.limits.get("maxStorageBufferBindingSize", 1 << 27)
    copy_only = await device.create_buffer(label="core.copy_only", size=64, usage=BufferUsage.COPY_DST)
    _, linear_pipeline = await runtime.pipelines.get("linear_f32")
    errors = {
        "compile": await _error_of(lambda: device.create_compute_pipeline(kernel=broken)),
        "validation": await _error_of(lambda: device.create_bind_group(
            label="core.bad_binding", pipeline=linear_pipeline, buffers={i: copy_only for i in range(4)})),
        "too_large": await _error_of(lambda: runtime.tensors.allocate("core.huge", (limit // 4 + 1,))),
        "unknown_live_size": await _error_of(lambda: plan.resize(seq=3)),
        "rows_beyond_tensor": await _error_of(lambda: plan.resize(tokens=m + 1)),
        "replay_unrecorded": await _error_of(lambda: Plan(runtime, "core.empty").replay()),
        "unknown_profile_mode": await _error_of(lambda: plan.replay(profile="per-kernel")),
    }
    compile_error = errors["compile"]
    report["errors"] = errors
    report["error_types"] = {
        "compile": KernelCompileError.__name__, "validation": "GpuValidationError",
        "too_large": TensorTooLarge.__name__, "unknown_live_size": PlanError.__name__,
        "rows_beyond_tensor": "ValueError", "replay_unrecorded": PlanError.__name__,
        "unknown_profile_mode": PlanError.__name__,
    }
    report["compile_error_names_kernel"] = bool(compile_error and "broken_kernel" in compile_error["message"])
    device.destroy(copy_only)
    plan.resize(tokens=1)

    # Device loss: reported with its reason, then recovered by rebuilding the device and the plan.
    device.destroy_device()
    noticed = await _wait_lost(device)
    lost_error = await _error_of(lambda: plan.replay())
    await runtime.rebuild()
    await plan.rebuild()
    plan.resize(tokens=m)
    await plan.replay()
    recovered = await _read_rows(runtime, out, m)
    report["device_loss"] = {"noticed": noticed, "error": lost_error, "reason": device.lost[0] if device.lost else None,
                             "error_is_device_lost": bool(lost_error and lost_error["type"] == DeviceLost.__name__),
                             "recovered_adapter": runtime.device.adapter.info}
    if sink:
        await sink("linear_recovered.f32", recovered)
    plan.release()
    runtime.tensors.release_all()
    caching = report["caching"]
    report["result"] = verdict(caching["after_first_step"] == caching["after_second_step"]
                               and caching["after_second_plan"][0] == caching["after_first_step"][0]
                               and all(errors.values()) and report["device_loss"]["error_is_device_lost"]
                               and report["params_pages"]["passed"])
    return report
