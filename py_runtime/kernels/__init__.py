"""The kernel registry: generated WGSL and the metadata parsed from it, shipped as package data."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = ["Kernel", "UnknownKernel", "kernel", "kernel_names"]

_GENERATED = Path(__file__).parent / "generated"


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
    sha256: str

    @property
    def invocations(self) -> int:
        x, y, z = self.workgroup_size
        return x * y * z


@cache
def _registry() -> dict:
    return json.loads((_GENERATED / "registry.json").read_text())["kernels"]


def kernel_names() -> list[str]:
    return sorted(_registry())


@cache
def kernel(name: str) -> Kernel:
    entry = _registry().get(name)
    if entry is None:
        raise UnknownKernel(f"no kernel named {name!r} in the registry; known: {', '.join(kernel_names())}")
    return Kernel(
        name=name, source=entry["source"], code=(_GENERATED / entry["file"]).read_text(),
        entry_point=entry["entry_point"], workgroup_size=tuple(entry["workgroup_size"]),
        bindings=tuple(entry["bindings"]), template_values=entry["template_values"], sha256=entry["sha256"],
    )
