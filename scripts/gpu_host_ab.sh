#!/usr/bin/env bash
# On the GPU host, after the Chromium install: a gpu_host_run.sh step run by this checkout ("new") and by the
# older build in .alt/ ("old", from scripts/gpu_host_alt.sh), alternating on the same warm machine, AB_ROUNDS
# rounds (default 1). Each side's tables and JSON go to $OUT/<side>-<round>.tar.gz; the line printed per run is
# its table's figures (bench model: prefill tok/s, TTFT, prefill GPU us, decode tok/s, host ms, GPU us/step).
#   usage: [AB_ROUNDS="1 2"] [MODELS=...] bash scripts/gpu_host_ab.sh STEP
set -uo pipefail
cd "$(dirname "$0")/.."
step=${1:?a gpu_host_run.sh step}
out=${OUT:-results/ab}
mkdir -p "$out"
[ -d .whl ] || cp -r /opt/gpu-browser/keep/.whl .
[ -d web/vendor/pyodide ] || cp -r /opt/gpu-browser/keep/pyodide web/vendor/
[ -d .alt/.whl ] || cp -r .whl .alt/
[ -d .alt/web/vendor/pyodide ] || cp -r web/vendor/pyodide .alt/web/vendor/
for r in ${AB_ROUNDS:-1}; do
  for side in new old; do
    root=.; [ "$side" = old ] && root=.alt
    rm -rf "$root/results/gpu-run" "$root/results/gpu"
    (cd "$root" && OUT=results/gpu bash scripts/gpu_host_run.sh "$step" >/dev/null 2>&1)
    tar czf "$out/$side-$r.tar.gz" -C "$root/results" gpu-run
    for f in "$root"/results/gpu-run/*.txt; do
      case $(basename "$f") in chromium-*) continue ;; esac
      echo "$side-$r $(basename "$f" .txt): $(sed -n 5p "$f")"
    done
  done
done
