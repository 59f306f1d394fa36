"""Metadata read from expanded WGSL: entry point, workgroup size, bindings.

The registry is derived from the kernel text, never restated by hand: an op looks up binding
numbers and the workgroup size here instead of repeating them.
"""

from __future__ import annotations

import re

__all__ = ["WgslMetaError", "parse_kernel_meta"]

_COMMENT = re.compile(r"//[^\n]*")
_CONST = re.compile(r"\b(?:const|override)\s+(\w+)\s*(?::\s*\w+)?\s*=\s*([0-9]+)[ui]?\s*;")
_ENTRY = re.compile(r"@compute\s+@workgroup_size\(([^)]*)\)\s*fn\s+(\w+)")
_BINDING = re.compile(
    r"@group\((\d+)\)\s*@binding\((\d+)\)\s*var(?:<\s*(\w+)\s*(?:,\s*(\w+)\s*)?>)?\s+(\w+)\s*:\s*([^;]+);"
)


class WgslMetaError(ValueError):
    pass


def _resolve(token: str, constants: dict[str, int], where: str) -> int:
    token = token.strip()
    literal = re.fullmatch(r"([0-9]+)[ui]?", token)
    if literal:
        return int(literal.group(1))
    if token in constants:
        return constants[token]
    raise WgslMetaError(f"{where}: @workgroup_size uses {token!r}, which is not a const/override with a literal value")


def parse_kernel_meta(text: str, *, where: str) -> dict:
    """Entry point, workgroup size (x, y, z) and bindings of the single compute entry in `text`."""
    code = _COMMENT.sub("", text)
    constants = {name: int(value) for name, value in _CONST.findall(code)}
    entries = _ENTRY.findall(code)
    if len(entries) != 1:
        raise WgslMetaError(f"{where}: expected exactly one @compute entry point, found {len(entries)}")
    size_args, entry_point = entries[0]
    size = [_resolve(t, constants, where) for t in size_args.split(",") if t.strip()]
    if not 1 <= len(size) <= 3:
        raise WgslMetaError(f"{where}: malformed @workgroup_size({size_args})")
    size += [1] * (3 - len(size))
    bindings = []
    for group, binding, space, access, name, type_ in _BINDING.findall(code):
        space = space or "handle"
        if space == "storage":
            access = access or "read"
        bindings.append({
            "group": int(group), "binding": int(binding), "name": name, "space": space,
            "access": access or None, "type": " ".join(type_.split()),
        })
    bindings.sort(key=lambda b: (b["group"], b["binding"]))
    seen = set()
    for b in bindings:
        key = (b["group"], b["binding"])
        if key in seen:
            raise WgslMetaError(f"{where}: binding @group({key[0]}) @binding({key[1]}) declared twice")
        seen.add(key)
    return {"entry_point": entry_point, "workgroup_size": size, "bindings": bindings}
