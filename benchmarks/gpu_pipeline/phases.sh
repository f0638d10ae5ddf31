# Sourced by the GPU pipelines (pipeline.sh, benchmarks/deepsearch/issue30.sh, benchmarks/booking/pipeline.sh):
# time against DEADLINE, phases recorded in R/phases.tsv (retried once after a failure while time allows), commands beside a running one,
# and R/gpu.csv, GPU memory and load every 10 s (its sampler's pid in $monitor). Needs R, T0, DEADLINE,
# RETRY_PAUSE and POLL set by the script that sources it.
elapsed() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( DEADLINE - $(elapsed) )); }

phase() {  # NAME CMD...: run CMD, record it in phases.tsv; retry once after a failure if > 4 min are left
  local name=$1 start rc; shift
  start=$(elapsed); printf '%s\tstart\t%s\n' "$name" "$start" >> "$R/phases.tsv"
  "$@" >> "$R/$name.out" 2>&1; rc=$?
  if [ "$rc" -ne 0 ] && [ "$(left)" -gt 240 ]; then
    printf '%s\tretry\t%s\t%s\n' "$name" "$(elapsed)" "$rc" >> "$R/phases.tsv"
    sleep "$RETRY_PAUSE"; "$@" >> "$R/$name.out" 2>&1; rc=$?
  fi
  printf '%s\tend\t%s\trc=%s\t%ss\n' "$name" "$(elapsed)" "$rc" $(( $(elapsed) - start )) >> "$R/phases.tsv"
  return "$rc"
}
beside() {  # PID INTERVAL CMD...: while PID lives, run CMD at most every INTERVAL s (evaluations beside training)
  local pid=$1 every=$2 last; shift 2
  last=$(elapsed)
  while kill -0 "$pid" 2>/dev/null; do
    if [ $(( $(elapsed) - last )) -ge "$every" ]; then "$@" || true; last=$(elapsed); fi
    sleep "$POLL"
  done
}
train_timeout() { echo $(( $(left) - ${1:?seconds to keep for what follows} )); }
# A colocated trainer's TRAIN_FLAGS when engines start side by side: a KV cache of fixed size (KV_BYTES, 3 GiB:
# 32 completions of 6,144 tokens need 2.3 GiB of a 0.5B Qwen2's 12 KiB a token), with which vLLM skips the
# free-memory profiling that another engine's start or sleep upset on 2026-12-06 (issue 30's seed 1: "other
# processes release GPU memory while vLLM is profiling"). Run it with SLEEP_LEVEL=0 too: an engine that never
# sleeps never measures a sleep ("Memory usage increased after sleeping").
fixed_kv_flags() { echo "--vllm_engine_kwargs {\"kv_cache_memory_bytes\":${KV_BYTES:-3221225472}} ${TRAIN_FLAGS:-}"; }

(while sleep 10; do
   printf '%s,%s\n' "$(elapsed)" "$(nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader,nounits 2>/dev/null | tr -d ' ')"
 done >> "$R/gpu.csv" 2>/dev/null) & monitor=$!  # its sleep outlives a kill: it must hold no caller's pipe

