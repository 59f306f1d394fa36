"""Both backends implement the Device interface exactly: the same methods, each async where the
interface is, with the same parameters. Callers write `await` from the interface alone, so a
method that is sync in one place and async in another fails only on the backend not tested."""

from __future__ import annotations

import importlib
import inspect
import sys
import types

import pytest

from py_runtime.gpu.device import Device


@pytest.fixture(scope="module")
def browser_device_class():
    """BrowserDevice imported on the host, with stand-ins for Pyodide's modules (its methods are
    only inspected, never called); the stand-ins and the module leave sys.modules afterwards."""
    ffi = types.ModuleType("pyodide.ffi")
    ffi.JsException, ffi.create_proxy, ffi.to_js = Exception, None, None
    code = types.ModuleType("pyodide.code")
    code.run_js = None
    stand_ins = {"js": types.ModuleType("js"), "pyodide": types.ModuleType("pyodide"),
                 "pyodide.code": code, "pyodide.ffi": ffi}
    saved = {name: sys.modules.get(name) for name in (*stand_ins, "py_runtime.gpu.browser")}
    sys.modules.update(stand_ins)
    sys.modules.pop("py_runtime.gpu.browser", None)
    try:
        yield importlib.import_module("py_runtime.gpu.browser").BrowserDevice
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def _methods(cls) -> dict[str, object]:
    return {name: member for name, member in inspect.getmembers(cls)
            if not name.startswith("_") and callable(member) and not isinstance(member, type)}


def _shape(function) -> tuple:
    """Async or not, and each parameter's name, kind and default (annotations aside)."""
    parameters = tuple((p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values())
    return inspect.iscoroutinefunction(function), parameters


def _backends(browser_device_class):
    from py_runtime.gpu.native import NativeDevice
    return {"browser": browser_device_class, "native": NativeDevice}


def test_every_backend_has_exactly_the_interface_methods(browser_device_class):
    wanted = sorted(_methods(Device))
    for name, backend in _backends(browser_device_class).items():
        assert sorted(_methods(backend)) == wanted, name


@pytest.mark.parametrize("method", sorted(_methods(Device)))
def test_backend_methods_are_async_exactly_where_the_interface_is(method, browser_device_class):
    declared = _shape(getattr(Device, method))
    for name, backend in _backends(browser_device_class).items():
        assert _shape(getattr(backend, method)) == declared, f"{name} backend's {method}"


def test_the_shape_check_sees_async_drift():
    class Drifted(Device):
        def create_buffer(self, *, label, size, usage):
            raise NotImplementedError

    assert _shape(Drifted.create_buffer) != _shape(Device.create_buffer)
    assert _shape(Drifted.read_buffer) == _shape(Device.read_buffer)
