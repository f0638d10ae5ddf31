#!/usr/bin/env bash
# Issue 31's GPU runs in one background pipeline on one GPU: the colocate defaults grid, the floors, the
# two-lookup workload, then server mode, each phase one run after the other (timings must not share the GPU).
# On the GPU machine, from the repository root, after the kit of ../shared/gpu/README.md is installed:
#   cp -a . /tmp/repo && cd /tmp/repo && setsid nohup bash benchmarks/generation/pipeline.sh /tmp/g31 \
#     > /tmp/g31.log 2>&1 < /dev/null &
#   bash benchmarks/generation/pipeline.sh --wait /tmp/g31 SECONDS   # status until done or SECONDS passed
# PHASES (default: all below, most wanted first) picks phases; a phase is skipped once DEADLINE seconds (default
# 1500) have passed since the start. Grid runs: LEARNING_RATE=0, 0 s latency, rlfactory, GRID_STEPS (6)
# steps, the arithmetic workload of colocate_h200.sh; each TAG is one colocate vLLM setting:
#   eager (today's recipes), graphs (--vllm_enforce_eager false), graphs_sleep / eager_sleep (+ --sleep_level
#   1), graphs_lora (+ --vllm_enable_lora true), graphs_nopc (prefix caching off), graphs_len2k
#   (--vllm_max_model_len 2048, the trainer's --max_length), eager2 (eager again: the spread).
# floor: floor.py gen on the eager and graphs runs' trajectories with their engine settings, floor.py train on
# eager's. tools_sft: the lookup warm start (the base model does not call the tool): SFT_DEMOS (500) oracle
# demonstrations (environments/lookup/demos.py), SFT_EPOCHS (2) of LoRA SFT (examples/sft.sh; SFT_FLAGS:
# extra swift sft flags) merged into LOOKUP_MODEL (/tmp/lookup-sft-model), ~1.5 min on one H100.
# tools_rl / tools_sync: WORKLOAD=lookup from LOOKUP_MODEL (BASE_MODEL, /tmp/qwen05, with a log line when
# tools_sft left none) with TOOL_VLLM (default the recipes' graphs + --sleep_level 1; eager if the graphs
# phase failed), TOOL_STEPS (5) steps: rlfactory at RL_LATENCIES (0 0.5 2) s; sync_tools at 0 and 0.5 s, and
# at 2 s (phase tools_sync_2s) for SYNC_2S_STEPS (2: ~64 calls x 2 s one after the other, > 2 min a step).
# tools_server: the same lookup runs of rlfactory in server mode (`swift rollout` with the per-trajectory async
# engine and the trainer on this one GPU, SERVER_GPUS "0 0"; the rollout server's vLLM with CUDA graphs unless
# the graphs phase failed), at RL_LATENCIES, beside colocate's in R/tools (issue 31, item 3).
# server: colocate_h200.sh server mode on this one GPU, the arithmetic workload. MODEL_TYPE / TEMPLATE (qwen2 / qwen2_5) pass through.
set -uo pipefail
if [ "${1:-}" = --wait ]; then
  r=${2:?results dir}; limit=${3:-500}; t0=$(date +%s)
  while [ ! -f "$r/done" ] && [ $(( $(date +%s) - t0 )) -lt "$limit" ]; do sleep 5; done
  cat "$r/phases.tsv" 2>/dev/null; tail -n 1 "$r/gpu.csv" 2>/dev/null; tail -n 4 "$r/pipeline.log" 2>/dev/null
  exit 0
fi
R=${1:?results dir}; mkdir -p "$R/colo" "$R/floor"
T0=$(date +%s) DEADLINE=${DEADLINE:-1500}
PHASES=${PHASES:-"eager graphs graphs_sleep graphs_lora graphs_nopc floor tools_sft tools_rl tools_sync tools_server eager_sleep graphs_len2k eager2 server"}
G="--vllm_enforce_eager false"
declare -A FLAGS=([eager]="" [eager2]="" [graphs]="$G" [graphs_sleep]="$G --sleep_level 1"
  [eager_sleep]="--sleep_level 1" [graphs_lora]="$G --vllm_enable_lora true"
  [graphs_nopc]="$G --vllm_enable_prefix_caching false" [graphs_len2k]="$G --vllm_max_model_len 2048")
