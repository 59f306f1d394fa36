#!/usr/bin/env bash
# Set up (idempotent) and serve the lab page on 127.0.0.1; the page runs the unary check by default.
#   PORT=8123 bash scripts/demo.sh     to pick another port (0 = any free port)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/webgpu-llm-lab serve --port "${PORT:-8000}"
