"""A workload's options, declared once: their types, defaults and allowed values.

The same declaration validates options from Python (app.run), converts the page's URL text
(`?lengths=63,4097`), builds the CLI's choices and is shown to users in every error. Lists come back
as tuples; a list may not be empty (an empty list would check nothing and still pass).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

__all__ = ["TYPES", "Option", "validate", "from_text", "to_text"]

TYPES = ("int", "int list", "float", "str", "str list", "bool")
_TRUE, _FALSE = ("1", "true"), ("0", "false")
_WORDS = {"int": "integer", "float": "number", "str": "string", "bool": "boolean"}


@dataclass(frozen=True, kw_only=True)
class Option:
    name: str
    type: str                                   # one of TYPES
    default: object                             # None: the runner decides (the option may then be None)
    allowed: tuple | None = None                # the allowed values (each item, for lists), where finite
    minimum: int | float | None = None          # numbers: the least allowed value (each item, for lists)
    url: str | None = None                      # the page's URL key, where it is not `name`
    help: str = ""

    def __post_init__(self):
        if self.type not in TYPES:
            raise ValueError(f"option {self.name!r}: type {self.type!r} is not one of {list(TYPES)}")

    @property
    def url_key(self) -> str:
        return self.url or self.name

    @property
    def is_list(self) -> bool:
        return self.type.endswith(" list")

    def _what(self) -> str:
        """What this option accepts, for error messages."""
        item = _WORDS[self.type.removesuffix(" list")]
        what = f"a non-empty list of {item}s" if self.is_list else f"a{'n' if item[0] == 'i' else ''} {item}"
        if self.type == "float":
            what = "a finite number"
        if self.allowed is not None:
            what += f" from {list(self.allowed)}"
        if self.minimum is not None:
            what += f" >= {self.minimum}"
        return what + (" (or None)" if self.default is None else "")

    def _item_ok(self, item) -> bool:
        kind = self.type.removesuffix(" list")
        if kind == "int":
            ok = isinstance(item, int) and not isinstance(item, bool)
            ok = ok and (self.minimum is None or item >= self.minimum)
        elif kind == "float":       # an int is a number too; a bool is not
            ok = isinstance(item, (int, float)) and not isinstance(item, bool) and math.isfinite(item)
            ok = ok and (self.minimum is None or item >= self.minimum)
        elif kind == "str":
            ok = isinstance(item, str)
        else:
            ok = isinstance(item, bool)
        return ok and (self.allowed is None or item in self.allowed)

    def check(self, value, suite: str):
        """`value` if it is allowed (lists as tuples); else a ValueError naming option, value and what is allowed."""
        if value is None and self.default is None:
            return None
        if self.is_list and isinstance(value, (list, tuple)) and value:
            bad = [v for v in value if not self._item_ok(v)]
            if not bad:
                return tuple(value)
            problem = f"{bad[0]!r} is not allowed"
        elif not self.is_list and self._item_ok(value):
            return value
        else:
            problem = "not allowed"
        raise ValueError(f"suite {suite!r}: option {self.name} = {value!r}: {problem}; "
                         f"{self.name} takes {self._what()}")

    def parse(self, text: str, suite: str):
        """The value of URL text: lists are comma-separated (empty items dropped), bools 0/1/true/false."""
        items = [t for t in text.split(",") if t] if self.is_list else [text]
        kind = self.type.removesuffix(" list")
        values = []
        for item in items:
            if kind in ("int", "float"):
                try:
                    values.append(int(item) if kind == "int" else float(item))
                except ValueError:
                    raise ValueError(f"suite {suite!r}: URL option {self.url_key}={text!r}: {item!r} is not "
                                     f"{'an integer' if kind == 'int' else 'a number'}; {self.url_key} takes "
                                     f"{self._what()}") from None
            elif kind == "bool":
                if item.lower() not in _TRUE + _FALSE:
                    raise ValueError(f"suite {suite!r}: URL option {self.url_key}={text!r} is not one of "
                                     f"{list(_TRUE + _FALSE)}")
                values.append(item.lower() in _TRUE)
            else:
                values.append(item)
        return self.check(values if self.is_list else values[0], suite)

    def to_json(self) -> dict:
        default = list(self.default) if isinstance(self.default, tuple) else self.default
        return {"name": self.name, "type": self.type, "default": default, "url": self.url_key,
                "allowed": None if self.allowed is None else list(self.allowed), "minimum": self.minimum,
                "help": self.help}


def validate(suite: str, options: Sequence[Option], given: Mapping) -> dict:
    """Every option's value: `given`'s, checked, else its default. Unknown names: one error listing the valid ones."""
    by_name = {o.name: o for o in options}
    unknown = sorted(set(given) - set(by_name))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for suite {suite!r}; valid options: {sorted(by_name)}")
    return {o.name: o.check(given[o.name], suite) if o.name in given else o.default for o in options}


def from_text(suite: str, options: Sequence[Option], pairs: Sequence[tuple[str, str]],
              reserved: Sequence[str] = ()) -> dict:
    """Options from URL (key, text) pairs, converted by their declared types. `reserved` keys belong to
    the caller: skipped here, listed as valid. Unknown or repeated keys are errors that list the valid keys."""
    by_key = {o.url_key: o for o in options}
    values: dict = {}
    for key, text in pairs:
        if key in reserved:
            continue
        option = by_key.get(key)
        if option is None:
            raise ValueError(f"unknown URL option {key} for suite {suite!r}; valid: {[*by_key, *reserved]}")
        if option.name in values:
            raise ValueError(f"URL option {key} is given twice")
        values[option.name] = option.parse(text, suite)
    return values


def to_text(options: Sequence[Option], values: Mapping) -> dict[str, str]:
    """The URL (key, text) pairs of `values` (the inverse of from_text); None values are left out."""
    by_name = {o.name: o for o in options}
    text = {}
    for name, value in values.items():
        if value is None:
            continue
        option = by_name[name]
        items = value if option.is_list else (value,)
        text[option.url_key] = ",".join(str(int(v)) if isinstance(v, bool) else str(v) for v in items)
    return text
