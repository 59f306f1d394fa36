#!/usr/bin/env bash
# On the lent GPU host (no registry, no Playwright; docs/GPU_HOST.md says how to get there): installs
# the carried wheels (.whl/, from scripts/gpu_host_wheels.sh), then runs the checks and benchmarks
# natively (wgpu on the NVIDIA Vulkan driver) and in Chromium (LAB_CHROMIUM, driven without
# Playwright), and packs every table and JSON into $OUT/gpu-results.tar.gz plus $OUT/summary.txt.
#   usage: bash scripts/gpu_host_run.sh [step ...]     (default: every step)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-results/gpu}
work=results/gpu-run
mkdir -p "$out" "$work" results
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
export LAB_CHROMIUM=${LAB_CHROMIUM:-/opt/gpu-browser/chromium-gpu}
if [ -d .whl/fonts ]; then     # the host has no fonts; without one Chromium aborts on the page's form controls
  printf '<?xml version="1.0"?>\n<fontconfig><dir>%s</dir><cachedir>/tmp/lab-fontconfig</cachedir></fontconfig>\n' \
    "$PWD/.whl/fonts" > /tmp/lab-fonts.conf
  export FONTCONFIG_FILE=/tmp/lab-fonts.conf
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$work/nvidia-smi.csv" 2>&1
# Clocks and power through the run (GPUs downclock between measurements; the bench warms up first).
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,pstate,utilization.gpu --format=csv -lms 250 \
  > "$work/clocks.csv" 2>&1 &
clock_log=$!

step() {
  local name=$1 limit=$2; shift 2
  echo "== $name ($(date +%T))" | tee -a "$out/summary.txt"
  timeout "$limit" python3 -m py_runtime "$@" --json "$work/$name.json" > "$work/$name.txt" 2>&1
  echo "rc=$? ($(date +%T))" | tee -a "$out/summary.txt"
  grep -v "^  console" "$work/$name.txt" | tail -n 45 >> "$out/summary.txt"
}

SMOLLM2=web/vendor/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
SMOLLM2_ASK="What is the capital of France?"
SMOLLM2_LONG="Write a long story about a lighthouse keeper and a storm."
SAMPLING="--temperature 0.8 --top-k 40 --top-p 0.95 --seed 1"

# per_shape STEP PRESET PATTERN SHAPE...: a browser run of PRESET per shape, its cases those whose name
# contains PATTERN with %s replaced by the shape.
per_shape() {
  local name=$1 preset=$2 pattern=$3 shape; shift 3
  for shape in "$@"; do
    # shellcheck disable=SC2059
    step "$name-$shape" 90 bench kernels --backend browser --driver plain --preset "$preset" --trials 3 \
      --only "$(printf "$pattern" "$shape")" --timeout 80
  done
}

