"""The WGSL template language: `${expr}` substitution and `$if/$elif/$else/$for` statement lines.

A line whose first non-blank character is `$` is a statement; the lines below it that are indented
deeper form its block, and are emitted with that extra indentation removed (so a block keeps the
indentation of its statement line). Expressions are a small,
safe subset of Python (names, literals, arithmetic, comparisons, boolean logic, indexing,
conditional expressions, `range`), evaluated without `eval`.
"""

from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass

__all__ = ["TemplateError", "render", "uses_template_syntax"]

_SUBST = re.compile(r"\$\{([^}]*)\}")
_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
}
_CMPOPS = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_FUNCTIONS = {"range": range, "len": len, "int": int, "str": str, "max": max, "min": min}


@dataclass
class TemplateError(Exception):
    """A template fault, located by file and 1-based line."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def uses_template_syntax(text: str) -> int | None:
    """The first 1-based line that uses `$` template syntax, or None."""
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("$") or _SUBST.search(line):
            return number
    return None


def render(text: str, params: dict, *, path: str = "<template>") -> str:
    lines = text.splitlines()
    out: list[str] = []
    _render_block(lines, 0, len(lines), dict(params), out, path)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _block_end(lines: list[str], start: int, stop: int, indent: int) -> int:
    """First line at or after `start` (skipping blanks) indented no deeper than `indent`."""
    end = start
    while end < stop:
        if lines[end].strip() and _indent(lines[end]) <= indent:
            break
        end += 1
    return end


def _dedent(lines: list[str], start: int, end: int, indent: int) -> list[str]:
    """The block's lines with only their extra indentation (relative to the statement) removed."""
    body = [line for line in lines[start:end] if line.strip()]
    cut = max(0, min((_indent(line) for line in body), default=indent) - indent)
    return [line[cut:] for line in lines[start:end]]


def _render_block(lines, start, stop, scope, out, path):
    i = start
    while i < stop:
        line = lines[i]
        stripped = line.strip()
        if not stripped.startswith("$") or stripped.startswith("${"):
            out.append(_substitute(line, scope, path, i + 1))
            i += 1
            continue
        indent = _indent(line)
        statement = stripped[1:].strip()
        if not statement.endswith(":"):
            raise TemplateError(path, i + 1, f"statement must end with ':': {stripped!r}")
        keyword, _, rest = statement[:-1].partition(" ")
        if keyword == "for":
            name, sep, iterable = rest.partition(" in ")
            if not sep or not name.strip().isidentifier():
                raise TemplateError(path, i + 1, f"expected '$for NAME in EXPR:', got {stripped!r}")
            end = _block_end(lines, i + 1, stop, indent)
            body = _dedent(lines, i + 1, end, indent)
            for value in _evaluate(iterable, scope, path, i + 1):
                _render_block_lines(body, {**scope, name.strip(): value}, out, path, i + 2)
            i = end
        elif keyword == "if":
            i = _render_if(lines, i, stop, indent, scope, out, path)
        elif keyword in ("elif", "else"):
            raise TemplateError(path, i + 1, f"'${keyword}' without a matching '$if'")
        else:
            raise TemplateError(path, i + 1, f"unknown statement '${keyword}'")


def _render_block_lines(body, scope, out, path, first_line):
    try:
        _render_block(body, 0, len(body), scope, out, path)
    except TemplateError as error:
        raise TemplateError(path, error.line + first_line - 1, error.message) from None


def _render_if(lines, i, stop, indent, scope, out, path) -> int:
    taken = False
    while True:
        statement = lines[i].strip()[1:].strip()[:-1]
        keyword, _, condition = statement.partition(" ")
        end = _block_end(lines, i + 1, stop, indent)
        if keyword == "else":
            chosen = not taken
        else:
            chosen = not taken and bool(_evaluate(condition, scope, path, i + 1))
        if chosen:
            _render_block_lines(_dedent(lines, i + 1, end, indent), scope, out, path, i + 2)
            taken = True
        i = end
        follow = lines[i].strip() if i < stop else ""
        if i < stop and _indent(lines[i]) == indent and follow[1:].lstrip().startswith(("elif ", "else:")):
            if keyword == "else":
                raise TemplateError(path, i + 1, "branch after '$else'")
            continue
        return i


def _substitute(line: str, scope: dict, path: str, number: int) -> str:
    if "$" in line.replace("${", ""):
        raise TemplateError(path, number, f"stray '$' in {line.strip()!r}")
    return _SUBST.sub(lambda m: str(_evaluate(m.group(1), scope, path, number)), line)


def _evaluate(source: str, scope: dict, path: str, number: int):
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as error:
        raise TemplateError(path, number, f"bad expression {source!r}: {error.msg}") from None
    try:
        return _eval_node(tree.body, scope)
    except TemplateError:
        raise
    except NameError as error:
        raise TemplateError(path, number, str(error)) from None
    except Exception as error:  # arithmetic faults inside an expression
        raise TemplateError(path, number, f"cannot evaluate {source!r}: {error}") from None


def _eval_node(node, scope):
    match node:
        case ast.Constant(value=value):
            return value
        case ast.Name(id=name):
            if name in scope:
                return scope[name]
            if name in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[name]
            raise NameError(f"unknown name {name!r}")
        case ast.BinOp(left=left, op=op, right=right) if type(op) in _BINOPS:
            return _BINOPS[type(op)](_eval_node(left, scope), _eval_node(right, scope))
        case ast.UnaryOp(op=ast.USub(), operand=operand):
            return -_eval_node(operand, scope)
        case ast.UnaryOp(op=ast.Not(), operand=operand):
            return not _eval_node(operand, scope)
        case ast.BoolOp(op=op, values=values):
            results = (_eval_node(v, scope) for v in values)
            return all(results) if isinstance(op, ast.And) else any(results)
        case ast.Compare(left=left, ops=ops, comparators=comparators):
            value = _eval_node(left, scope)
            for op, other in zip(ops, comparators):
                rhs = _eval_node(other, scope)
                if type(op) not in _CMPOPS or not _CMPOPS[type(op)](value, rhs):
                    return False
                value = rhs
            return True
        case ast.IfExp(test=test, body=body, orelse=orelse):
            return _eval_node(body if _eval_node(test, scope) else orelse, scope)
        case ast.Subscript(value=value, slice=index):
            return _eval_node(value, scope)[_eval_node(index, scope)]
        case ast.Tuple(elts=elts) | ast.List(elts=elts):
            return [_eval_node(e, scope) for e in elts]
        case ast.Call(func=ast.Name(id=name), args=args, keywords=[]) if name in _FUNCTIONS:
            return _FUNCTIONS[name](*(_eval_node(a, scope) for a in args))
    raise NameError(f"unsupported expression element {ast.dump(node)[:60]}")
