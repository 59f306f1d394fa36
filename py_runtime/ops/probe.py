"""Arithmetic probes: the compute ceilings the prefill benchmarks measure their GEMMs against, in the
same run (shaders/bench/arith_probe.wgsl): chains of dot4I8Packed (the DP4A GEMM's instruction) or of
f32 fma (the f32 GEMMs'), with no memory traffic."""

from __future__ import annotations

from ..dispatch import Op, OpCall, Sizing, single
from ..tensors import Tensor

__all__ = ["arith_probe", "PROBE_KINDS"]

# Operations counted per step of a chain: a dot4I8Packed is 4 products and 4 sums, an fma 2 flops.
PROBE_KINDS = {"dp4a": 8, "fma": 2}
_STEPS = 8 * 4          # chains x unrolled steps per loop iteration, per invocation (arith_probe.wgsl)


def arith_probe(*, kind: str, sink: Tensor, workgroups: int, iters: int, seed: int = 1) -> Op:
    """`workgroups` x 256 invocations, each `iters` x 32 steps of `kind` ("dp4a" or "fma"); the sizing's
    flops count the probe's operations (8 per dot4I8Packed, 2 per fma)."""
    if kind not in PROBE_KINDS:
        raise ValueError(f"arith_probe: unknown kind {kind!r}; kinds: {sorted(PROBE_KINDS)}")
    if not 1 <= workgroups <= 65535 or iters < 1 or sink.dtype != "u32" or sink.numel < workgroups:
        raise ValueError(f"arith_probe: 1 to 65535 workgroups ({workgroups}), iters >= 1 ({iters}) and a u32 sink "
                         f"of one word per workgroup ({sink!r})")

    def sizing(spec, live):
        ops = workgroups * spec.invocations * iters * _STEPS * PROBE_KINDS[kind]
        return Sizing(workgroups=(workgroups, 1, 1), params=spec.pack_params(iters=iters, seed=seed), flops=ops)

    return single(OpCall(label=f"arith_probe({kind})", kernel=f"arith_probe_{kind}", route="arith_probe",
                         tensors={"sink": sink}, sizing=sizing))
