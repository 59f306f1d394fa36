"""Arithmetic probes: the compute ceilings the prefill benchmarks measure their GEMMs against, in the
same run (shaders/bench/arith_probe.wgsl): chains of dot4I8Packed (the DP4A GEMM's instruction), of
f32 fma (the f32 GEMMs'), or of subgroup-matrix products (the tensor cores as the subgroup-matrix GEMMs
reach them, where the device has them), with no memory traffic."""

from __future__ import annotations

from ..dispatch import Op, OpCall, Sizing, single
from ..tensors import Tensor
from .subgroup_matrix import subgroup_matrix_unavailable

__all__ = ["arith_probe", "PROBE_KINDS", "probe_for", "probe_unavailable"]

# Operations counted per step of a chain: a dot4I8Packed is 4 products and 4 sums, an fma 2 flops, a
# subgroup-matrix product 2 M N K (16 x 16 x 32 for i8, 16 x 16 x 16 for f16).
PROBE_KINDS = {"dp4a": 8, "fma": 2, "sgmat_i8": 2 * 16 * 16 * 32, "sgmat_f16": 2 * 16 * 16 * 16,
               "sgmat_f16_smem": 2 * 16 * 16 * 16}
# Per loop iteration (arith_probe.wgsl): (chains x unrolled steps, run by each invocation or by each
# subgroup of 32 for the matrix kinds).
_STEPS = {"dp4a": 8 * 4, "fma": 8 * 4, "sgmat_i8": 4 * 4, "sgmat_f16": 4 * 4, "sgmat_f16_smem": 2 * 4}
_LANES = {"dp4a": 1, "fma": 1, "sgmat_i8": 32, "sgmat_f16": 32, "sgmat_f16_smem": 32}


def probe_unavailable(kind: str, adapter) -> str | None:
    """Why this device cannot run probe `kind` (the matrix kinds need what the subgroup-matrix GEMMs do), or None."""
    if kind.startswith("sgmat_"):
        return subgroup_matrix_unavailable(adapter, kind.removeprefix("sgmat_").removesuffix("_smem"))
    return None


# The probe of the instruction each GEMM route's inner loop runs (the f32 GEMMs': fma).
_ROUTE_PROBES = {"q4_gemm_dp4a": "dp4a", "q4_gemm_sgmat_i8": "sgmat_i8", "q4_gemm_sgmat_f16": "sgmat_f16"}


def probe_for(route: str, measured) -> str:
    """The probe a GEMM route's figures are measured against, among the kinds `measured` in its run: its own
    instruction's, else (a matrix probe the device could not run) DP4A's for the int8 ones, fma's for the rest."""
    kind = _ROUTE_PROBES.get(route, "fma")
    if kind in measured:
        return kind
    return "dp4a" if kind == "sgmat_i8" else "fma"


def arith_probe(*, kind: str, sink: Tensor, workgroups: int, iters: int, seed: int = 1) -> Op:
    """`workgroups` x the kernel's invocations, each (each subgroup of 32, for the matrix kinds) `iters` x
    its steps of `kind`; the sizing's flops count the probe's operations (PROBE_KINDS per step)."""
    if kind not in PROBE_KINDS:
        raise ValueError(f"arith_probe: unknown kind {kind!r}; kinds: {sorted(PROBE_KINDS)}")
    if not 1 <= workgroups <= 65535 or iters < 1 or sink.dtype != "u32" or sink.numel < workgroups:
        raise ValueError(f"arith_probe: 1 to 65535 workgroups ({workgroups}), iters >= 1 ({iters}) and a u32 sink "
                         f"of one word per workgroup ({sink!r})")

    def sizing(spec, live):
        ops = workgroups * spec.invocations // _LANES[kind] * iters * _STEPS[kind] * PROBE_KINDS[kind]
        return Sizing(workgroups=(workgroups, 1, 1), params=spec.pack_params(iters=iters, seed=seed), flops=ops)

    return single(OpCall(label=f"arith_probe({kind})", kernel=f"arith_probe_{kind}", route="arith_probe",
                         tensors={"sink": sink}, sizing=sizing))
