"""webgpu-llm-lab runtime: generated WGSL kernels driven through one small WebGPU device interface.

Everything outside `py_runtime.host` and `py_runtime.gpu.native` runs unchanged inside Pyodide and
imports only the standard library (and, in `py_runtime.gpu.browser`, pyodide and js).
"""

__version__ = "0.1.0"
