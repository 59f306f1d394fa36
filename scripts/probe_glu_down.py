"""An experiment (issue 14, docs/PERFORMANCE.md session 30): a decode layer's gate/up + SwiGLU and down as ONE
dispatch (q4gsw_gemv_i8x_glu_down_norm_sr_sg_r2u1w16: each GLU workgroup multiplies its 32 outputs by their
columns of down and adds the products into a 64-bit fixed-point accumulator with storage atomics), against the
two dispatches a decode step runs now (the _norm glu_q8 GEMV, then down on its int8 output, adding into the
residual). Natively; bench only, nothing routes to it.

  1. once: the fused accumulator, read back, against the pair's down product (h after - h before): the same
     int8 activations and weights, so only the order of the f32 sums differs (checked to 1e-4 of the peak);
  2. chains over COPIES distinct weight copies (every dispatch reads from memory, as in a step): us a layer
     for the pair, the fused kernel, and the glu alone.
  usage: PYTHONPATH=... python3 scripts/probe_glu_down.py [--model llama|qwen3] [--copies N] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import struct
import sys

from py_runtime.checks.kernel_bench import _measure_span, _run_once
from py_runtime.checks.q4_linear import ACT_RANGE, NORM_EPS, NORM_RANGE, WEIGHT_RANGE
from py_runtime.dispatch import OpCall, Sizing, linear_grid, live_limit
from py_runtime.models.config import LLAMA_3_2_1B, QWEN3_0_6B
from py_runtime.models.decoder import DOWN_DECODE_GROUP
from py_runtime.ops.int8_activations import Int8Activations
from py_runtime.ops.q4 import Q4Weight, q4_quantize, q4_scales_rows
from py_runtime.ops.q4_linear import NormPrologue, q4_linear, q4_linear_glu
from py_runtime.ops.synth import fill_uniform
from py_runtime.plan import Plan
from py_runtime.runtime import Runtime

FUSED = "q4gsw_gemv_i8x_glu_down_norm_sr_sg_r2u1w16"
GLU_SHAPE = "r2u1w16"


async def _weight(runtime, name: str, k: int, n: int, seed: int, stream: int) -> Q4Weight:
    tensors = runtime.tensors
    packed = await tensors.allocate(f"{name}.packed", (n * k // 8,), "u32")
    scales = await tensors.allocate(f"{name}.scales", (k // 64 * n,))
    rows = await tensors.allocate(f"{name}.rows", (k // 64 * n,))
    weight = Q4Weight(packed, scales, k, n, 64, scales_rows=rows)
    await _run_once(runtime, f"{name}.setup", [q4_quantize(weight=weight, synth=(WEIGHT_RANGE, seed, stream)),
                                               q4_scales_rows(weight)])
    return weight


def _fused_call(gate_up: Q4Weight, down: Q4Weight, x, norm_weight, acc, hidden: int, ffn: int) -> OpCall:
    def sizing(spec, live) -> Sizing:
        return Sizing(workgroups=linear_grid(ffn // 32, 1, live_limit(live)),
                      params=spec.pack_params(k=hidden, n=ffn, n_total=2 * ffn, n_offset=0, group_size=64, has_bias=0,
                                              accumulate=0, out_group_size=DOWN_DECODE_GROUP, eps=NORM_EPS,
                                              down_n=hidden),
                      bytes_moved=(2 * ffn * hidden + hidden * ffn) * 17 // 32, flops=6 * ffn * hidden)
    # (attested as the glu_q8_norm route it extends: no route of its own, nothing routes to it)
    return OpCall(label="glu_down", kernel=FUSED, route="q4_gemv_int8x_glu_q8_norm", sizing=sizing,
                  tensors={"hidden": x, "norm_weight": norm_weight, "weights": gate_up.packed,
                           "scales": gate_up.scales_rows, "down_weights": down.packed, "down_scales": down.scales_rows,
                           "acc": acc})


async def main(model: str, copies: int, trials: int) -> dict:
    config = {"llama": LLAMA_3_2_1B, "qwen3": QWEN3_0_6B}[model]
    hidden, ffn = config.hidden, config.intermediate
    runtime = await Runtime.create("native")
    device, tensors, adapter = runtime.device, runtime.tensors, runtime.device.adapter
    x = await tensors.allocate("x", (1, hidden))
    norm_weight = await tensors.allocate("norm_weight", (hidden,))
    act_f = await tensors.allocate("act", (1, ffn))
    h = await tensors.allocate("h", (1, hidden))
    acc = await tensors.allocate("acc", (2 * hidden + 4,), "u32")
    await _run_once(runtime, "fill", [fill_uniform(target=x, value_range=ACT_RANGE, seed=3, stream=1),
                                      fill_uniform(target=norm_weight, value_range=NORM_RANGE, seed=3, stream=2),
                                      fill_uniform(target=h, value_range=ACT_RANGE, seed=3, stream=3)])
    act_x = await Int8Activations.allocate(runtime, x, 64)
    act_q8 = await Int8Activations.allocate(runtime, act_f, DOWN_DECODE_GROUP)
    norm = NormPrologue(x=x, weight=norm_weight, eps=NORM_EPS)
    layers = []
    for i in range(copies):
        layers.append((await _weight(runtime, f"gate_up{i}", hidden, 2 * ffn, 3, 10 + 2 * i),
                       await _weight(runtime, f"down{i}", ffn, hidden, 3, 11 + 2 * i)))

    def pair(i: int):
        gate_up, down = layers[i]
        glu = q4_linear_glu(act=act_x, weight=gate_up, out=act_f, adapter=adapter, tokens=1, gemv_shape=GLU_SHAPE,
                            int8_out=act_q8, norm=norm)
        return glu, q4_linear(x=act_f, weight=down, out=h, adapter=adapter, tokens=1, int8=act_q8, accumulate=True)

    # 1. the fused sum against the pair's
    glu, down_op = pair(0)
    before = struct.unpack(f"<{hidden}f", await device.read_buffer(h.buffer, 4 * hidden))
    plan = Plan(runtime, "pair.once")
    for op in (glu, down_op):
        for call in op.at(1):
            await plan.add(call)
    plan.record()
    routes = (await plan.replay()).routes
    plan.release()
    after = struct.unpack(f"<{hidden}f", await device.read_buffer(h.buffer, 4 * hidden))
    want = [a - b for a, b in zip(after, before)]
    device.write_buffer(acc.buffer, bytes(4 * acc.numel))
    plan = Plan(runtime, "fused.once")
    await plan.add(_fused_call(*layers[0], x, norm_weight, acc, hidden, ffn))
    plan.record()
    await plan.replay()
    plan.release()
    words = struct.unpack(f"<{acc.numel}I", await device.read_buffer(acc.buffer, 4 * acc.numel))
    got = []
    for m in range(hidden):
        value = words[2 * m] + (words[2 * m + 1] << 32)
        value -= (1 << 64) if value >= (1 << 63) else 0
        got.append(value / 2 ** 32)
    peak = max(abs(v) for v in want)
    worst = max(abs(g - w) for g, w in zip(got, want))
    flag = words[2 * hidden]
    print(f"{model}: pair routes {routes}; fused vs pair: worst |diff| {worst:.3g} of peak {peak:.3g}; flag {flag}")
    if not worst <= 1e-4 * peak or flag:
        raise SystemExit("the fused sum is not the pair's")

    # 2. chains over the copies
    result = {"model": model, "copies": copies, "worst": worst, "peak": peak, "routes": list(routes),
              "adapter": adapter.info.get("device", "?"), "us_a_layer": {}}
    for label in ("pair", "fused", "glu"):
        plan = Plan(runtime, f"chain.{label}")
        for i in range(copies):
            if label == "fused":
                await plan.add(_fused_call(*layers[i], x, norm_weight, acc, hidden, ffn))
                continue
            glu, down_op = pair(i)
            for op in ((glu, down_op) if label == "pair" else (glu,)):
                for call in op.at(1):
                    await plan.add(call)
        plan.record()
        us = await _measure_span(plan, trials) * len(plan) / copies / 1e3
        plan.release()
        result["us_a_layer"][label] = us
        print(f"{model} {label:>5}: {us:8.2f} us a layer ({copies} layers in one pass)")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="llama", choices=("llama", "qwen3"))
    parser.add_argument("--copies", type=int, default=16)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()
    out = asyncio.run(main(args.model, args.copies, args.trials))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    sys.exit(0)
