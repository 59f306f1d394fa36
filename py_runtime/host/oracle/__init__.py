"""The host oracle: numpy twins of the GPU generators and float64 references of the kernels, with
the verifiers the tests and `webgpu-llm-lab check` share. Host only (numpy); never imported by
code that runs in the browser. Independent of the runtime's in-page checks (the `math` module).

One module per suite: synth (the twins), unary, runtime_core, elementwise, q4, decoder_blocks, attention,
model (HF transformers on CPU torch: the `oracle` extra).
"""

from .attention import attention_reference, verify_attention_report
from .decoder_blocks import rope_cos_sin_reference, verify_decoder_blocks_report
from .model import verify_model_report
from .elementwise import binary_bounds, f32_neighbours, pow_bounds, verify_elementwise_report, wgsl_ulp32
from .q4 import q4_levels_np, q4_linear_reference, q4_pack_np, verify_q4_report
from .runtime_core import linear_reference, verify_runtime_report
from .synth import (synth_bool_np, synth_f16_bits_np, synth_hash_np, synth_i32_np, synth_rows_np,
                    synth_values_np)
from .unary import unary_allowed_error, unary_reference, verify_unary_case

__all__ = [
    "attention_reference", "verify_attention_report", "binary_bounds", "f32_neighbours", "linear_reference", "pow_bounds", "q4_levels_np", "q4_linear_reference",
    "q4_pack_np", "rope_cos_sin_reference", "synth_bool_np", "synth_f16_bits_np", "synth_hash_np", "synth_i32_np",
    "synth_rows_np", "synth_values_np", "unary_allowed_error", "unary_reference", "verify_decoder_blocks_report",
    "verify_elementwise_report", "verify_model_report", "verify_q4_report", "verify_runtime_report", "verify_unary_case", "wgsl_ulp32",
]
