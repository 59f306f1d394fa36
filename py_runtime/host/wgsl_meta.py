"""Metadata read from expanded WGSL: entry point, workgroup size, bindings, params layout, workgroup memory.

The registry is derived from the kernel text, never restated by hand: an op looks up binding
numbers, the workgroup size, the byte layout of its uniform params struct and the workgroup memory
it needs here instead of repeating them.
"""

from __future__ import annotations

import ast
import re

__all__ = ["WgslMetaError", "parse_kernel_meta", "params_layout", "workgroup_bytes"]

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


def _round_up(align: int, size: int) -> int:
    return -(-size // align) * align


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
            "params_layout": params_layout(code, bindings, where=where),
            "workgroup_bytes": workgroup_bytes(code, where=where)}


def _split_members(body: str) -> list[str]:
    """A struct body's members (or array<...>'s arguments), split at the commas outside `<...>` and `(...)`."""
    members, depth, start = [], 0, 0
    for i, char in enumerate(body):
        depth += {"<": 1, ">": -1, "(": 1, ")": -1}.get(char, 0)
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
        offset = _round_up(align, offset)
        fields.append({"name": name, "type": canonical, "offset": offset, "size": size})
        offset += size
        struct_align = max(struct_align, align)
    if not fields:
        raise WgslMetaError(f"{where}: params struct {binding['type']} has no members")
    return {"struct": binding["type"], "size": _round_up(struct_align, offset), "fields": fields}


# -- workgroup memory ------------------------------------------------------------------------------------

_WORKGROUP_VAR = re.compile(r"\bvar\s*<\s*workgroup\s*>\s*(\w+)\s*:\s*([^;]+);")
_INT_CONST = re.compile(r"\bconst\s+(\w+)\s*(?::\s*\w+\s*)?=\s*([^;]+);")
_ALIAS = re.compile(r"\balias\s+(\w+)\s*=\s*([^;]+);")
_INT_LITERAL = re.compile(r"\b(0[xX][0-9a-fA-F]+|[0-9]+)[ui]?\b")
# (align, size) in any address space (WGSL "Alignment and Size"); a 3-vector aligns like a 4-vector.
_SCALAR_LAYOUT = {"f32": (4, 4), "u32": (4, 4), "i32": (4, 4), "f16": (2, 2)}
_ANY_VECTOR = re.compile(r"vec([234])<\s*(f32|u32|i32|f16)\s*>|vec([234])([fuih])")
_SHORT_SCALAR = {"f": "f32", "u": "u32", "i": "i32", "h": "f16"}
_ATOMIC = re.compile(r"atomic<\s*(u32|i32)\s*>")
_ARRAY = re.compile(r"array<(.+)>")
_BIN_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
            ast.Mod: lambda a, b: a - b * _trunc_div(a, b), ast.Div: lambda a, b: _trunc_div(a, b)}


def _trunc_div(a: int, b: int) -> int:
    """WGSL's integer division (and % from it): it truncates toward zero."""
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def _module_scope(code: str) -> str:
    """`code` outside every brace: function-scope consts must not shadow the module's."""
    depth, kept = 0, []
    for char in code:
        depth += {"{": 1, "}": -1}.get(char, 0)
        kept.append(char if depth == 0 and char != "}" else " ")
    return "".join(kept)