TOOL_VLLM=${TOOL_VLLM-"$G --sleep_level 1"}
BASE_MODEL=${BASE_MODEL:-/tmp/qwen05} LOOKUP_MODEL=${LOOKUP_MODEL:-/tmp/lookup-sft-model}
log() { echo "[$(date +%T)] $*" >> "$R/pipeline.log"; }
phase() {  # NAME COMMAND...: run one phase, record its start, end, status and seconds
  local name=$1 start rc; shift
  if [ $(( $(date +%s) - T0 )) -ge "$DEADLINE" ]; then log "skip $name (deadline)"; return; fi
  start=$(date +%s); log "start $name"
  "$@" >> "$R/$name.out" 2>&1; rc=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$start" "$rc" "$(( $(date +%s) - start ))" >> "$R/phases.tsv"
  log "end $name rc=$rc"
}
grid_run() { TAG=$1 VLLM_ARGS="${FLAGS[$1]}" SCHEDULERS=rlfactory LEARNING_RATE=0 \
  bash benchmarks/colocate_h200.sh 0 "${GRID_STEPS:-6}" "$R/colo"; }
floors() {  # floor.py imports the project (colocate_h200.sh puts it on the path itself)
  local f=benchmarks/generation/floor.py
  export PYTHONPATH="$PWD:${PYTHONPATH:-}"
  python3 $f gen --traj "$R/colo/traj/eager_rlfactory-0.jsonl" --model /tmp/qwen05 --out "$R/floor/gen-eager.json" --enforce-eager true
  python3 $f gen --traj "$R/colo/traj/graphs_rlfactory-0.jsonl" --model /tmp/qwen05 --out "$R/floor/gen-graphs.json" --enforce-eager false
  python3 $f train --traj "$R/colo/traj/eager_rlfactory-0.jsonl" --model /tmp/qwen05 --out "$R/floor/train-eager.json"
}
lookup_sft() {  # demonstrations, LoRA SFT, merged into LOOKUP_MODEL (none left behind when a step fails)
  local run=$R/sft flags; read -r -a flags <<< "${SFT_FLAGS:-}"
  rm -rf "$run" "$LOOKUP_MODEL"
  ( env_sh=${DEVICE_ENV:-/tmp/device_env.sh}; if [ -f "$env_sh" ]; then source "$env_sh" >/dev/null; fi
    export PYTHONPATH="$PWD:${PYTHONPATH:-}"
    python3 benchmarks/environments/lookup/demos.py --n "${SFT_DEMOS:-500}" --template "${TEMPLATE:-qwen2_5}" \
      --out "$run/sft.jsonl" &&
      MODEL=$BASE_MODEL OUTPUT=$run EPOCHS=${SFT_EPOCHS:-2} bash examples/sft.sh "${flags[@]}" &&
      mv "$run/merged" "$LOOKUP_MODEL" && rm -rf "$run"/v*/checkpoint-* )
}
tools() {  # SCHEDULER LATENCY...: from the warm-start model; graphs' flags unless the graphs phase failed
  local sched=$1 lat flags=$TOOL_VLLM model=$LOOKUP_MODEL mode=${TOOL_MODE:-colocate} eager=false; shift
  [ -n "$(awk -F'\t' '$1 == "graphs" && $3 != 0' "$R/phases.tsv" 2>/dev/null)" ] && flags= eager=true
  if [ -f "$LOOKUP_MODEL/config.json" ]; then log "tools $sched: the warm-start model $LOOKUP_MODEL"
  else
    model=$BASE_MODEL; log "tools $sched: NO warm-start model at $LOOKUP_MODEL (tools_sft failed or did not run):" \
      "the base model $BASE_MODEL, which does not call the tool (expect ~0 calls per trajectory)"
  fi
  for lat in "$@"; do
    MODEL=$model WORKLOAD=lookup TAG=lookup VLLM_ARGS="$flags" SCHEDULERS=$sched LEARNING_RATE=0 SERVER_GPUS="0 0" \
      ROLLOUT_EAGER=$eager bash benchmarks/colocate_h200.sh "$lat" "${TOOL_STEPS:-5}" "$R/tools" "$mode" || return; done
}
server() { for lat in 0 0.5 2; do SERVER_GPUS="0 0" SCHEDULERS=rlfactory LEARNING_RATE=0 \
  bash benchmarks/colocate_h200.sh "$lat" "${TOOL_STEPS:-5}" "$R/server" server || return; done; }
nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader -l 10 > "$R/gpu.csv" 2>&1 &
for p in $PHASES; do
  case "$p" in
    floor) phase floor floors ;;
    tools_sft) phase tools_sft lookup_sft ;;
    tools_rl) phase tools_rl tools rlfactory ${RL_LATENCIES:-0 0.5 2} ;;
    tools_sync) phase tools_sync tools sync_tools 0 0.5
      TOOL_STEPS=${SYNC_2S_STEPS:-2} phase tools_sync_2s tools sync_tools 2 ;;
    tools_server) TOOL_MODE=server phase tools_server tools rlfactory ${RL_LATENCIES:-0 0.5 2} ;;
    server) phase server server ;;
    *) phase "$p" grid_run "$p" ;;
  esac
done
kill %1 2>/dev/null
touch "$R/done"; log "done"
