"""The code that runs in the browser imports only the standard library, pyodide/js and itself.

Pyodide has no numpy, PyYAML or wgpu wheels here: one stray import would only fail in the page.
Host-only modules (py_runtime/host, the native backend) are the exceptions, reached lazily.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "py_runtime"
HOST_ONLY = {"host", "gpu/native.py", "__main__.py"}
ALLOWED_TOP = set(sys.stdlib_module_names) | {"pyodide", "js", "py_runtime", "__future__"}


def _browser_modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.split("/")[0] in HOST_ONLY or rel in HOST_ONLY:
            continue
        yield rel, path


def _imports(tree):
    """(module imported, relative level, inside a function?) for every import in the module."""
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                found.extend((alias.name, 0, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                found.append((child.module or "", child.level, in_function))
            visit(child, nested)

    visit(tree, False)
    return found


@pytest.mark.parametrize("rel,path", list(_browser_modules()), ids=lambda v: v if isinstance(v, str) else "")
def test_browser_path_imports_only_stdlib_pyodide_and_itself(rel, path):
    for module, level, in_function in _imports(ast.parse(path.read_text())):
        if level == 0:
            assert module.split(".")[0] in ALLOWED_TOP, f"py_runtime/{rel} imports {module!r}"
            assert not module.startswith("py_runtime.host"), f"py_runtime/{rel} imports host code"
        else:
            target = module.split(".")
            assert "host" not in target, f"py_runtime/{rel} imports host code ({'.' * level}{module})"
            if "native" in target:
                assert in_function, f"py_runtime/{rel} imports the native backend at module level"


def test_the_audit_sees_the_browser_backend():
    names = [rel for rel, _ in _browser_modules()]
    assert "gpu/browser.py" in names and "checks/unary.py" in names and "gpu/native.py" not in names
