#!/usr/bin/env bash
# Here (a CPU machine): build revision REV (default HEAD~1) into .alt/, a git-ignored copy of the tree with
# its own runtime wheel, for scripts/gpu_host_ab.sh to run against this checkout in one device call.
#   usage: bash scripts/gpu_host_alt.sh [REV]          then carry .alt (about 14 MB) in the device call
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-HEAD~1}
work=$(mktemp -d)
trap 'git worktree remove --force "$work/tree" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git worktree add -q --detach "$work/tree" "$rev"
python=$PWD/.venv/bin/python
cp -r web/vendor "$work/tree/web/"          # what vendor packs beside the wheel, as setup.sh fetched it
(cd "$work/tree" && PYTHONPATH="$work/tree" "$python" -m py_runtime.host.vendor >/dev/null)
rm -rf .alt
mkdir .alt
# the tree without what the device steps never read (the page's Pyodide rides in the call's own carry)
tar cf - -C "$work/tree" --exclude=.git --exclude=docs --exclude=tests --exclude=e2e --exclude=__pycache__ \
  --exclude=web/vendor/pyodide --exclude=web/vendor/ort --exclude=web/vendor/tokenizers --exclude=web/vendor/models \
  --exclude=web/vendor/peer . | tar xf - -C .alt
cp scripts/gpu_host_run.sh scripts/gpu_host_ab.sh .alt/scripts/     # this checkout's steps on both sides
grep -qs '^/.alt/$' .git/info/exclude || { mkdir -p .git/info; echo /.alt/ >> .git/info/exclude; }
echo "gpu_host_alt.sh: $(git rev-parse --short "$rev") in .alt/ ($(du -sh .alt | cut -f1)); carry .alt beside web/vendor/wheels"
