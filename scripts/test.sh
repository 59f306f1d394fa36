#!/usr/bin/env bash
# Set up (idempotent), check the committed kernels are current, then run every test:
# host tests (codegen, server, native backend on lavapipe) and e2e tests in headless Chromium.
#   bash scripts/test.sh [pytest args]     e.g. -m full for the opt-in large cases
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/webgpu-llm-lab gen --check
exec .venv/bin/python -m pytest -ra --durations=15 "$@"
