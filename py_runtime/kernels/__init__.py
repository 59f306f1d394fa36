"""The kernel registry: generated WGSL and the metadata parsed from it, shipped as package data."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .params_layout import ParamsError, ParamsField, ParamsLayout

__all__ = ["Kernel", "UnknownKernel", "kernel", "kernel_names", "TIERS", "ParamsError", "ParamsField", "ParamsLayout"]

_GENERATED = Path(__file__).parent / "generated"
# shipped: a route can pick it; sweep: generated for benchmark sweeps only (the family's YAML says which).
TIERS = ("shipped", "sweep")


class UnknownKernel(KeyError):
    pass


@dataclass(frozen=True, kw_only=True)
class Kernel:
    name: str
    source: str                 # the template (or verbatim file) under shaders/
    code: str
    entry_point: str
    workgroup_size: tuple[int, int, int]
    bindings: tuple[dict, ...]
    template_values: dict       # the family parameters this variant was expanded with (empty: verbatim)
    params_layout: ParamsLayout | None  # the uniform binding's struct; None without one
    workgroup_bytes: int        # its var<workgroup> memory as maxComputeWorkgroupStorageSize counts it
    tier: str                   # one of TIERS
    sha256: str

    @property
    def invocations(self) -> int:
        x, y, z = self.workgroup_size
        return x * y * z

    def pack_params(self, /, **values) -> bytes:
        """The params struct's bytes from one value per field, by field name (ParamsLayout.pack)."""
        if self.params_layout is None:
            raise ParamsError(f"kernel {self.name}: has no uniform params binding, given {sorted(values)}")
        return self.params_layout.pack(values, kernel=self.name)


@cache
def _registry() -> dict:
    return json.loads((_GENERATED / "registry.json").read_text())["kernels"]


def kernel_names(tier: str | None = None) -> list[str]:
    """Every kernel's name, sorted; only those of one tier where `tier` is given."""
    if tier is not None and tier not in TIERS:
        raise ValueError(f"unknown kernel tier {tier!r}; tiers: {list(TIERS)}")
    return sorted(name for name, entry in _registry().items() if tier is None or entry["tier"] == tier)


@cache
def kernel(name: str) -> Kernel:
    entry = _registry().get(name)
    if entry is None:
        raise UnknownKernel(f"no kernel named {name!r} in the registry; known: {', '.join(kernel_names())}")
    layout = entry["params_layout"]
    return Kernel(
        name=name, source=entry["source"], code=(_GENERATED / entry["file"]).read_text(),
        entry_point=entry["entry_point"], workgroup_size=tuple(entry["workgroup_size"]),
        bindings=tuple(entry["bindings"]), template_values=entry["template_values"],
        params_layout=ParamsLayout.from_registry(layout) if layout is not None else None,
        workgroup_bytes=entry["workgroup_bytes"],
        tier=entry["tier"], sha256=entry["sha256"],
    )
