#!/usr/bin/env bash
# Prepares a fresh Debian machine for the lab; idempotent, and offline after its first run.
#   - Debian's chromium (the browser the e2e tests drive) and mesa's lavapipe (native Vulkan on CPU)
#   - .venv with the project installed editable, with its host extras (numpy, PyYAML, wgpu, playwright, pytest)
#   - web/vendor/pyodide: the npm package pyodide@314.0.7, integrity-checked against the pin below
#   - web/vendor/wheels: micropip 0.11.1 from PyPI (sha256-checked) and a pure wheel of py_runtime
#   - web/vendor/manifest.json: what the page loads, with sha256 of each file
# pyodide-build is deliberately not used: it downloads a cross-build environment on every run and
# cannot work offline. py_runtime is pure Python, so `pip wheel` builds a wheel Pyodide installs as is.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

PYODIDE_VERSION=314.0.7
PYODIDE_INTEGRITY='sha512-0YvXxEhfEdpLfb/XkM2BFAeMROq0iMUX2bzzH9pOttyMcWkwq+HbE5uyuGD82LN7y2q+SNvi/6V5JEsOlD2R1A=='
MICROPIP_WHEEL=micropip-0.11.1-py3-none-any.whl
MICROPIP_SHA256=768de165adb8e66906039d8fec4127a57f522dfdf8e6fbff877a4616941ecfd3
LAVAPIPE_ICD=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json

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
  .venv/bin/python -m pip install -q -e '.[host]'
  rm -f .venv/.installed-*; touch "$stamp"
fi

# 3. Pyodide from the npm registry, checked against the pinned integrity.
mkdir -p .cache web/vendor/wheels
tgz=.cache/pyodide-$PYODIDE_VERSION.tgz
if [ ! -f web/vendor/pyodide/.version-$PYODIDE_VERSION ]; then
  if [ ! -f "$tgz" ]; then
    say "downloading pyodide@$PYODIDE_VERSION from the npm registry"
    (cd .cache && npm pack "pyodide@$PYODIDE_VERSION" --silent >/dev/null)
  fi
  got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  [ "$got" = "$PYODIDE_INTEGRITY" ] || { rm -f "$tgz"; die "pyodide tarball integrity mismatch: $got"; }
  rm -rf web/vendor/pyodide && mkdir -p web/vendor/pyodide
  tar -xzf "$tgz" -C web/vendor/pyodide --strip-components=1 package
  touch web/vendor/pyodide/.version-$PYODIDE_VERSION
fi

# 4. micropip from PyPI (not in the npm package; loaded by URL because its sha256 differs from the lockfile).
if [ ! -f "web/vendor/wheels/$MICROPIP_WHEEL" ]; then
  say "downloading $MICROPIP_WHEEL from PyPI"
  .venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.14 \
    -d web/vendor/wheels micropip==0.11.1
fi
echo "$MICROPIP_SHA256  web/vendor/wheels/$MICROPIP_WHEEL" | sha256sum -c --quiet - \
  || die "micropip wheel sha256 mismatch"

# 5. The runtime wheel the page installs (rebuilt every time: it is the code under test).
rm -f web/vendor/wheels/webgpu_llm_lab-*.whl
.venv/bin/python -m pip wheel -q --no-deps --no-build-isolation -w web/vendor/wheels . >/dev/null
rm -rf build py_runtime.egg-info webgpu_llm_lab.egg-info
runtime_wheel=$(cd web/vendor/wheels && ls webgpu_llm_lab-*.whl)

# 6. The manifest the page reads to find (and name) what it loads.
.venv/bin/python - "$PYODIDE_VERSION" "$MICROPIP_WHEEL" "$runtime_wheel" <<'EOF'
import hashlib, json, pathlib, sys
version, micropip, runtime = sys.argv[1:]
wheels = pathlib.Path("web/vendor/wheels")
digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()
manifest = {
    "pyodide": {"version": version, "index_url": "vendor/pyodide/"},
    "micropip": {"url": f"vendor/wheels/{micropip}", "sha256": digest(wheels / micropip)},
    "runtime": {"url": f"vendor/wheels/{runtime}", "sha256": digest(wheels / runtime)},
}
pathlib.Path("web/vendor/manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
EOF
say "ready: chromium $(chromium --version 2>/dev/null | awk '{print $2}'), pyodide $PYODIDE_VERSION, $runtime_wheel"
