"""Metadata read from expanded WGSL: entry point, workgroup size, bindings, params layout.

The registry is derived from the kernel text, never restated by hand: an op looks up binding
numbers, the workgroup size and the byte layout of its uniform params struct here instead of
repeating them.
"""

from __future__ import annotations

import re

__all__ = ["WgslMetaError", "parse_kernel_meta", "params_layout"]

_COMMENT = re.compile(r"//[^\n]*")
_CONST = re.compile(r"\b(?:const|override)\s+(\w+)\s*(?::\s*\w+)?\s*=\s*([0-9]+)[ui]?\s*;")
_ENTRY = re.compile(r"@compute\s+@workgroup_size\(([^)]*)\)\s*fn\s+(\w+)")
_BINDING = re.compile(
    r"@group\((\d+)\)\s*@binding\((\d+)\)\s*var(?:<\s*(\w+)\s*(?:,\s*(\w+)\s*)?>)?\s+(\w+)\s*:\s*([^;]+);"
)
_STRUCT = re.compile(r"\bstruct\s+(\w+)\s*\{([^}]*)\}")
_MEMBER = re.compile(r"(\w+)\s*:\s*(.+)")
_SCALARS = ("u32", "i32", "f32")
# Host-shareable types a params struct may hold, as (align, size) in the uniform address space (WGSL
# spec, "Alignment and Size"): 4-byte scalars, and vectors of them (vec3 aligns like vec4 but is 12
# bytes). Arrays and nested structs are refused, so uniform's extra rule (their alignment and the
# offset after them rounded up to 16) never applies.
_VECTOR = re.compile(r"vec([234])<\s*(u32|i32|f32)\s*>|vec([234])([uif])")
_VECTOR_LAYOUT = {2: (8, 8), 3: (16, 12), 4: (16, 16)}


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
    return {"entry_point": entry_point, "workgroup_size": size, "bindings": bindings,
            "params_layout": params_layout(code, bindings, where=where)}


def _split_members(body: str) -> list[str]:
    """A struct body's members, split at the commas outside `<...>` (array<f32, 4> is one member)."""
    members, depth, start = [], 0, 0
    for i, char in enumerate(body):
        depth += {"<": 1, ">": -1}.get(char, 0)
        if char == "," and depth == 0:
            members.append(body[start:i])
            start = i + 1
    members.append(body[start:])
    return [" ".join(m.split()) for m in members if m.strip()]


def _member_layout(type_: str) -> tuple[str, int, int] | None:
    """(canonical type, align, size) of a params member type, or None where it is not supported."""
    if type_ in _SCALARS:
        return type_, 4, 4
    vector = _VECTOR.fullmatch(type_)
    if vector is None:
        return None
    width = int(vector.group(1) or vector.group(3))
    scalar = vector.group(2) or f"{vector.group(4)}32"
    return f"vec{width}<{scalar}>", *_VECTOR_LAYOUT[width]


def params_layout(code: str, bindings: list[dict], *, where: str) -> dict | None:
    """The uniform binding's struct as {"struct", "size", "fields": [{"name", "type", "offset", "size"}]}
    in the uniform address space's layout, or None without a uniform binding. `code`: comments removed."""
    uniforms = [b for b in bindings if b["space"] == "uniform"]
    if not uniforms:
        return None
    if len(uniforms) > 1:
        raise WgslMetaError(f"{where}: {len(uniforms)} uniform bindings {[b['name'] for b in uniforms]}; "
                            f"a kernel takes one params struct")
    binding = uniforms[0]
    structs = {name: body for name, body in _STRUCT.findall(code)}
    if binding["type"] not in structs:
        raise WgslMetaError(f"{where}: uniform binding {binding['name']!r} has type {binding['type']!r}, "
                            f"which is not a struct declared in the kernel")
    fields, offset, struct_align = [], 0, 1
    for member in _split_members(structs[binding["type"]]):
        parsed = _MEMBER.fullmatch(member)
        if parsed is None:
            raise WgslMetaError(f"{where}: params struct {binding['type']} member {member!r} is not `name: type` "
                                f"(attributes such as @align and @size are not supported)")
        name, type_ = parsed.group(1), parsed.group(2).strip()
        layout = _member_layout(type_)
        if layout is None:
            raise WgslMetaError(f"{where}: params struct {binding['type']} field {name!r} has type {type_!r}; "
                                f"supported: u32, i32, f32 and vec2/vec3/vec4 of them")
        canonical, align, size = layout
        offset = -(-offset // align) * align
        fields.append({"name": name, "type": canonical, "offset": offset, "size": size})
        offset += size
        struct_align = max(struct_align, align)
    if not fields:
        raise WgslMetaError(f"{where}: params struct {binding['type']} has no members")
    return {"struct": binding["type"], "size": -(-offset // struct_align) * struct_align, "fields": fields}
