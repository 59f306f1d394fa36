"""What the subgroup-matrix kernels (the int8 and f16 GEMMs, the f16 prefill attention) need of a device
beyond a feature bit: the config they multiply in, shader-f16 for f16, their WGSL spelling's probe
compiled (the extension's spelling has moved between Chromium releases), and 32-wide subgroups."""

from __future__ import annotations

from ..gpu.device import AdapterReport

__all__ = ["SGMAT_I8_CONFIG", "SGMAT_F16_CONFIG", "subgroup_matrix_unavailable"]

SGMAT_I8_CONFIG = {"componentType": "i8", "resultComponentType": "i32", "M": 16, "N": 16, "K": 32}
SGMAT_F16_CONFIG = {"componentType": "f16", "resultComponentType": "f32", "M": 16, "N": 16, "K": 16}


def _subgroup_matrix_ready(adapter: AdapterReport, probe: str) -> str | None:
    """Their spelling's probe compiled, and 32-wide subgroups (the kernels lay a tile out over 32 lanes)."""
    outcome = adapter.probes.get(probe)
    if outcome != "ok":
        return f"the {probe} probe kernel did not compile: {outcome}"
    if (adapter.info.get("subgroupMinSize"), adapter.info.get("subgroupMaxSize")) != (32, 32):
        return (f"the kernel lays its tile out over 32-wide subgroups; the adapter's are "
                f"{adapter.info.get('subgroupMinSize')}..{adapter.info.get('subgroupMaxSize')}")
    return None


def subgroup_matrix_unavailable(adapter: AdapterReport, component: str) -> str | None:
    """Why the device cannot run this project's `component` ("i8" or "f16") subgroup-matrix kernels (the
    config, shader-f16 for f16, the spelling's probe, 32-wide subgroups), or None where it can."""
    if component == "i8":
        if SGMAT_I8_CONFIG not in adapter.subgroup_matrix_configs():
            return ("the device has no int8 subgroup-matrix config (i8 x i8 -> i32, 16x16x32; the feature "
                    f"'chromium-experimental-subgroup-matrix' needs --enable-unsafe-webgpu): "
                    f"{adapter.subgroup_matrix_configs() or 'none listed'}")
    elif "shader-f16" not in adapter.device_features or SGMAT_F16_CONFIG not in adapter.subgroup_matrix_configs():
        return ("the device has no f16 subgroup-matrix config (f16 x f16 -> f32, 16x16x16: shader-f16 and the "
                "subgroup-matrix feature; Chromium on NVIDIA needs --enable-dawn-features=vulkan_enable_f16_on_nvidia): "
                f"{adapter.subgroup_matrix_configs() or 'none listed'}")
    return _subgroup_matrix_ready(adapter, f"subgroup_matrix_{component}")
