#!/usr/bin/env bash
# The booking world's GPU run (benchmarks/booking/h200.sh's phases) as one background pipeline within a
# DEADLINE, sized for ~18 minutes of one H100 (80 GB): the base model and the SFT run share the GPU, then the
# SFT model's evaluation and two GRPO seeds side by side, then each seed's checkpoint choice on val and its
# evaluation on test and ood. A 0.5B model leaves most of the GPU idle, so the phases that do not depend on
# each other run at once, each vLLM with a small fixed share of the memory (GPU_UTIL / VLLM_UTIL) and each
# trainer with small micro-batches (MICRO_BATCH, 2: the same 32 completions a step as train.sh's 8 x 4) and its own
# MASTER_PORT (two colocated trainers on the default 29500 kill the second at start-up: gpu_pipeline says so).
#
# On the GPU machine, from the repository root, after the kit of benchmarks/README.md is installed:
#   cp -a . /tmp/repo && cd /tmp/repo && setsid nohup bash benchmarks/booking/pipeline.sh /tmp/booking-run \
#     > /tmp/booking-pipeline.log 2>&1 < /dev/null &
#   bash benchmarks/booking/pipeline.sh --status /tmp/booking-run     # phases, GPU memory, last log lines
#
#   prepare -> eval-base ------------------------------------------------------------\
#          \-> sft -> eval-sft ------------------------------------------------------->  summary
#                 \-> train seed 1 -> select seed 1 -> eval-trained seed 1 ------------/
#                  \-> train seed 2 -> select seed 2 -> eval-trained seed 2 ----------/
#
# Knobs: DEADLINE (s, 1080), SEEDS ("1 2"), STEPS (60: GRPO steps of each seed; training stops early at the
# deadline less SCORE_RESERVE, 270 s, what select and eval-trained take), STAGGER (30 s between vLLM
# start-ups: each measures the GPU's free memory as it starts), BK (the phase script; tests give a stub).
# Each phase's output goes to R/<phase>.out, its start, end, exit status and seconds to R/phases.tsv; R/gpu.csv
# samples GPU memory every 10 s. A failed phase is retried once while more than 4 minutes are left. The last
# phase, summary, writes R/summary.md (benchmarks/booking/summarize.py: per split and type, each model).
set -uo pipefail
if [ "${1:-}" = --status ]; then
  r=${2:?results dir}
  cat "$r/phases.tsv" 2>/dev/null; tail -n 2 "$r/gpu.csv" 2>/dev/null
  for f in "$r"/*.out; do [ -f "$f" ] && { echo "== $f"; tail -n 3 "$f"; }; done
  exit 0
fi
R=${1:?results dir}
T0=$(date +%s) DEADLINE=${DEADLINE:-1080} SEEDS=${SEEDS:-1 2} STEPS=${STEPS:-60} STAGGER=${STAGGER:-30}
SCORE_RESERVE=${SCORE_RESERVE:-270} RETRY_PAUSE=${RETRY_PAUSE:-20} POLL=${POLL:-5}
BK=${BK:-"bash benchmarks/booking/h200.sh"}
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True  # less fragmentation, so the shares stay small
mkdir -p "$R"
source benchmarks/gpu_pipeline/phases.sh  # elapsed, left, phase; R/gpu.csv (its sampler in $monitor)

seed_arm() {  # SEED PORT: GRPO from the SFT model, the checkpoint chosen on val, scored on test and ood
  local -x SEED=$1
  # Two trainers side by side: SLEEP_LEVEL=0 and fixed_kv_flags (benchmarks/gpu_pipeline/phases.sh says why)
  MASTER_PORT=$2 SLEEP_LEVEL=0 TRAIN_FLAGS="$(fixed_kv_flags)" VLLM_UTIL=0.12 MICRO_BATCH=${MICRO_BATCH:-2} GRAD_ACC=$(( 32 / ${MICRO_BATCH:-2} )) STEPS=$STEPS TRAIN_TIMEOUT=$(( $(left) - SCORE_RESERVE )) \
    phase "train-s$SEED" $BK train "$R"
  GPU_UTIL=0.15 phase "select-s$SEED" $BK select "$R"
  GPU_UTIL=0.15 phase "eval-trained-s$SEED" $BK eval-trained "$R"
}

phase prepare $BK prepare "$R" || exit 1
GPU_UTIL=0.25 phase eval-base $BK eval-base "$R" & others=($!)
sleep "$STAGGER"  # the base model's vLLM measures the free memory before the SFT run takes its share
if MASTER_PORT=29521 phase sft $BK sft "$R"; then
  GPU_UTIL=0.15 phase eval-sft $BK eval-sft "$R" & others+=($!)
  port=29531 arms=()
  for seed in $SEEDS; do
    sleep "$STAGGER"; seed_arm "$seed" "$port" & arms+=($!); port=$((port + 1))
  done
  wait "${arms[@]}"
fi
wait "${others[@]}"
phase summary python3 benchmarks/booking/summarize.py "$R"
kill "$monitor" 2>/dev/null
printf 'pipeline\tend\t%s\n' "$(elapsed)" >> "$R/phases.tsv"