# The default fits two device calls of 10 minutes: run it as two halves (native-*, then browser-*).
steps=${*:-"native-check browser-check native-host browser-host native-kernels browser-kernels native-int8 browser-int8 native-step browser-step"}
for s in $steps; do
  case $s in
    native-check)    step "$s" 150 check --suite q4 --backend native ;;
    browser-check)   step "$s" 150 check --suite q4 --backend browser --driver plain ;;
    native-host)     step "$s" 90 bench host --backend native --steps 100 ;;
    browser-host)    step "$s" 110 bench host --backend browser --driver plain --steps 100 --timeout 100 ;;
    native-kernels)  step "$s" 140 bench kernels --backend native --preset decode ;;
    browser-kernels) step "$s" 140 bench kernels --backend browser --driver plain --preset decode --timeout 130 ;;
    native-gemv)     step "$s" 150 bench kernels --backend native --preset gemv_variants ;;
    browser-gemv)    step "$s" 150 bench kernels --backend browser --driver plain --preset gemv_variants --timeout 140 ;;
    native-vocab)    step "$s" 100 bench kernels --backend native --preset gemv_vocab ;;
    browser-vocab)   step "$s" 100 bench kernels --backend browser --driver plain --preset gemv_vocab --timeout 90 ;;
    native-next)     step "$s" 280 bench kernels --backend native --preset gemv_next --trials 3 ;;
    browser-next)    step "$s" 280 bench kernels --backend browser --driver plain --preset gemv_next --trials 3 --timeout 270 ;;
    native-int8)     step "$s" 200 bench kernels --backend native --preset decode_int8 ;;
    browser-int8)    step "$s" 200 bench kernels --backend browser --driver plain --preset decode_int8 --timeout 190 ;;
    native-check8x)  step "$s" 150 check --suite q4 --preset int8x --backend native ;;
    browser-check8x) step "$s" 300 check --suite q4 --preset int8x --backend browser --driver plain --timeout 290 ;;
    native-int8x)    step "$s" 280 bench kernels --backend native --preset gemv_int8x --trials 3 ;;
    # Variant sweeps, one browser per shape (each run stays short and its table readable):
    browser-int8x)   per_shape "$s" gemv_int8x "llama.%s." q_o kv qkv_as_one gate_up gate_up_glu down lm_head ;;
    # the fused gate/up + SwiGLU GEMV, plain and writing down's int8 input (glu_q8), every variant
    browser-glu-q8)  per_shape "$s" gemv_int8x "llama.%s" gate_up_glu ;;
    browser-glu-q8-qwen) per_shape "$s" gemv_int8x_qwen "qwen.%s" gate_up_glu ;;
    # the same writing down's int8 input, with and without the RMSNorm prologue (_norm), every shape
    browser-glu-q8-norm) per_shape "$s-llama" gemv_int8x "llama.%s" gate_up_glu_q8
                     per_shape "$s-qwen" gemv_int8x_qwen "qwen.%s" gate_up_glu_q8 ;;
    # the decode QKV applying RoPE (its norm prologue, Qwen3's q/k norm), every variant, beside the plain QKV
    browser-qkv-rope) step "$s" 150 bench kernels --backend browser --driver plain --preset qkv_rope --trials 3 \
                       --timeout 140 ;;
    # the row-major copy's variants (the latency shapes included)
    browser-split)   per_shape "$s" gemv_int8x "llama.%s.int8x.rows" q_o kv qkv_as_one gate_up gate_up_glu down ;;
    # the same with the reference scale layout, at the latency-bound shapes
    browser-split-ref) per_shape "$s" gemv_int8x "llama.%s.int8x[" q_o kv qkv_as_one down ;;
    # Qwen3's latency-bound shapes and fused gate/up under the row-major copy's variants
    browser-split-qwen) per_shape "$s" gemv_int8x_qwen "qwen.%s." q kv o down gate_up_glu ;;
    native-dec8x)    step "$s" 120 bench kernels --backend native --preset decode_int8x ;;
    browser-dec8x)   step "$s" 120 bench kernels --backend browser --driver plain --preset decode_int8x --timeout 110 ;;
    native-qwen)     step "$s" 120 bench kernels --backend native --preset qwen_step ;;
    browser-qwen)    step "$s" 120 bench kernels --backend browser --driver plain --preset qwen_step --timeout 110 ;;
    native-step)     step "$s" 120 bench kernels --backend native --preset llama_step ;;
    browser-step)    step "$s" 120 bench kernels --backend browser --driver plain --preset llama_step --timeout 110 ;;
    # Prefill GEMMs: the f32 routes and the DP4A GEMM at Llama's projections, M 128 and 512, beside the
    # dot4I8Packed and fma probes; then the DP4A tiles; and the DP4A route's checks on the GPU.
    native-prefill)  step "$s" 200 bench kernels --backend native --preset prefill ;;
    # the int8 GEMMs with and without split K (the rows ".split_k")
    native-prefill-split)  step "$s" 150 bench kernels --backend native --preset prefill --only .dp4a ;;
    browser-prefill-split) step "$s" 150 bench kernels --backend browser --driver plain --preset prefill --only .dp4a .sgmat \
                             --timeout 140 ;;
    native-check-dp4a)     step "$s" 150 check --suite q4 --preset dp4a --backend native ;;
    browser-prefill) step "$s" 200 bench kernels --backend browser --driver plain --preset prefill --timeout 190 ;;
    native-prefill-tiles)  step "$s" 300 bench kernels --backend native --preset prefill_dp4a --trials 3 ;;
    browser-prefill-tiles) step "$s" 300 bench kernels --backend browser --driver plain --preset prefill_dp4a --trials 3 --timeout 290 ;;
    # The subgroup-matrix GEMM (Chromium only: wgpu-native has no such feature): its checks against the
    # float64 oracle (every tile), then its tiles at the same shapes as prefill_dp4a.
    browser-check-sgmat)   step "$s" 150 check --suite q4 --preset sgmat --backend browser --driver plain --timeout 140 ;;
    browser-prefill-sgmat) step "$s" 300 bench kernels --backend browser --driver plain --preset prefill_sgmat --trials 3 --timeout 290 ;;
    # the same with Chromium's f16 on NVIDIA: shader-f16 and the f16 subgroup-matrix configs (the f16 GEMM)
    browser-check-f16)   step "$s" 150 check --suite q4 --preset sgmat_f16 --backend browser --driver plain --timeout 140 \
                           --browser-flags=--enable-dawn-features=vulkan_enable_f16_on_nvidia ;;
    browser-prefill-f16) step "$s" 200 bench kernels --backend browser --driver plain --preset prefill --timeout 190 \
                           --browser-flags=--enable-dawn-features=vulkan_enable_f16_on_nvidia ;;
    # the f16 GEMM's tiles at Llama's projections, M 128 and 512 (f16 flag)
    browser-prefill-sgmat-f16) step "$s" 200 bench kernels --backend browser --driver plain --preset prefill_sgmat_f16 \
                           --trials 3 --timeout 190 --browser-flags=--enable-dawn-features=vulkan_enable_f16_on_nvidia ;;
    native-check-dp4a)  step "$s" 90 check --suite q4 --preset dp4a --backend native ;;
    browser-check-dp4a) step "$s" 120 check --suite q4 --preset dp4a --backend browser --driver plain ;;
    native-attention)  step "$s" 120 check --suite attention --backend native ;;
    browser-attention) step "$s" 120 check --suite attention --backend browser --driver plain --timeout 110 ;;
    # the KV cache in shader-f16 types (Chromium's f16 flag gives shader-f16 on NVIDIA): the attention suite,
    # whose kv_f16 cases then run the kvf16_ spellings, and each route's two spellings side by side
    browser-attention-f16) step "$s" 120 check --suite attention --backend browser --driver plain --timeout 110 \
                           --browser-flags=--enable-dawn-features=vulkan_enable_f16_on_nvidia ;;
    browser-attn-kvf16)  step "$s" 200 bench kernels --backend browser --driver plain --preset attention_kv_f16 --timeout 190 \
                           --browser-flags=--enable-dawn-features=vulkan_enable_f16_on_nvidia ;;
    native-attn-kvf16)   step "$s" 200 bench kernels --backend native --preset attention_kv_f16 ;;
    # whole models with the caches' kernels packed and in shader-f16 types, alternating, f16 flag (CONTEXT=4096: the
    # steps ending there)
    browser-model-kvf16) for r in ${ROUNDS:-1}; do for m in ${MODELS:-llama qwen3}; do for k in packed f16; do
                       step "$s-$m-$k-$r" 150 bench model --backend browser --driver plain --model "$m" --policy int8x \
                         --prompt 128 --decode 128 --kv "$k" --context "${CONTEXT:-0}" --timeout 140 \
                         --browser-flags=--enable-dawn-features=vulkan_enable_f16_on_nvidia
                     done; done; done ;;
    native-attn-decode)  step "$s" 150 bench kernels --backend native --preset attention_decode ;;
    browser-attn-decode) step "$s" 150 bench kernels --backend browser --driver plain --preset attention_decode --timeout 140 ;;
    # the FlashDecoding routes only (the materialized decode takes minutes at long contexts)
    native-attn-flash)   step "$s" 150 bench kernels --backend native --preset attention_decode --only flash ;;
    browser-attn-flash)  step "$s" 150 bench kernels --backend browser --driver plain --preset attention_decode --only flash --timeout 140 ;;
    # every subgroup split-pass variant at several workgroup targets, context 4096
    browser-flash-sweep) step "$s" 290 bench kernels --backend browser --driver plain --preset attention_flash_sweep --trials 3 --timeout 280 ;;
    # the decode routes on subgroups (the one pass, FlashDecoding) against the stream, contexts 128..8192
    browser-attn-decode-sg) step "$s" 150 bench kernels --backend browser --driver plain --preset attention_decode \
                           --only decode_subgroup flash_subgroup --timeout 140 ;;
    # the one-pass decode's variants against FlashDecoding on subgroups, contexts 128..2048 (its reach)
    browser-onepass-sweep) step "$s" 290 bench kernels --backend browser --driver plain --preset attention_decode_sweep --trials 3 --timeout 280 ;;
    browser-attn-gqa3)   step "$s" 120 bench kernels --backend browser --driver plain --preset attention_gqa3 --timeout 110 ;;
    native-attn-prefill)  step "$s" 120 bench kernels --backend native --preset attention_prefill ;;
    browser-attn-prefill) step "$s" 120 bench kernels --backend browser --driver plain --preset attention_prefill --timeout 110 ;;
    # The f16 subgroup-matrix prefill attention (f16 flag): its checks against the float64 oracle (every
    # variant, the issue's lengths and starts), then every variant at S 128 / 512 / 2048, then the routes
    # (ONLY="case ...": those cases alone, what they read back kept in $work/$s-artifacts)
    browser-check-sgmat-attn) step "$s" 280 check --suite attention --preset sgmat_f16 --backend browser --driver plain \
                           --timeout 140 --browser-flags=--enable-dawn-features=vulkan_enable_f16_on_nvidia \
                           ${ONLY:+--only $ONLY --keep-artifacts $work/$s-artifacts} ;;
    browser-attn-sgmat-sweep) step "$s" 150 bench kernels --backend browser --driver plain --trials 3 --timeout 140 \
                           --preset attention_prefill_sgmat_sweep --browser-flags=--enable-dawn-features=vulkan_enable_f16_on_nvidia ;;
    browser-attn-prefill-f16) step "$s" 150 bench kernels --backend browser --driver plain --preset attention_prefill \
                           --timeout 140 --browser-flags=--enable-dawn-features=vulkan_enable_f16_on_nvidia ;;
    browser-attn-prefill-short) step "$s" 150 bench kernels --backend browser --driver plain --preset attention_prefill_short \
                           --trials 3 --timeout 140 --browser-flags=--enable-dawn-features=vulkan_enable_f16_on_nvidia ;;
    browser-prefill-sweep) step "$s" 150 bench kernels --backend browser --driver plain --preset attention_prefill_sweep --trials 3 --timeout 140 ;;
    native-check-sgprefill)  step "$s" 90 check --suite attention --preset subgroup_prefill --backend native ;;
    browser-check-sgprefill) step "$s" 90 check --suite attention --preset subgroup_prefill --backend browser --driver plain --timeout 80 ;;
    # Whole models at full depth (issue 14): prompt 128 and 512, 128 greedy steps, per policy.
    native-model)    for m in llama qwen3; do for p in f32 int8x; do
                       step "$s-$m-$p" 150 bench model --backend native --model "$m" --policy "$p" --prompt 128 --decode 128
                     done; done ;;
    browser-model)   for m in llama qwen3; do for p in f32 int8x; do
                       step "$s-$m-$p" 150 bench model --backend browser --driver plain --model "$m" --policy "$p" \
                         --prompt 128 --decode 128 --timeout 140
                     done; done ;;
    browser-model-int8x) for m in llama qwen3; do
                       step "$s-$m" 150 bench model --backend browser --driver plain --model "$m" --policy int8x \
                         --prompt 128 --decode 128 --timeout 140
                     done ;;
    # A diagnosis, not a configuration we ship: the same with Dawn's safety work off (bounds clamps in every
    # shader, zeroed workgroup memory, command validation in the GPU process), to see what each costs here
    browser-model-unsafe) for m in llama qwen3; do
                       step "$s-$m" 150 bench model --backend browser --driver plain --model "$m" --policy int8x \
                         --prompt 128 --decode 128 --timeout 140 \
                         --browser-flags=--enable-dawn-features=disable_robustness,disable_workgroup_init,skip_validation
                     done ;;
    # the decode norms as their own dispatches against inside the GEMVs (the _norm routes), int8x, per model
    browser-model-fusenorm) for m in llama qwen3; do for f in --no-fuse-norm ""; do
                       step "$s-$m${f:+-off}" 150 bench model --backend browser --driver plain --model "$m" --policy int8x \
                         --prompt 128 --decode 128 --timeout 140 $f
                     done; done ;;
    # the ids read once at the end (every 128 steps) against browser-model-int8x's every 16: what the reads cost
    browser-model-batch128) for m in llama qwen3; do
                       step "$s-$m" 150 bench model --backend browser --driver plain --model "$m" --policy int8x \
                         --prompt 128 --decode 128 --batch 128 --timeout 140
                     done ;;
    # the one-pass decode against FlashDecoding at every context, alternating (ROUNDS="1 2": two rounds)
    browser-model-onepass) for r in ${ROUNDS:-1}; do for m in llama qwen3; do for a in flash auto; do
                       step "$s-$m-$a-$r" 150 bench model --backend browser --driver plain --model "$m" --policy int8x \
                         --prompt 128 --decode 128 --attention "$a" --timeout 140
                     done; done; done ;;
    # decode steps per submit (one command buffer for several tokens) against one a submit, int8x, per model;
    # CONTEXT=4096 measures the steps ending there
    browser-model-submit) for r in ${ROUNDS:-1}; do for m in ${MODELS:-llama qwen3}; do for k in ${SUBMITS:-1 4 16}; do
                       step "$s-$m-$k-$r" 150 bench model --backend browser --driver plain --model "$m" --policy int8x \
                         --prompt 128 --decode 128 --per-submit "$k" --context "${CONTEXT:-0}" --timeout 140
                     done; done; done ;;
    native-model-int8x) for m in llama qwen3; do for p in 128 512; do
                       step "$s-$m-$p" 150 bench model --backend native --model "$m" --policy int8x --prompt "$p" --decode 128
                     done; done ;;
    browser-model512) for m in llama qwen3; do
                       step "$s-$m" 150 bench model --backend browser --driver plain --model "$m" --policy int8x \
                         --prompt 512 --decode 128 --timeout 140
                     done ;;
    # int8x with Chromium's f16 flag (issue 13's second setup; the int8 GEMMs still the fastest there)
    browser-model512-f16flag) for m in ${MODELS:-llama qwen3}; do
                       step "$s-$m" 150 bench model --backend browser --driver plain --model "$m" --policy int8x \
                         --prompt 512 --decode 128 --timeout 140 --browser-flags=--enable-dawn-features=vulkan_enable_f16_on_nvidia
                     done ;;
    # int8x with the f16 flag at PROMPT tokens (128 unless set)
    browser-model-f16flag) for m in ${MODELS:-llama qwen3}; do
                       step "$s-$m" 150 bench model --backend browser --driver plain --model "$m" --policy int8x \
                         --prompt "${PROMPT:-128}" --decode 128 --timeout 140 --browser-flags=--enable-dawn-features=vulkan_enable_f16_on_nvidia
                     done ;;
    # the short-prompt handoff against the tensor-core prefill at every length (--attention sgmat), alternating,
    # int8x with the f16 flag at PROMPT tokens (128 unless set); ROUNDS="1 2": two rounds
    browser-model-handoff) for r in ${ROUNDS:-1}; do for m in ${MODELS:-llama qwen3}; do for a in sgmat auto; do
                       step "$s-$m-$a-$r" 150 bench model --backend browser --driver plain --model "$m" --policy int8x \
                         --prompt "${PROMPT:-128}" --decode 128 --attention "$a" --timeout 140 \
                         --browser-flags=--enable-dawn-features=vulkan_enable_f16_on_nvidia
                     done; done; done ;;
    # a 2048-token prompt, int8x, without and with the f16 flag (the prefill attention on subgroups, then on
    # the f16 subgroup matrices: where the attention is a larger share of the prefill)
    browser-model2048) for m in llama qwen3; do for f in "" --browser-flags=--enable-dawn-features=vulkan_enable_f16_on_nvidia; do
                       step "$s-$m${f:+-f16flag}" 150 bench model --backend browser --driver plain --model "$m" --policy int8x \
                         --prompt 2048 --decode 128 --timeout 140 $f
                     done; done ;;
    # Whole models on the f16 subgroup-matrix prefill (policy f16, Chromium's f16 flag)
    browser-model512-f16) for m in llama qwen3; do
                       step "$s-$m" 150 bench model --backend browser --driver plain --model "$m" --policy f16 \
                         --prompt 512 --decode 128 --timeout 140 --browser-flags=--enable-dawn-features=vulkan_enable_f16_on_nvidia
                     done ;;
    # The transformers oracle at 2 layers: int8x (its prefill on the subgroup-matrix GEMM); then int8x and f16
    # with the f16 flag (the f16 prefill attention: a prompt past the H200 table's short prompts, which take the
    # subgroup route, PROMPT=130 for those; and the f16 GEMM; POLICIES to pick). The host has no torch: each run's logits
    # are kept in $work/<step>.artifacts/, judged on a CPU machine with `check --judge <step>.json`.
    browser-check-model) for m in llama qwen3; do
                       step "$s-$m" 150 check --suite model --backend browser --driver plain --model "$m" --layers 2 \
                         --policy int8x --timeout 140
                     done ;;
    browser-check-model-f16) for m in llama qwen3; do for p in ${POLICIES:-int8x f16}; do
                       step "$s-$m-$p${PROMPT:+-p$PROMPT}" 150 check --suite model --backend browser --driver plain --model "$m" \
                         --layers 2 --policy "$p" --prompt "${PROMPT:-200}" --timeout 140 --browser-flags=--enable-dawn-features=vulkan_enable_f16_on_nvidia
                     done; done ;;
    # decode measured at context 4096 (unmeasured steps fill the cache after a 128-token prompt)
    # decode at a short and a long context, MODELS x CONTEXTS (default 256 and 4096) x ROUNDS, int8x, prompt 128
    browser-model-decode) for r in ${ROUNDS:-1}; do for m in ${MODELS:-llama qwen3}; do for c in ${CONTEXTS:-256 4096}; do
                       step "$s-$m-$c-$r" 150 bench model --backend browser --driver plain --model "$m" --policy int8x \
                         --prompt 128 --decode 128 --context "$c" --timeout 140
                     done; done; done ;;
    # greedy against sampled decode (temperature 1, top-k 50: the sampler's two passes in place of argmax's), int8x,
    # context 256, alternating (ROUNDS="1 2": two rounds)
    browser-model-sample) for r in ${ROUNDS:-1}; do for m in ${MODELS:-llama qwen3}; do for t in 0 1; do
                       step "$s-$m-t$t-$r" 150 bench model --backend browser --driver plain --model "$m" --policy int8x \
                         --prompt 128 --decode 128 --context 256 --temperature "$t" --timeout 140
                     done; done; done ;;
    # the same natively (wgpu on the NVIDIA driver: no Chromium to install, one device call for an A/B)
    native-model-decode) for r in ${ROUNDS:-1}; do for m in ${MODELS:-llama qwen3}; do for c in ${CONTEXTS:-256 4096}; do
                       step "$s-$m-$c-$r" 150 bench model --backend native --model "$m" --policy int8x \
                         --prompt 128 --decode 128 --context "$c"
                     done; done; done ;;
    # whole models under each tuning table in turn on one adapter (the `tuning` option), alternating
    browser-model-tuning) for r in ${ROUNDS:-1}; do for m in ${MODELS:-llama qwen3}; do for c in ${CONTEXTS:-256 4096}; do
                       for t in ${TABLES:-portable h200}; do
                       step "$s-$m-$c-$t-$r" 150 bench model --backend browser --driver plain --model "$m" --policy int8x \
                         --prompt 128 --decode 128 --context "$c" --tuning "$t" --timeout 140
                     done; done; done; done ;;
    browser-model4096) for m in llama qwen3; do
                       step "$s-$m" 150 bench model --backend browser --driver plain --model "$m" --policy int8x \
                         --prompt 128 --decode 128 --context 4096 --timeout 140
                     done ;;
    # reliability: 10,000 greedy steps twice at full depth (identical tokens, flat memory, the end refused)
    browser-soak)    for m in llama qwen3; do
                       step "$s-$m" 200 check --suite model_soak --backend browser --driver plain --model "$m" \
                         --prompt 128 --steps "${SOAK_STEPS:-10000}" --timeout 190
                     done ;;
    native-soak)     for m in llama qwen3; do
                       step "$s-$m" 200 check --suite model_soak --backend native --model "$m" --prompt 128 \
                         --steps "${SOAK_STEPS:-10000}"
                     done ;;
    # the same decode with the position kept on the host (every step re-sized), for the comparison
    browser-model-hostpos) for m in llama qwen3; do
                       step "$s-$m" 150 bench model --backend browser --driver plain --model "$m" --policy int8x \
                         --prompt 128 --decode 128 --position host --timeout 140
                     done ;;
    # The peer (issue 16): ONNX Runtime Web beside our engine in one page, full depth, same weights. Needs
    # web/vendor/ort/<flavour> and the peer builds carried in .gpu-peer/ (made here with `peer build --model M
    # --export .gpu-peer`); bench compare writes each model.onnx.data from its recipe (numpy) on first use.
    # No transformers there: each JSON's .artifacts/ holds both engines' logits for `peer judge` on a CPU
    # machine (the first 4 decode steps judged; all 128 timed). Peer device: auto (ours: 32-wide subgroups).
    browser-peer)    mkdir -p web/vendor/peer && cp -r .gpu-peer/. web/vendor/peer/
                     for m in ${PEER_MODELS:-llama qwen3}; do for p in ${PEER_PROMPTS:-128 512}; do
                       step "$s-$m-$p" 400 bench compare --peer ort-web --backend browser --driver plain --model "$m" \
                         --policy int8x --prompt "$p" --decode 128 --trials 3 --checked 4 --flavour "${PEER_FLAVOUR:-jspi}" \
                         --timeout 390
                     done; done ;;
    # SmolLM2-135M-Instruct from its GGUF (issue 17; the file travels in two parts, docs/GPU_HOST.md): the chat
    # prompt's answer, then a long answer for tok/s, per policy; natively and in Chromium (the page's chat view)
    native-smollm2)  for p in int8x f32; do
                       step "$s-$p-answer" 120 generate --model "$SMOLLM2" --chat --prompt "$SMOLLM2_ASK" --steps 32 \
                         --policy "$p" --batch 4
                       step "$s-$p-long" 120 generate --model "$SMOLLM2" --chat --prompt "$SMOLLM2_LONG" --steps 256 \
                         --policy "$p" --batch 16
                     done ;;
    browser-smollm2) for p in int8x f32; do
                       step "$s-$p-answer" 150 generate --backend browser --driver plain --model smollm2 --chat \
                         --prompt "$SMOLLM2_ASK" --steps 32 --policy "$p" --batch 4 --timeout 140
                       step "$s-$p-long" 150 generate --backend browser --driver plain --model smollm2 --chat \
                         --prompt "$SMOLLM2_LONG" --steps 256 --policy "$p" --batch 16 --timeout 140
                     done ;;
    # the same long answer sampled on the GPU (temperature 0.8, top-k 40, top-p 0.95, seed 1) against greedy's tok/s
    native-sample)   for p in int8x f32; do
                       step "$s-$p" 120 generate --model "$SMOLLM2" --chat --prompt "$SMOLLM2_LONG" --steps 256 \
                         --policy "$p" --batch 16 $SAMPLING
                     done ;;
    browser-sample)  for p in int8x f32; do
                       step "$s-$p" 150 generate --backend browser --driver plain --model smollm2 --chat \
                         --prompt "$SMOLLM2_LONG" --steps 256 --policy "$p" --batch 16 --timeout 140 $SAMPLING
                     done ;;
    *) echo "unknown step $s" ;;
  esac
done
kill $clock_log 2>/dev/null
grep -a "CONSOLE\|Uncaught" results/chromium.log | tail -n 200 > "$work/chromium-console.txt" 2>/dev/null
tail -n 120 results/chromium.log > "$work/chromium-tail.txt" 2>/dev/null   # a crash's last words
# a check's kept artifacts (a model's logits: MBs) travel apart, so the tables always fit a transfer
tar -czf "$out/gpu-results.tar.gz" -C results --exclude='*.artifacts' gpu-run
for kept in "$work"/*.artifacts; do
  [ -d "$kept" ] && tar -czf "$out/$(basename "$kept").tar.gz" -C results "gpu-run/$(basename "$kept")"
done
