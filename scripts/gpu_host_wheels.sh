#!/usr/bin/env bash
# Fills .whl/ with the wheels scripts/gpu_host_run.sh installs on the lent GPU host (docs/GPU_HOST.md):
# the native backend's wgpu and the packages it needs that the host's image lacks, built for the
# host's Python 3.12 on manylinux x86_64, at the versions the CPU machines test with. numpy and
# PyYAML are not carried: the host's image has both (numpy 2.x, which rendercanvas and the oracle use).
#   usage: bash scripts/gpu_host_wheels.sh [NAME==VERSION ...]    (extra wheels, if an image lacks one)
set -euo pipefail
cd "$(dirname "$0")/.."
wheels=(
  wgpu==0.32.0          # pyproject.toml pins it; wgpu-native is inside the wheel
  cffi==2.1.1           # wgpu's C bindings
  pycparser==3.12       # cffi's
  rendercanvas==2.7.2   # wgpu imports it (it needs numpy, already on the host)
)
rm -rf .whl             # one version of each: two of one package stop the whole install there
mkdir .whl
${PYTHON:-python3} -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl "${wheels[@]}" "$@"
# One font: the host has none, and Chromium aborts (SkFontMgr_FontConfigInterface "Not implemented") when
# the page's form controls ask for a font where fontconfig knows of none. gpu_host_run.sh points
# fontconfig at it. Debian's fonts-dejavu-core (Chromium's dependencies bring it).
mkdir .whl/fonts
cp /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf .whl/fonts/
ls -l .whl
echo "gpu_host_wheels.sh: $(ls .whl/*.whl | wc -l) wheels and a font, $(du -sh .whl | cut -f1) in .whl/ (git-ignored: name .whl in a device call's carry)"