class _Layouts:
    """Alignment and size of the types a kernel's workgroup variables use, its integer consts evaluated
    on demand (a float const is never asked for, so never refused)."""

    def __init__(self, code: str, scope: str, where: str):
        self.where = where
        self.const_text = dict(_INT_CONST.findall(scope))
        self.consts: dict[str, int] = {}
        self.aliases = {name: " ".join(type_.split()) for name, type_ in _ALIAS.findall(scope)}
        self.structs = {name: body for name, body in _STRUCT.findall(code)}

    def const(self, name: str, pending: tuple[str, ...]) -> int:
        if name not in self.consts:
            if name in pending:
                raise WgslMetaError(f"{self.where}: const {name} is defined through itself ({' -> '.join(pending)})")
            self.consts[name] = self.evaluate(self.const_text[name], pending + (name,))
        return self.consts[name]

    def evaluate(self, expr: str, pending: tuple[str, ...] = ()) -> int:
        """An integer const expression: literals, known consts, + - * / % and parentheses."""
        expr = " ".join(expr.split())
        refusal = f"{self.where}: cannot evaluate {expr!r} (integer literals, consts, + - * / % and parentheses only)"
        try:
            tree = ast.parse(_INT_LITERAL.sub(r"\1", expr), mode="eval").body
        except SyntaxError:
            raise WgslMetaError(refusal) from None

        def value(node) -> int:
            if isinstance(node, ast.Constant) and type(node.value) is int:
                return node.value
            if isinstance(node, ast.Name) and node.id in self.const_text:
                return self.const(node.id, pending)
            if isinstance(node, ast.BinOp) and type(node.op) in _BIN_OPS:
                left, right = value(node.left), value(node.right)
                if isinstance(node.op, (ast.Div, ast.Mod)) and right == 0:
                    raise WgslMetaError(f"{self.where}: {expr!r} divides by zero")
                return _BIN_OPS[type(node.op)](left, right)
            raise WgslMetaError(refusal)
        return value(tree)

    def layout(self, type_: str) -> tuple[int, int]:
        """(align, size) of a type in the workgroup address space."""
        type_ = " ".join(type_.split())
        if type_ in self.aliases:
            return self.layout(self.aliases[type_])
        if type_ in _SCALAR_LAYOUT:
            return _SCALAR_LAYOUT[type_]
        if _ATOMIC.fullmatch(type_):
            return 4, 4
        if vector := _ANY_VECTOR.fullmatch(type_):
            width = int(vector.group(1) or vector.group(3))
            align, size = _SCALAR_LAYOUT[vector.group(2) or _SHORT_SCALAR[vector.group(4)]]
            return align * (4 if width == 3 else width), size * width
        if array := _ARRAY.fullmatch(type_):
            parts = _split_members(array.group(1))
            if len(parts) != 2:
                raise WgslMetaError(f"{self.where}: {type_!r} is not array<element, count> (workgroup arrays are "
                                    f"fixed-size)")
            element, count = parts[0], self.evaluate(parts[1])
            if count <= 0:
                raise WgslMetaError(f"{self.where}: {type_!r} has {count} elements")
            align, size = self.layout(element)
            return align, count * _round_up(align, size)
        if type_ in self.structs:
            return self.struct_layout(type_)
        raise WgslMetaError(f"{self.where}: workgroup memory of type {type_!r} unknown (supported: f32, u32, i32, "
                            f"f16, atomic<u32|i32>, their vectors, fixed-size arrays, aliases and structs of them)")

    def struct_layout(self, name: str) -> tuple[int, int]:
        offset, struct_align = 0, 1
        for member in _split_members(self.structs[name]):
            parsed = _MEMBER.fullmatch(member)
            if parsed is None:
                raise WgslMetaError(f"{self.where}: struct {name} member {member!r} is not `name: type` "
                                    f"(attributes such as @align and @size are not supported)")
            align, size = self.layout(parsed.group(2))
            offset = _round_up(align, offset) + size
            struct_align = max(struct_align, align)
        return struct_align, _round_up(struct_align, offset)


def workgroup_bytes(code: str, *, where: str) -> int:
    """The workgroup memory a kernel needs, as the WebGPU spec counts it against
    maxComputeWorkgroupStorageSize (createComputePipeline's validation, workgroupStorageUsed: "the sum of
    roundUp(16, SizeOf(T)) over each type T of all variables with address space workgroup statically used"
    by the entry point). Every declared var<workgroup> counts: a kernel has one entry point, and a variable
    it never used would only make this an over-count. `code`: comments removed."""
    scope = _module_scope(code)
    layouts = _Layouts(code, scope, where)
    return sum(_round_up(16, layouts.layout(type_)[1]) for _, type_ in _WORKGROUP_VAR.findall(scope))
