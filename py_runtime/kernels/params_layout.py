"""A kernel's uniform params struct as the codegen parsed it, and its packing by field name.

The layout (offsets, sizes, the struct's padded size) is computed by the codegen from the WGSL
(py_runtime/host/wgsl_meta.py) and read here from the registry; packing follows it, so an op names
the fields it sets and never restates a byte offset. Standard library only: this runs in Pyodide.
"""

from __future__ import annotations

import numbers
import operator
import re
import struct
from dataclasses import dataclass
from functools import cached_property

__all__ = ["ParamsError", "ParamsField", "ParamsLayout"]

_FORMAT = {"u32": "I", "i32": "i", "f32": "f"}
_INT_RANGE = {"u32": (0, 2**32 - 1), "i32": (-2**31, 2**31 - 1)}
_TYPE = re.compile(r"(u32|i32|f32)|vec([234])<(u32|i32|f32)>")


class ParamsError(ValueError):
    """Values that do not fit a kernel's params struct: missing, unknown, out of range or of the wrong type."""


@dataclass(frozen=True, kw_only=True)
class ParamsField:
    name: str
    type: str           # u32, i32, f32 or vecN<one of them>
    offset: int         # bytes from the struct's start
    size: int

    @property
    def scalar(self) -> str:
        return _parse_type(self.type)[0]

    @property
    def width(self) -> int:
        """Components: 1 for a scalar, N for vecN."""
        return _parse_type(self.type)[1]


def _parse_type(type_: str) -> tuple[str, int]:
    found = _TYPE.fullmatch(type_)
    if found is None:
        raise ValueError(f"params field type {type_!r} is not u32, i32, f32 or vecN of them")
    return (found.group(1), 1) if found.group(1) else (found.group(3), int(found.group(2)))


def _scalar(value, scalar: str) -> tuple[object, str | None]:
    """(the value struct.pack takes, None) or (None, why it does not fit `scalar`)."""
    if scalar == "f32":
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return None, "wrong type: f32 takes a real number"
        try:
            struct.pack("<f", value)
        except OverflowError:
            return None, "out of range: beyond f32's largest finite value"
        return float(value), None
    if isinstance(value, bool):
        return (int(value), None) if scalar == "u32" else (None, "wrong type: only a u32 takes a bool")
    try:
        number = operator.index(value)
    except TypeError:
        return None, f"wrong type: {scalar} takes an int"
    low, high = _INT_RANGE[scalar]
    if not low <= number <= high:
        return None, f"out of range: {scalar} is {low}..{high}"
    return number, None


@dataclass(frozen=True, kw_only=True)
class ParamsLayout:
    """The uniform params struct in the uniform address space's layout (WGSL spec, "Alignment and Size")."""

    struct: str
    size: int           # the struct's size: the byte count a binding of it needs
    fields: tuple[ParamsField, ...]

    @classmethod
    def from_registry(cls, entry: dict) -> "ParamsLayout":
        return cls(struct=entry["struct"], size=entry["size"],
                   fields=tuple(ParamsField(**field) for field in entry["fields"]))

    @property
    def names(self) -> list[str]:
        return [field.name for field in self.fields]

    @cached_property
    def _whole(self) -> tuple[struct.Struct, tuple[tuple[str, int], ...]]:
        """The whole struct as one struct.Struct (fields in offset order, padding as pad bytes) and the
        (name, width) of each field, for the per-token path: a decode step re-packs dozens of params."""
        fmt, at = "<", 0
        ordered = sorted(self.fields, key=lambda f: f.offset)
        for field in ordered:
            fmt += "x" * (field.offset - at) + _FORMAT[field.scalar] * field.width
            at = field.offset + 4 * field.width
        return (struct.Struct(fmt + "x" * (self.size - at)),
                tuple((f.name, f.width, f.scalar == "u32") for f in ordered))

    def pack(self, values: dict, *, kernel: str) -> bytes:
        """The struct's bytes (little-endian, padding zeroed) from one value per field, by name: an int
        for u32 (a bool as 0/1) and i32, a real number for f32 (rounded as struct.pack('<f') rounds), a
        sequence of N of those for vecN. Raises ParamsError naming the kernel and every bad field."""
        whole, order = self._whole
        # Fast path: every field given, a bool only for a scalar u32 (struct would take one anywhere)
        # and struct accepts every value (it refuses what the checks below refuse: wrong types, out of
        # range); otherwise the field-by-field path packs or names what is wrong. (Most linears pass
        # has_bias and accumulate as bools: a plan's resize re-packs hundreds of these.)
        if len(values) == len(order):
            try:
                flat = []
                for name, width, u32 in order:
                    value = values[name]
                    if width == 1:
                        if type(value) is bool:
                            if not u32:
                                raise TypeError("a bool for a field other than u32")
                            value = int(value)
                        flat.append(value)
                    elif any(type(component) is bool for component in value):
                        raise TypeError("a bool component")
                    else:
                        flat.extend(value)
                return whole.pack(*flat)
            except (KeyError, TypeError, OverflowError, struct.error):
                pass
        missing = [name for name in self.names if name not in values]
        unknown = sorted(set(values) - set(self.names))
        bad = []
        data = bytearray(self.size)
        for field in self.fields:
            if field.name not in values:
                continue
            value, scalar, width = values[field.name], field.scalar, field.width
            if width == 1:
                components = [value]
            elif isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != width:
                bad.append(f"{field.name}={value!r} (wrong type: {field.type} takes a sequence of {width})")
                continue
            else:
                components = list(value)
            packed = []
            for i, component in enumerate(components):
                number, why = _scalar(component, scalar)
                if why is not None:
                    where = field.name if width == 1 else f"{field.name}[{i}]"
                    bad.append(f"{where}={component!r} ({why})")
                packed.append(number)
            if all(number is not None for number in packed):
                struct.pack_into("<" + _FORMAT[scalar] * width, data, field.offset, *packed)
        if missing or unknown or bad:
            parts = [f"missing {missing}"] * bool(missing) + [f"unknown {unknown}"] * bool(unknown) + \
                    [f"invalid {bad}"] * bool(bad)
            fields = [f"{field.name}: {field.type}" for field in self.fields]
            raise ParamsError(f"kernel {kernel}: params {', '.join(parts)}; fields are {fields}")
        return bytes(data)

    def unpack(self, data: bytes) -> dict:
        """The field values held in `data` (a scalar, or a tuple for a vector), by name."""
        if len(data) < self.size:
            raise ParamsError(f"params struct {self.struct} is {self.size} bytes, given {len(data)}")
        values = {}
        for field in self.fields:
            items = struct.unpack_from("<" + _FORMAT[field.scalar] * field.width, data, field.offset)
            values[field.name] = items[0] if field.width == 1 else items
        return values
