#!/usr/bin/env bash
# Set up (idempotent) and serve the lab page on 127.0.0.1; the page runs a model by default (the Model view:
# a tiny model on a CPU adapter, Llama-3.2-1B's geometry at full depth on a GPU) and the dev server's
# transformers oracle judges its logits.
#   PORT=8123 bash scripts/demo.sh     to pick another port (0 = any free port)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/webgpu-llm-lab serve --port "${PORT:-8000}"
