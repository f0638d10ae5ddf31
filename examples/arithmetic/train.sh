#!/usr/bin/env bash
# GRPO from the base model (no SFT) on arithmetic word problems with the calculator tool: single GPU,
# LoRA, colocated vLLM. From the repository root:
#   MODEL=/path/to/Qwen2.5-Coder-0.5B-Instruct bash examples/arithmetic/train.sh [extra swift rlhf flags]
# 200 steps x 4 questions x 8 samples: 800 of the 2,000 train problems, each seen at most once. The
# committed H200 run is benchmarks/rl_from_base/h200.sh (saves every 25 steps, resumes across commands).
# VLLM_UTIL (vLLM's share of GPU memory) and MICRO_BATCH x GRAD_ACC (default 32 x 1: the step's 32
# completions) let it share one GPU with other runs. DYNAMIC_SAMPLE=1 turns on DAPO's dynamic sampling:
# a group whose 8 rewards are all equal carries no GRPO signal, and ms-swift regenerates such groups from
# fresh rows, up to MAX_RESAMPLE (6) more rounds, until the step's batch is all signal. On 2026-12-01b,
# from step 40 on, 3 of 4 groups were all right or all wrong. ms-swift falls back to the step's first
# batch when the rounds run out, so MAX_RESAMPLE is above its default of 3 (at one group in five with
# signal, four groups take about five rounds).
# MAX_COMPLETION (192): tokens each turn may write (env_python.yaml's programs need more than one expression).
# Every other knob (VLLM_EAGER, SLEEP_LEVEL, SEED, ...): examples/grpo.sh.
set -euo pipefail
OUTPUT=${OUTPUT:-output/arithmetic} DATASET=${DATASET:-examples/arithmetic/data/train.jsonl}
RLFACTORY_ENV=${RLFACTORY_ENV:-examples/arithmetic/env.yaml}
MAX_TURNS=4 MAX_LENGTH=2048 MAX_COMPLETION=${MAX_COMPLETION:-192} STEPS=${STEPS:-200} LR=${LR:-5e-5}
LORA_RANK=16 VLLM_UTIL=${VLLM_UTIL:-0.3} MICRO_BATCH=${MICRO_BATCH:-32} GRAD_ACC=${GRAD_ACC:-1}
SAVE_STEPS=${SAVE_STEPS:-25}
source "$(dirname "$0")/../grpo.sh"
